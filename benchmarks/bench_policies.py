"""Policy-layer overheads: budget operations, a model call over loopback, oracle planning.

Prints medians over ``--repeat`` runs:

- budget: reserve+settle pairs per second, one thread and 16 threads sharing one budget;
- budget use: the fraction of ``--max-usd`` really spent when 8 workers run a costed fake
  server until the budget refuses (reservations are worst cases, so this is below 1);
- openai policy: milliseconds per ``act`` against the fake server on 127.0.0.1 (swemill's
  conversion + the SDK + HTTP; no model time);
- oracle: milliseconds to plan the tool calls of a 60-hunk diff on a 3,000-line file.

    .venv/bin/python benchmarks/bench_policies.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import difflib
import random
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from swemill.core.errors import BudgetExceeded
from swemill.core.records import Message, TextBlock
from swemill.core.tools import tool_schemas
from swemill.policies import Price, policy_from_spec
from swemill.policies.budget import Budget, call_with_budget
from swemill.policies.scripted import OraclePolicy
from swemill_testkit.fake_server import FakeOpenAIServer, FakeReply, FakeToolCall

MESSAGES = [Message(role="user", content=[TextBlock(text="Fix the failing test.")])]


def budget_ops_per_s(threads: int, per_thread: int = 20_000) -> float:
    budget = Budget(max_usd=1e9)

    def work() -> None:
        for _ in range(per_thread):
            budget.settle(budget.reserve(0.001, 10), 0.0005, 5)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for f in [pool.submit(work) for _ in range(threads)]:
            f.result()
    return threads * per_thread / (time.perf_counter() - t0)


def budget_use(seed: int) -> tuple[float, int]:
    price = Price(20.0, 800.0)
    rng = random.Random(seed)
    lock = threading.Lock()

    def script(request: dict) -> FakeReply:  # type: ignore[type-arg]
        with lock:
            out = rng.randint(1, request["body"]["max_tokens"])
        return FakeReply(tool_calls=[FakeToolCall("submit", {})], completion_tokens=out)

    budget = Budget(max_usd=1.0)
    with FakeOpenAIServer(script, price_in=price.input, price_out=price.output) as srv:
        policy = policy_from_spec(f"openai:fake@{srv.base_url}", price=price, max_tokens=64)

        def worker() -> None:
            while True:
                try:
                    call_with_budget(policy, budget, MESSAGES, tool_schemas())
                except BudgetExceeded:
                    return

        with ThreadPoolExecutor(8) as pool:
            for f in [pool.submit(worker) for _ in range(8)]:
                f.result()
    return budget.spent_usd, budget.calls


def act_ms(calls: int = 200) -> float:
    with FakeOpenAIServer([FakeReply(tool_calls=[FakeToolCall("submit", {})])],
                          repeat_last=True) as srv:
        policy = policy_from_spec(f"openai:fake@{srv.base_url}")
        tools = tool_schemas()
        policy.act(MESSAGES, tools)  # warm the connection pool
        t0 = time.perf_counter()
        for _ in range(calls):
            policy.act(MESSAGES, tools)
    return (time.perf_counter() - t0) / calls * 1000


def oracle_ms() -> float:
    before = [f"line {i % 40}\n" for i in range(3000)]  # many repeats: uniqueness is hard
    after = list(before)
    for i in range(25, 3000, 50):
        after[i] = f"fixed {i}\n"
    patch = "".join(difflib.unified_diff(before, after, "a/big.py", "b/big.py"))
    read = [Message(role="tool", content=[])]
    t0 = time.perf_counter()
    policy = OraclePolicy(patch)
    policy.plan(read)
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    n = parser.parse_args().repeat
    med = statistics.median
    for threads in (1, 16):
        rate = med(budget_ops_per_s(threads) for _ in range(n))
        print(f"budget reserve+settle, {threads:2d} thread(s): {rate:,.0f}/s")
    uses = [budget_use(seed) for seed in range(n)]
    print(f"budget use at stop (8 workers, $1.00): median ${med(u for u, _ in uses):.3f} "
          f"spent, max ${max(u for u, _ in uses):.3f}, median {med(c for _, c in uses)} calls")
    print(f"openai policy act over loopback: {med(act_ms() for _ in range(n)):.2f} ms/call")
    print(f"oracle plan, 60 hunks x 3000 lines: {med(oracle_ms() for _ in range(n)):.1f} ms")


if __name__ == "__main__":
    main()
