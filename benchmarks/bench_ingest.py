"""Ingest throughput (MB/s, one core) and peak memory for two corpus sizes.

Generates Claude Code-shaped session JSONL (``swemill_testkit.fake_sessions``: one line per
content block, repeated usage, thinking with signatures, tool results of 1-10 KB) into a temp
folder, then ingests each corpus in a fresh process pinned to one CPU and reports:

- MB/s over the ``ingest()`` call only (imports excluded; they are reported apart),
- peak RSS of that process, and the part added by ingesting (peak minus RSS after imports).

Streaming holds when the ingest part of peak RSS does not grow with the corpus (4x here).
CPU seconds are reported beside wall seconds: on a shared machine they are the steadier
measure of throughput.

``--baseline DIR`` also ingests each corpus with the swemill under ``DIR/src`` (a worktree
of an older commit: ``git worktree add --detach DIR <commit>``), the two runs interleaved
``--repeat`` times, and prints both with the ratios. Versions before the buffer-built
columns imported pandas on their first write; the baseline child imports it up front, as
this benchmark did then, so the ingest figures compare like with like.

``--one-file`` makes each corpus one long session in one file instead
(``generate_session_file``: compactions, hook progress records, the tool output written twice
as Claude Code does). Its trajectory is one row, so peak memory follows that trajectory's
messages; the rest of the file costs only a few hundred bytes per line. Figures: README.

    .venv/bin/python benchmarks/bench_ingest.py [--sizes 50,200] [--one-file] [--repeat 1]
                                                [--keep DIR] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MB = 2**20


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def child(corpus: Path, out: Path) -> None:
    """Runs in its own process: one ingest, one JSON line of measurements on stdout."""
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[0]})  # single core, whatever the machine has
    t0 = time.perf_counter()
    import pyarrow.parquet  # noqa: F401  (the store's Parquet stack, imported up front)

    if os.environ.get("BENCH_INGEST_BASELINE"):
        import pandas  # noqa: F401  (older versions pulled it in on their first write)

    from swemill.store import Store
    from swemill.traces.ingest import ingest

    imports_s = time.perf_counter() - t0
    store = Store.open(str(out))
    rss_before = _rss_mb()
    t1, c1 = time.perf_counter(), time.process_time()
    result = ingest([corpus], store, run_id="bench")
    seconds, cpu_s = time.perf_counter() - t1, time.process_time() - c1
    size = sum(p.stat().st_size for p in corpus.rglob("*.jsonl"))
    c = result.counts
    print(json.dumps({
        "bytes": size, "seconds": seconds, "cpu_s": cpu_s, "imports_s": imports_s,
        "rss_after_imports_mb": rss_before, "peak_rss_mb": _rss_mb(), "turns": c.assistant_turns,
        "tool_calls": c.tool_calls, "sessions": c.sessions, "lines": c.lines,
        "shards": result.shards, "quarantined": c.quarantined, "files": c.files,
        "pandas": "pandas" in sys.modules,
    }))


def _run_child(corpus: Path, out: Path, baseline: Path | None = None) -> dict:
    if out.exists():
        shutil.rmtree(out)
    env = dict(os.environ)
    if baseline is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(baseline / "src"), env.get("PYTHONPATH", "")])
        env["BENCH_INGEST_BASELINE"] = "1"
    proc = subprocess.run(
        [sys.executable, __file__, "--child", str(corpus), str(out)],
        capture_output=True, text=True, check=False, env=env,
    )
    if proc.returncode != 0:
        raise SystemExit(f"ingest child failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="50,200", help="corpus sizes in MB, comma-separated")
    ap.add_argument("--repeat", type=int, default=1, help="runs per size (median reported)")
    ap.add_argument("--keep", type=Path, help="generate into this folder and keep it")
    ap.add_argument("--one-file", action="store_true",
                    help="each corpus is one session file of that size")
    ap.add_argument("--no-hooks", action="store_true",
                    help="--one-file without hook progress records (one dead-end leaf per "
                         "tool call, which made ingest quadratic before it climbed leaves)")
    ap.add_argument("--baseline", type=Path,
                    help="also run the swemill under DIR/src (an older checkout), interleaved")
    ap.add_argument("--child", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    from swemill_testkit.fake_sessions import generate_corpus, generate_session_file

    work = args.keep or Path(tempfile.mkdtemp(prefix="swemill-bench-ingest-"))
    rows: list[tuple[int, list[dict]]] = []
    base_rows: list[tuple[int, list[dict]]] = []
    try:
        for n, size_mb in enumerate(int(s) for s in args.sizes.split(",")):
            corpus = work / f"corpus-{size_mb}mb"
            t = time.perf_counter()
            if args.one_file:
                written = generate_session_file(corpus / "long.jsonl", size_mb * MB, seed=n,
                                                hooks=not args.no_hooks)
            else:
                written = generate_corpus(corpus, size_mb * MB, seed=n)
            print(f"generated {written / MB:.1f} MB in {time.perf_counter() - t:.1f} s",
                  file=sys.stderr)
            runs, base = [], []
            for _ in range(args.repeat):
                runs.append(_run_child(corpus, work / "store"))
                if args.baseline:
                    base.append(_run_child(corpus, work / "store", args.baseline))
            rows.append((size_mb, runs))
            base_rows.append((size_mb, base))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    _report(rows)
    if args.baseline:
        print(f"baseline: {args.baseline}")
        _report(base_rows)
        _ratios(rows, base_rows)


def _report(rows: list[tuple[int, list[dict]]]) -> None:
    print(f"{'corpus':>8} {'files':>6} {'MB/s':>7} {'seconds':>8} {'CPU s':>7} {'MB/CPU-s':>8} "
          f"{'turns':>8} {'peak RSS':>9} {'ingest part':>11} {'imports':>8}")
    for _, runs in rows:
        r = runs[0]
        sec = statistics.median(x["seconds"] for x in runs)
        cpu = statistics.median(x["cpu_s"] for x in runs)
        peak = statistics.median(x["peak_rss_mb"] for x in runs)
        part = statistics.median(x["peak_rss_mb"] - x["rss_after_imports_mb"] for x in runs)
        print(f"{r['bytes'] / MB:>6.0f}MB {r['files']:>6} {r['bytes'] / MB / sec:>7.2f} "
              f"{sec:>8.1f} {cpu:>7.1f} {r['bytes'] / MB / cpu:>8.2f} {r['turns']:>8} "
              f"{peak:>7.0f}MB {part:>9.0f}MB "
              f"{statistics.median(x['imports_s'] for x in runs):>7.1f}s")
    if len(rows) >= 2:
        (s0, r0), (s1, r1) = rows[0], rows[-1]
        p0 = statistics.median(x["peak_rss_mb"] for x in r0)
        p1 = statistics.median(x["peak_rss_mb"] for x in r1)
        print(f"corpus x{s1 / s0:.1f} -> peak RSS x{p1 / p0:.2f}")



def _ratios(rows: list[tuple[int, list[dict]]], base: list[tuple[int, list[dict]]]) -> None:
    def med(runs: list[dict], key: str) -> float:
        return statistics.median(x[key] for x in runs)

    for (size, runs), (_, old) in zip(rows, base, strict=True):
        print(f"{size}MB: peak RSS x{med(runs, 'peak_rss_mb') / med(old, 'peak_rss_mb'):.2f}, "
              f"CPU s x{med(runs, 'cpu_s') / med(old, 'cpu_s'):.2f}, "
              f"wall s x{med(runs, 'seconds') / med(old, 'seconds'):.2f} (this / baseline)")


if __name__ == "__main__":
    main()
