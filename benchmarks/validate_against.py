"""``bench_validate.py --against REV``: this checkout's validator and REV's on the same candidates.

REV's ``src/`` is exported from git (as ``sandbox_against.py`` does). Each measurement is a fresh
process that imports one version of swemill (``PYTHONPATH``), builds (or finds cached) the
repository's environment and baseline, makes the procedural candidates with the seed, and then
validates them on ``--workers`` warm workers while its CPU is counted: its own and every child's
(``--backend local``, see ``bench_validate.py`` on why). Versions alternate round by round
(which goes first alternates too), so a load that comes and goes falls on both alike.

Three columns:

- ``REV``: the validator as it was at REV;
- ``now``: this checkout with the work REV did (``--repeat 1 --near-misses 0``: one broken
  run, no near-miss variants; REV had neither);
- ``now, REV's selection``: the same, but the broken tree runs only the tests that cover the
  edited functions, as REV chose them. Since REV the coverage baseline also lists functions
  that ran outside any one test (an edit there runs the whole suite) and tests whose coverage
  cannot be known (they start processes or set a tracer: they always run). Blanking those two
  lists here, and nowhere else, shows what the truth rules cost apart from everything else.

With ``--repeat R --near-misses N`` given, both versions run those gates (REV must know
them) and only the first two columns are measured: a before/after of the validator as
``swemill tasks`` runs it (``--repeat 3 --near-misses 2`` are its defaults).

Each process prints the candidates' identity hash, so the columns are known to have validated
the same candidates.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from sandbox_against import export

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ("rev", "now", "now_rev_selection")


def _cpu() -> tuple[float, float]:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def worker(spec: str, candidates: int, workers: int, seed: int, rev_selection: bool,
           gates: tuple[int, int] = (1, 0)) -> None:
    """One measurement in this process: print one JSON line."""
    warnings.filterwarnings("ignore", message=".*'local' sandbox")
    from swemill.repo.envbuild import build_env
    from swemill.repo.sources import resolve_source
    from swemill.sandbox import Limits
    from swemill.synth import make_strategy
    from swemill.validate.check import CheckContext
    from swemill.validate.pool import WorkerPool
    try:  # this checkout's module names, then REV's (before swemill.testing became suite)
        from swemill.suite.baseline import run_baseline  # type: ignore[import-not-found]
        from swemill.synth.strategy import RepoView  # type: ignore[import-not-found]
    except ImportError:
        from swemill.synth.base import RepoView  # type: ignore[no-redef]
        from swemill.testing.baseline import run_baseline  # type: ignore[no-redef]

    src = resolve_source(spec)
    env = build_env(src)
    baseline = run_baseline(env)
    if rev_selection:
        baseline = baseline.model_copy(update={"shared": [], "uncovered": []})
    view = RepoView(root=src.path, repo=src.repo, commit=src.commit, baseline=baseline,
                    seed=seed, max_candidates=candidates)
    cands = list(make_strategy("procedural").candidates(view))
    ident = hashlib.sha256("\n".join(c.bug_patch for c in cands).encode()).hexdigest()[:12]
    params = inspect.signature(CheckContext).parameters
    extra = {k: v for k, v in zip(("repeat", "near_misses"), gates, strict=True)
             if k in params}
    if gates != (1, 0) and len(extra) < 2:
        raise SystemExit("this version's validator has no repeat / near-miss settings")
    ctx = CheckContext(baseline, src.commit, **extra)
    s0, c0 = _cpu()
    t0 = time.monotonic()
    pool = WorkerPool(env, src.commit, ctx, n=workers, backend="local",
                      limits=Limits(timeout_s=900, memory_mb=4096), image=True)
    try:
        res = pool.stream(iter(cands), target=10**9)
    finally:
        pool.close()
    s1, c1 = _cpu()
    valid = sum(1 for c in res.checked if c.verdict.accepted)
    print(json.dumps({"cpu_s": (s1 - s0) + (c1 - c0), "wall_s": time.monotonic() - t0,
                      "valid": valid, "candidates": len(cands), "ident": ident}), flush=True)


def _measure(src: Path, column: str, args: list[str]) -> dict[str, float | str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, str(Path(__file__)), "--worker", *args]
    if column == "now_rev_selection":
        cmd.append("--rev-selection")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        raise SystemExit(f"{column} measurement failed: {p.stderr.strip()[-600:]}")
    out: dict[str, float | str] = json.loads(lines[-1])
    return out


def against(rev: str, spec: str, rounds: int, candidates: int, workers: int, seed: int,
            gates: tuple[int, int] | None = None) -> None:
    """``gates``: (repeat, near misses) for both versions; None: REV's work (1, 0), in all
    three columns."""
    args = ["--spec", spec, "--candidates", str(candidates), "--workers", str(workers),
            "--seed", str(seed)]
    columns = COLUMNS if gates is None else COLUMNS[:2]
    if gates is not None:
        args += ["--repeat", str(gates[0]), "--near-misses", str(gates[1])]
    with tempfile.TemporaryDirectory(prefix="swemill-against-") as tmp:
        sources = {"rev": export(rev, Path(tmp)), "now": ROOT / "src",
                   "now_rev_selection": ROOT / "src"}
        for column in columns:  # environments and baselines built before anything is timed
            _measure(sources[column], column, [*args[:2], "--candidates", "1", "--workers", "1"])
        runs: dict[str, list[dict[str, float | str]]] = {c: [] for c in columns}
        for r in range(rounds):
            for column in (columns if r % 2 == 0 else tuple(reversed(columns))):
                load = os.getloadavg()[0]
                m = _measure(sources[column], column, args)
                runs[column].append(m)
                print(f"round {r + 1} {column:<18} cpu {float(m['cpu_s']):6.2f} s  "
                      f"valid {m['valid']}/{m['candidates']}  candidates {m['ident']}  "
                      f"load {load:.1f}", flush=True)
    _report(rev, spec, rounds, runs, gates)


def _report(rev: str, spec: str, rounds: int, runs: dict[str, list[dict[str, float | str]]],
            gates: tuple[int, int] | None) -> None:
    idents = {str(m["ident"]) for ms in runs.values() for m in ms}
    labels = {"rev": rev, "now": "now", "now_rev_selection": f"now, {rev}'s selection"}
    repeat, near = gates or (1, 0)
    print(f"\n{spec}: {rev} vs now, {rounds} alternating rounds, medians "
          f"(valid tasks per CPU-minute, CPU of the process and every child; broken tree run "
          f"{repeat}x, {near} near-miss variant(s))")
    if len(idents) != 1:
        print(f"  WARNING: the versions made different candidates ({sorted(idents)})")
    rate = {}
    for column, ms in runs.items():
        cpu = statistics.median(float(m["cpu_s"]) for m in ms)
        valid = statistics.median(float(m["valid"]) for m in ms)
        rate[column] = valid / (cpu / 60)
        print(f"  {labels[column]:<28} cpu {cpu:6.2f} s  valid {valid:4.0f}  "
              f"{rate[column]:7.1f} valid/CPU-min  ({rate[column] / rate['rev']:.2f}x {rev})")


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--spec", default="pypi:toolz==1.0.0")
    ap.add_argument("--candidates", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rev-selection", action="store_true")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--near-misses", type=int, default=0)
    args = ap.parse_args()
    if args.worker:
        worker(args.spec, args.candidates, args.workers, args.seed, args.rev_selection,
               (args.repeat, args.near_misses))


if __name__ == "__main__":
    main()
