"""Run every benchmark in this folder, one after another, with its default settings.

Each script prints its own medians and ratios; this only runs them in order and reports which
ones failed. Pass names to run a subset:

    .venv/bin/python benchmarks/run_all.py [sandbox validate ...]
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    scripts = sorted(HERE.glob("bench_*.py"))
    if argv:
        wanted = set(argv)
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in wanted]
        missing = wanted - {s.stem.removeprefix("bench_") for s in scripts}
        if missing:
            print(f"run_all: no benchmark named {', '.join(sorted(missing))}", file=sys.stderr)
            return 2
    failed: list[str] = []
    for script in scripts:
        print(f"\n=== {script.name}", flush=True)
        start = time.monotonic()
        rc = subprocess.call([sys.executable, str(script)])
        print(f"=== {script.name}: exit {rc} in {time.monotonic() - start:.0f}s", flush=True)
        if rc:
            failed.append(script.name)
    if failed:
        print(f"run_all: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
