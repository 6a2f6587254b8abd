"""Sandbox costs on the hot path of validation: per-exec overhead and fork().

Prints medians over ``--repeat`` runs of:

- exec of ``true``: a bare subprocess, the raw bwrap command line, the full ``bwrap`` backend
  (cgroups, output pumping, kill of what is left, the disk and set-id sweep of the workspace),
  the ``local`` backend, and the ``bwrap`` backend over a 10,000-file plain directory;
- ``fork()`` of the bundled sample repository, of a generated ~50-file workspace and of a
  generated 10,000-file workspace (~60 MB, log-normal sizes): the first fork of a plain
  directory (it snapshots it once), every later fork, a fork of a fork that has written
  (its upper layer is frozen, no copy), fork + first exec, close; and ``cp -a`` for reference.

Goals: bwrap overhead (full backend minus bare subprocess) under 20 ms; fork of the
10,000-file workspace under 200 ms.

    .venv/bin/python benchmarks/bench_sandbox.py [--repeat 30]

With ``--against REV`` it instead measures REV's sandbox and this checkout's side by side in one
run, alternating (see ``sandbox_against.py``), and prints medians and ratios, wall and CPU:

    .venv/bin/python benchmarks/bench_sandbox.py --against 40de007 [--rounds 12]

With ``--steps`` it measures a session's ``bash true`` step on an overlay fork (as the
environment server's sessions have): a new sandbox per command against the session runner
(``keep_warm``: one long-lived sandbox whose runner forks each command), alternating rounds of
``--per-round`` steps each, medians of wall and CPU per step (CPU: the benchmark's own cgroup
v1 ``cpuacct`` group, so sandboxed processes count; else rusage), and the cost of a session's
start (fork, runner start, first step) against a fork and its first step:

    .venv/bin/python benchmarks/bench_sandbox.py --steps [--rounds 12] [--per-round 10]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from swemill.sandbox import Limits, open_sandbox
from swemill.sandbox.bwrap import BwrapSandbox
from swemill.sandbox.fork import overlay_usable

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "src" / "swemill" / "repo" / "sample" / "tree"


def median_ms(fn: Callable[[], object], repeat: int, setup: Callable[[], object] | None = None,
              ) -> float:
    times = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def make_workspace(root: Path, files: int, seed: int = 7) -> Path:
    """A repository-shaped tree: nested packages, log-normal file sizes (median ~3 KB)."""
    rng = random.Random(seed)
    for i in range(files):
        d = root / f"pkg{i % 40}" / f"sub{(i // 40) % 12}"
        d.mkdir(parents=True, exist_ok=True)
        size = min(int(rng.lognormvariate(8, 1.2)), 300_000)
        (d / f"mod{i}.py").write_bytes(rng.randbytes(size // 2).hex().encode()[:size])
    return root


def bench_exec(ws: Path, repeat: int) -> list[tuple[str, float]]:
    sb = open_sandbox(ws, backend="bwrap", limits=Limits())
    assert isinstance(sb, BwrapSandbox)
    raw = sb.argv(["true"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = open_sandbox(ws, backend="local")
    rows = [
        ("bare subprocess `true`", median_ms(lambda: subprocess.run(["true"]), repeat)),
        ("raw bwrap command line `true`", median_ms(lambda: subprocess.run(raw, env={}), repeat)),
        ("bwrap backend exec `true`", median_ms(lambda: sb.exec(["true"]), repeat)),
        ("local backend exec `true`", median_ms(lambda: local.exec(["true"]), repeat)),
    ]
    sb.close()
    local.close()
    return rows


def bench_fork(name: str, ws: Path, repeat: int) -> list[tuple[str, float]]:
    rows = []
    firsts = []
    for _ in range(max(3, repeat // 10)):  # the first fork of a plain dir copies it once
        sb = open_sandbox(ws, backend="bwrap")
        start = time.perf_counter()
        sb.fork().close()
        firsts.append(time.perf_counter() - start)
        sb.close()
    rows.append((f"{name}: first fork (one snapshot copy)", statistics.median(firsts) * 1000))
    sb = open_sandbox(ws, backend="bwrap")
    sb.fork().close()
    forks: list[object] = []
    rows.append((f"{name}: fork (snapshot reused)", median_ms(lambda: forks.append(sb.fork()),
                                                                repeat)))
    rows.append((f"{name}: close a fork", median_ms(lambda: forks.pop().close(), repeat)))  # type: ignore[attr-defined]
    parent = sb.fork()

    def fork_written() -> None:
        forks.append(parent.fork())

    rows.append((f"{name}: fork of a fork that wrote", median_ms(
        fork_written, repeat, setup=lambda: parent.write_file("pkg_new.txt", str(time.time())))))

    def fork_and_exec() -> None:
        child = sb.fork()
        child.write_file("candidate.py", "x = 1\n")
        child.exec(["cat", "candidate.py"])
        forks.append(child)

    rows.append((f"{name}: fork + write + first exec", median_ms(fork_and_exec, repeat)))
    for f in forks:
        f.close()  # type: ignore[attr-defined]
    parent.close()
    sb.close()
    return rows


def bench_steps(rounds: int, per_round: int) -> None:
    from bench_serve import CpuMeter

    meter = CpuMeter()
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}

    def measure(label: str, work: Callable[[], object], n: int) -> None:
        cpu0, start = meter.now(), time.perf_counter()
        for _ in range(n):
            work()
        wall.setdefault(label, []).append((time.perf_counter() - start) / n)
        cpu.setdefault(label, []).append((meter.now() - cpu0) / n)

    def start_session(keep_warm: bool) -> None:
        sb = base.fork()
        if keep_warm:
            assert sb.keep_warm(wait=True), getattr(sb, "runner_note", "")
        assert sb.exec("true").ok
        sb.close()

    try:
        with tempfile.TemporaryDirectory(prefix="swemill-bench-") as tmp:
            base = open_sandbox(make_workspace(Path(tmp) / "ws", 50), backend="bwrap")
            per, runner = base.fork(), base.fork()
            assert runner.keep_warm(wait=True), getattr(runner, "runner_note", "")
            assert runner.exec("true").extra.get("session_runner") == 1.0
            for _ in range(rounds):
                measure("step, a sandbox per command", lambda: per.exec("true"), per_round)
                measure("step, session runner", lambda: runner.exec("true"), per_round)
                measure("fork + first step, a sandbox per command",
                        lambda: start_session(False), 1)
                measure("fork + runner start + first step", lambda: start_session(True), 1)
            for sb in (per, runner, base):
                sb.close()
    finally:
        meter.close()
    print(f"`bash -c true` on an overlay fork: medians of {rounds} rounds x {per_round}; "
          f"CPU from {meter.kind}; load {os.getloadavg()[0]:.1f} at the end")
    for label in wall:
        print(f"  {label:<42} {statistics.median(wall[label]) * 1000:8.2f} ms wall "
              f"{statistics.median(cpu[label]) * 1000:8.2f} ms CPU")
    a, b = "step, a sandbox per command", "step, session runner"
    print(f"session runner against a sandbox per command: x"
          f"{statistics.median(wall[a]) / statistics.median(wall[b]):.2f} less wall, x"
          f"{statistics.median(cpu[a]) / statistics.median(cpu[b]):.2f} less CPU per step")


def bench_copy(ws: Path, repeat: int) -> float:
    dst = ws.parent / "cp-ref"
    return median_ms(lambda: subprocess.run(["cp", "-a", str(ws), str(dst)], check=True),
                     max(3, repeat // 10), setup=lambda: shutil.rmtree(dst, ignore_errors=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--against", metavar="REV", help="compare with REV's sandbox code")
    parser.add_argument("--rounds", type=int, default=12, help="alternations (--against)")
    parser.add_argument("--per-round", type=int, default=10, help="runs per round and kind")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--steps", action="store_true",
                        help="a session's steps: a sandbox per command against its runner")
    args = parser.parse_args()
    if args.steps:
        bench_steps(args.rounds, args.per_round)
        return
    if args.worker or args.against:
        import sandbox_against

        if args.worker:
            sandbox_against.worker()
        else:
            sandbox_against.against(args.against, args.rounds, args.per_round)
        return
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="swemill-bench-") as tmp:
        small = make_workspace(Path(tmp) / "small", 50)
        big = make_workspace(Path(tmp) / "big", 10_000)
        rows += bench_exec(small, args.repeat)
        with open_sandbox(big, backend="bwrap") as sb:  # a plain tree: sweeps walk all of it
            rows.append(("bwrap backend exec `true`, 10k-file plain tree",
                         median_ms(lambda: sb.exec(["true"]), args.repeat)))
        if SAMPLE.is_dir():
            rows += bench_fork("sample repo", SAMPLE, args.repeat)
        rows += bench_fork("50 files", small, args.repeat)
        rows += bench_fork("10k files", big, args.repeat)
        rows.append(("10k files: `cp -a` (reference)", bench_copy(big, args.repeat)))
    width = max(len(r[0]) for r in rows)
    print(f"overlay forks: {'yes' if overlay_usable() else 'no (full copies)'}; "
          f"medians of {args.repeat} runs")
    for label, ms in rows:
        print(f"  {label:<{width}}  {ms:9.2f} ms")
    table = dict(rows)
    overhead = table["bwrap backend exec `true`"] - table["bare subprocess `true`"]
    fork_10k = table["10k files: fork (snapshot reused)"]
    print(f"bwrap overhead per exec: {overhead:.2f} ms (goal < 20 ms: "
          f"{'met' if overhead < 20 else 'MISSED'}, {overhead / 20:.2f}x of budget)")
    print(f"fork of 10k files: {fork_10k:.2f} ms (goal < 200 ms: "
          f"{'met' if fork_10k < 200 else 'MISSED'}, {fork_10k / 200:.3f}x of budget); "
          f"first fork of a plain dir: {table['10k files: first fork (one snapshot copy)']:.0f} ms")


if __name__ == "__main__":
    main()
