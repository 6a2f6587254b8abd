"""Replay throughput against fake teachers on loopback, and batch planning at scale.

Three fake OpenAI-compatible servers (``swemill_testkit.fake_server``) answer every call
after a fixed latency, like a hosted model would. The same states are replayed at several
concurrencies under a dollar budget large enough not to refuse; reported: calls per second
(median of ``--repeat`` runs) and the speed-up over concurrency 1. Then the shard plan of
250,000 records of random size is timed (pure planning, no I/O).

    .venv/bin/python benchmarks/bench_replay.py [--states 40] [--latency-ms 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from contextlib import ExitStack

from swemill.core.records import Message, TextBlock
from swemill.core.tools import ToolCall, tool_schemas
from swemill.policies.budget import Budget
from swemill.replay.batch_plan import BatchQuotas, plan_shards
from swemill.replay.realtime import replay_realtime
from swemill.replay.teachers import make_policy, parse_teacher
from swemill.traces.states import TraceState
from swemill_testkit.fake_server import FakeOpenAIServer, tool_reply

MODELS = ("qwen3-coder", "llama-3.3-70b", "mistral-large")


def _states(n: int) -> list[TraceState]:
    call = ToolCall("bash", {"command": "ls"}, id="c")
    out = []
    for i in range(n):
        history = [Message(role="user", content=[TextBlock(text=f"task {i}: " + "x" * 2000)])]
        out.append(TraceState(
            state_id=f"b::{i:04d}", session_id="b", trajectory_id="b", turn=i, prefix_len=1,
            messages=history, response=Message(role="assistant"), actions=[call],
            action_keys=[call.canonical_key()]))
    return out


def realtime(n_states: int, latency_s: float, concurrency: int) -> float:
    states = _states(n_states)
    with ExitStack() as stack:
        work = []
        for model in MODELS:
            srv = stack.enter_context(FakeOpenAIServer(
                [tool_reply("bash", {"command": "ls"}, delay_s=latency_s)], repeat_last=True,
                price_in=1.0, price_out=2.0))
            t = parse_teacher(f"openai:{model}@{srv.base_url}#price=1/2")
            policy = make_policy(t, max_tokens=256)
            work += [(s, t, policy) for s in states]
        start = time.perf_counter()
        replies = replay_realtime(work, Budget(100.0), tool_schemas(), concurrency=concurrency)
        wall = time.perf_counter() - start
    assert all(r.status == "ok" for r in replies), {r.status for r in replies}
    return len(replies) / wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", type=int, default=40)
    ap.add_argument("--latency-ms", type=float, default=100.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    latency = args.latency_ms / 1000
    print(f"realtime replay: {args.states} states x {len(MODELS)} teachers, "
          f"{args.latency_ms:.0f} ms per call, median of {args.repeat}")
    base = None
    for c in (1, 4, 16):
        rate = statistics.median(realtime(args.states, latency, c) for _ in range(args.repeat))
        base = base or rate
        print(f"  concurrency {c:>2}: {rate:7.1f} calls/s   x{rate / base:5.2f} vs concurrency 1")
    rng = random.Random(0)
    sizes = [rng.randint(2_000, 30_000) for _ in range(250_000)]
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        plan = plan_shards(sizes, BatchQuotas(max_records_per_job=20_000))
        times.append(time.perf_counter() - start)
    print(f"batch plan: 250,000 records -> {len(plan.shards)} shards in "
          f"{statistics.median(times) * 1000:.0f} ms (median of {args.repeat})")


if __name__ == "__main__":
    main()
