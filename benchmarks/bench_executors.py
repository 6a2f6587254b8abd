"""Executor overheads, side by side in one run: what placing an item costs on each backend,
and the Batch child's cold start (process start -> env ready -> work done).

    .venv/bin/python benchmarks/bench_executors.py [--items 64] [--repeat 3]

Prints medians over ``--repeat`` rounds: the per-item wall time of a trivial function on the
local process pool, on a local Ray instance (2 CPUs) and in-process; and the Batch child's
timings (a real ``swemill aws batch-child`` process per index against the local S3 server).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from swemill.executors.aws_batch import AwsBatchExecutor, result_key
from swemill.executors.process_pool import LocalExecutor
from swemill.store import Store
from swemill_testkit.executors import square
from swemill_testkit.store import local_s3


def _per_item(executor: object, n: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = executor.map(square, list(range(n)), retries=0)  # type: ignore[attr-defined]
        assert all(r.ok for r in out)
        times.append((time.perf_counter() - start) / n)
    return statistics.median(times)


def _batch_child(children: int) -> dict[str, float]:
    with local_s3() as s3:
        store = Store(s3.root("bench"), storage_options=s3.storage_options)
        ex = AwsBatchExecutor(store, job_queue="q", job_definition="d")
        job = ex.write_manifest(square, list(range(children)))
        env = {**os.environ, **s3.env(), "SWEMILL_BATCH_ROOT": job.url}
        walls = []
        for i in range(children):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "swemill", "aws", "batch-child"], check=True,
                           env={**env, "AWS_BATCH_JOB_ARRAY_INDEX": str(i)},
                           capture_output=True)
            walls.append(time.perf_counter() - start)
        timings = [job.read_json(result_key(i))["timings"] for i in range(children)]
    out = {k: statistics.median(t[k] for t in timings) for k in timings[0]}
    out["child_wall_s"] = statistics.median(walls)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--items", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--children", type=int, default=5)
    args = p.parse_args()
    inline = _per_item(LocalExecutor(workers=0), args.items, args.repeat)
    pool = _per_item(LocalExecutor(workers=2), args.items, args.repeat)
    import ray

    from swemill.executors.ray_tasks import RayExecutor

    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray_start = time.perf_counter() - t0
    on_ray = _per_item(RayExecutor(), args.items, args.repeat)
    ray.shutdown()
    print(f"per item, {args.items} items, median of {args.repeat} rounds (pool start included):")
    print(f"  in-process      {inline * 1e3:9.3f} ms   1.0x")
    print(f"  local pool (2)  {pool * 1e3:9.3f} ms   {pool / inline:,.0f}x")
    print(f"  ray (2 CPUs)    {on_ray * 1e3:9.3f} ms   {on_ray / inline:,.0f}x"
          f"   (ray.init once: {ray_start:.1f} s)")
    child = _batch_child(args.children)
    print(f"batch child, median of {args.children} indexes (local S3 server):")
    print("  " + json.dumps({k: round(v, 3) for k, v in child.items()}))


if __name__ == "__main__":
    main()
