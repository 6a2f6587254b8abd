"""Corpus stage throughput: trajectories per second through rows alone and through assemble.

Builds N distinct rollout-like trajectories (12 turns, ~2 kB tool outputs) and reports the
median time of: converting them to SFT rows; the whole ``assemble`` (scrub, guard, filters,
exact + near dedup, split); and writing the result as Parquet through the store.

    .venv/bin/python benchmarks/bench_corpus.py [--trajectories 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time


def _trajectories(n: int):  # type: ignore[no-untyped-def]
    from swemill.core.records import (
        Message,
        Outcome,
        TextBlock,
        ToolResultBlock,
        ToolUseBlock,
        Trajectory,
    )
    from swemill.core.tools import ToolCall

    rng = random.Random(0)
    words = [f"name{i}" for i in range(5000)]
    out = []
    for t in range(n):
        msgs = [Message(role="system", content=[TextBlock(text="You fix bugs in /workspace.")]),
                Message(role="user", content=[TextBlock(text=" ".join(rng.sample(words, 60)))])]
        for k in range(5):
            call = ToolCall("read", {"path": f"pkg/m{rng.randrange(50)}.py"}, id=f"c{k}")
            msgs.append(Message(role="assistant", content=[TextBlock(text="Reading."),
                                                           ToolUseBlock(call=call)]))
            body = "\n".join(f"    {' = '.join(rng.sample(words, 3))}" for _ in range(80))
            msgs.append(Message(role="tool", content=[ToolResultBlock(call_id=f"c{k}",
                                                                      content=body)]))
        out.append(Trajectory(trajectory_id=f"t{t}", task_id=f"task{t % 200}", source="rollout",
                              policy="scripted:oracle", messages=msgs,
                              outcome=Outcome(grade=1.0, resolved=True)))
    return out


def _median(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from swemill.corpus.assemble import assemble
    from swemill.corpus.rows import sft_row
    from swemill.corpus.write import write_corpus
    from swemill.store import Store

    trajs = _trajectories(args.trajectories)
    n = len(trajs)
    rows_s = _median(lambda: [sft_row(t) for t in trajs], args.repeat)
    tables = assemble(trajs)
    asm_s = _median(lambda: assemble(trajs), args.repeat)
    store = Store.open(tempfile.mkdtemp(prefix="bench-corpus-"))
    write_s = _median(lambda: write_corpus(store, "bench", tables), args.repeat)
    print(f"trajectories: {n}, kept: {len(tables.sft) + len(tables.sft_holdout)}")
    print(f"rows only:  median {rows_s:.2f} s  ({n / rows_s:,.0f} traj/s)")
    print(f"assemble:   median {asm_s:.2f} s  ({n / asm_s:,.0f} traj/s)")
    print(f"write:      median {write_s:.2f} s  ({n / write_s:,.0f} rows/s)")


if __name__ == "__main__":
    main()
