"""``bench_sandbox.py --against REV``: this checkout's sandbox and REV's, side by side.

REV's ``src/`` is exported (``git archive``) into a temporary directory; one worker process per
version imports its own copy of swemill (``PYTHONPATH``) and sets up the same workspaces. The
parent then alternates the two in rounds (which goes first alternates too), so a load that comes
and goes on a shared machine falls on both alike. Every timed operation reports its wall time
and its CPU time: the worker's own plus that of every process the operation started. bwrap's
monitor exits without waiting for the sandbox's pid 1 (it reads the exit status from an event
fd), so the worker is a child subreaper and reaps those orphans itself after each operation;
otherwise what runs inside the sandbox (the dropper, the command) would count for nobody.

Overhead per exec = median(backend exec of ``true``) - median(bare subprocess ``true``), both
from the same worker and the same rounds.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_PR_SET_CHILD_SUBREAPER = 36
KINDS = ("bare", "exec", "fork_exec", "fork_python", "cycle")
LABELS = {
    "bare": "bare subprocess `true`",
    "exec": "bwrap exec `true`, 50-file plain tree",
    "fork_exec": "bwrap exec `true` in a fork",
    "fork_python": "bwrap exec `python3 -c 'import json'`, fork",
    "cycle": "sample repo: fork + write + exec + close",
}


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _reap() -> None:
    """Wait for every orphan handed to this subreaper (their CPU joins RUSAGE_CHILDREN)."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def worker() -> None:
    """Serve ``KIND N`` lines on stdin with one JSON line of [[wall_s, cpu_s], ...] each."""
    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit("cannot become a child subreaper: CPU inside sandboxes is not counted")
    from bench_sandbox import SAMPLE, make_workspace  # the workspace shapes of the main bench

    import swemill
    from swemill.sandbox import Limits, open_sandbox

    tmp = Path(tempfile.mkdtemp(prefix="swemill-bench-"))
    small = make_workspace(tmp / "small", 50)
    plain = open_sandbox(small, backend="bwrap", limits=Limits())
    parent = open_sandbox(small, backend="bwrap", limits=Limits())
    child = parent.fork()
    sample = open_sandbox(SAMPLE, backend="bwrap", limits=Limits())
    sample.fork().close()  # the one-off snapshot copy is not what is measured

    def cycle() -> None:
        with sample.fork() as fork:
            fork.write_file("candidate.py", "x = 1\n")
            fork.exec(["cat", "candidate.py"])

    ops: dict[str, Callable[[], object]] = {
        "bare": lambda: subprocess.run(["true"]),
        "exec": lambda: plain.exec(["true"]),
        "fork_exec": lambda: child.exec(["true"]),
        "fork_python": lambda: child.exec(["python3", "-c", "import json"]),
        "cycle": cycle,
    }
    print(json.dumps({"swemill": swemill.__file__}), flush=True)
    for line in sys.stdin:
        kind, count = line.split()
        out = []
        for _ in range(int(count)):
            wall, cpu = time.perf_counter(), _cpu()
            ops[kind]()
            wall = time.perf_counter() - wall
            _reap()
            out.append([wall, _cpu() - cpu])
        print(json.dumps(out), flush=True)
    for sb in (child, parent, plain, sample):
        sb.close()
    shutil.rmtree(tmp, ignore_errors=True)


class _Worker:
    def __init__(self, src: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(src)}
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("bench_sandbox.py")), "--worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.module = json.loads(self._line())["swemill"]
        if not self.module.startswith(str(src)):
            raise SystemExit(f"worker for {src} imported {self.module}")

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"benchmark worker died (exit {self.proc.wait()})")
        return line

    def run(self, kind: str, count: int) -> list[list[float]]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{kind} {count}\n")
        self.proc.stdin.flush()
        result: list[list[float]] = json.loads(self._line())
        return result

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def export(rev: str, into: Path) -> Path:
    """REV's ``src/`` tree, exported from git into ``into``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"],
                             capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"cannot export {rev}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "src"


def _medians(samples: list[list[float]]) -> tuple[float, float]:
    return (statistics.median(s[0] for s in samples) * 1000,
            statistics.median(s[1] for s in samples) * 1000)


def against(rev: str, rounds: int, per_round: int) -> None:
    with tempfile.TemporaryDirectory(prefix="swemill-against-") as tmp:
        versions = {rev: export(rev, Path(tmp)), "now": ROOT / "src"}
        workers = {name: _Worker(src) for name, src in versions.items()}
        samples: dict[tuple[str, str], list[list[float]]] = {}
        try:
            for r in range(rounds):
                order = list(workers) if r % 2 == 0 else list(reversed(workers))
                for kind in KINDS:
                    for name in order:
                        samples.setdefault((name, kind), []).extend(
                            workers[name].run(kind, per_round))
        finally:
            for w in workers.values():
                w.close()
    _report(rev, rounds, per_round, samples)


def _report(rev: str, rounds: int, per_round: int,
            samples: dict[tuple[str, str], list[list[float]]]) -> None:
    med: dict[tuple[str, str], tuple[float, float]] = {k: _medians(v) for k, v in
                                                       samples.items()}
    print(f"{rev} vs now, alternating, {rounds} rounds x {per_round}: medians, "
          "wall ms / CPU ms (CPU: the worker and every process an operation started)")
    width = max(len(x) for x in LABELS.values()) + 2
    print(f"  {'':<{width}} {rev:>17} {'now':>17}   ratio wall / CPU")
    rows: list[tuple[str, Any, Any]] = [(LABELS[k], med[(rev, k)], med[("now", k)])
                                        for k in KINDS]
    for kind in ("exec", "fork_exec"):
        over = [tuple(a - b for a, b in zip(med[(name, kind)], med[(name, "bare")],
                                             strict=True)) for name in (rev, "now")]
        rows.append((f"overhead: {LABELS[kind].removeprefix('bwrap ')}", over[0], over[1]))
    for label, old, new in rows:
        print(f"  {label:<{width}} {old[0]:7.2f} / {old[1]:6.2f} {new[0]:7.2f} / {new[1]:6.2f}"
              f"   {new[0] / old[0]:5.2f} / {new[1] / old[1]:5.2f}")
