"""``swemill env`` on real PyPI sdists: its counts against pytest run by hand, and its timings.

For each sdist: ``swemill env pypi:NAME==VER --json`` (build or reuse the env, 3 baseline runs
with coverage), then pytest run by hand in that venv from a fresh copy of the source. Prints
per sdist: tests, passed/failed by swemill and by hand (they must match), flaky tests, the
suite's wall time, start-up, coverage-map size, and the time of the env command (cold when the
cache is empty). Exits non-zero when any count differs.

    .venv/bin/python benchmarks/bench_env_sdists.py [--cache DIR] [SPEC ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT = ["pypi:toolz==1.0.0", "pypi:more-itertools==10.5.0", "pypi:cachetools==5.5.0",
           "pypi:six==1.16.0"]


def hand_path(env_path: Path, work: Path) -> str:
    """The venv imports the project from /workspace; by hand, point it at the copy instead."""
    roots = json.loads((env_path / "env.json").read_text())["import_roots"]
    return ":".join(str(work / r) for r in roots)


def by_hand(env_path: Path, source: Path) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "src"
        shutil.copytree(source, work)
        proc = subprocess.run([str(env_path / "venv" / "bin" / "python"), "-m", "pytest", "-q",
                               "-p", "no:cacheprovider", "-p", "no:randomly"], cwd=work,
                              capture_output=True, text=True, timeout=1800,
                              env={**os.environ, "PYTHONPATH": hand_path(env_path, work)})
    last = proc.stdout.strip().splitlines()[-1]
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|xfailed|xpassed)",
                                               last)}
    errors = re.search(r"(\d+) errors?", last)
    counts["error"] = int(errors.group(1)) if errors else 0
    return counts


def one(spec: str, cache: Path) -> bool:
    env = {**os.environ, "SWEMILL_CACHE": str(cache)}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "swemill", "env", spec, "--json"], env=env,
                          capture_output=True, text=True, timeout=3600)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        print(f"{spec:32} FAILED: {proc.stderr.strip().splitlines()[-1:]}")
        return False
    out = json.loads(proc.stdout)
    hand = by_hand(Path(out["env"]["path"]), Path(out["source"]["path"]))
    mine = out["counts"]
    same = all(mine.get(k, 0) == hand.get(k, 0) for k in ("passed", "failed", "error"))
    print(f"{spec:32} tests {out['tests']:5}  swemill {mine.get('passed', 0)}p/"
          f"{mine.get('failed', 0)}f/{mine.get('error', 0)}e  by hand {hand.get('passed', 0)}p/"
          f"{hand.get('failed', 0)}f/{hand.get('error', 0)}e  {'MATCH' if same else 'DIFFER'}  "
          f"flaky {out['flaky']}  suite {out['suite_wall_s']:.2f}s  start-up "
          f"{out['startup_s']:.2f}s  coverage {out['coverage_functions']} fns  "
          f"env cmd {took:.1f}s  python {out['env']['python']}")
    return same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("specs", nargs="*", default=DEFAULT)
    parser.add_argument("--cache", type=Path, default=None,
                        help="swemill cache to use (default: a fresh temporary one)")
    args = parser.parse_args()
    cache = args.cache or Path(tempfile.mkdtemp(prefix="swemill-bench-env-"))
    ok = [one(spec, cache) for spec in args.specs]
    sys.exit(0 if all(ok) else 1)


if __name__ == "__main__":
    main()
