"""Rollout costs on the bundled sample: what one attempt spends where, and worker scaling.

Builds a few validated tasks with ``run_tasks`` (once, in a temporary store and cache), then
reports medians over the tasks of: ``reset`` (unpack the snapshot twice, open the sandbox),
one ``fork`` of a task environment, one tool step (``bash true``), a grading run
(``submit``: change set, lint, fork, restore, FAIL_TO_PASS + PASS_TO_PASS), and a whole
oracle trajectory; then the wall time of ``run_rollouts`` with the oracle at 1 and at 2
workers, side by side.

    .venv/bin/python benchmarks/bench_rollout.py [--tasks 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def _median_s(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-rollout-"))
    os.environ.setdefault("SWEMILL_CACHE", str(tmp / "cache"))

    from swemill.agent.env import EnvConfig, TaskEnv
    from swemill.agent.harness import Limits, collect_trajectory
    from swemill.agent.rollout import RolloutConfig, run_rollouts
    from swemill.core.records import Golden, Task
    from swemill.core.tools import ToolCall
    from swemill.policies.scripted import OraclePolicy
    from swemill.store import Store
    from swemill.validate.tasks_config import TasksConfig
    from swemill.validate.validator import run_tasks

    store = Store.open(str(tmp / "store"))
    run_tasks("sample", store, "bench", TasksConfig(max_tasks=args.tasks, workers=2))
    tasks = store.read_records("tasks", "bench", Task)
    goldens = {g.instance_id: g for g in store.read_records("golden", "bench", Golden)}
    print(f"{len(tasks)} tasks of the sample; medians over {args.repeat} runs per task")

    rows: dict[str, list[float]] = {k: [] for k in
                                    ("reset", "fork", "step bash", "grade", "oracle trajectory")}
    for task in tasks:
        env = TaskEnv(EnvConfig(), store=store)
        rows["reset"].append(_median_s(lambda: env.reset(task), args.repeat))  # noqa: B023
        rows["fork"].append(_median_s(lambda: env.fork().close(), args.repeat))  # noqa: B023
        rows["step bash"].append(_median_s(
            lambda: env.step(ToolCall("bash", {"command": "true"})), args.repeat))  # noqa: B023
        rows["grade"].append(_median_s(lambda: env.submit(), args.repeat))  # noqa: B023
        env.close()
        patch = goldens[task.instance_id].golden_patch
        rows["oracle trajectory"].append(_median_s(lambda: collect_trajectory(
            TaskEnv(EnvConfig(), store=store), task, OraclePolicy(patch),  # noqa: B023
            Limits()), args.repeat))
    for name, values in rows.items():
        print(f"  {name:18} median {statistics.median(values) * 1000:8.1f} ms")

    walls = {}
    for workers in (1, 2):
        run = f"w{workers}"
        start = time.perf_counter()
        run_rollouts(store, "bench", RolloutConfig(policy="oracle", workers=workers), run_id=run)
        walls[workers] = time.perf_counter() - start
    print(f"  run_rollouts oracle over {len(tasks)} tasks: 1 worker {walls[1]:.2f} s, "
          f"2 workers {walls[2]:.2f} s, speed-up x{walls[1] / walls[2]:.2f}")


if __name__ == "__main__":
    main()
