"""Run one command under limits, with bounded output and a kill that reaches the whole tree.

Shared by every backend: a backend only decides the argv and the environment.

Output is streamed through pipes in chunks; per stream the first half of the cap and a rolling
last half are kept, so a flood of any size costs a bounded amount of memory. When the main
process exits, whatever it left behind (daemonised grandchildren) is killed: a command's
lifetime bounds its tree.

A :class:`DiskWatch` polls what the command has written to its workspace while it runs (and
once after): over ``limits.disk_mb`` the tree is killed with ``killed_reason: disk``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Protocol

from swemill.core.errors import SandboxError
from swemill.sandbox._cgpool import CgroupPool, open_cgroups
from swemill.sandbox._launch import GUARD_FAIL
from swemill.sandbox._launch import start as launch
from swemill.sandbox.cgroups import CommandCgroups
from swemill.sandbox.contract import ExecResult, KilledReason, Limits

__all__ = ["Capture", "DiskWatch", "Started", "run_guarded", "run_started"]

_CHUNK = 1 << 20
_F_SETPIPE_SZ = 1031
_DRAIN_GRACE_S = 0.5
_DISK_POLL_S = 0.2
_DISK_POLL_SHARE = 10  # wait at least this many times the last measurement's cost


class Capture:
    """Keeps the head and a rolling tail of one stream; memory stays under ~2x the cap."""

    __slots__ = ("cap", "half", "head", "tail", "total")

    def __init__(self, cap: int) -> None:
        self.cap = max(cap, 0)
        self.half = self.cap // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            keep = self.cap - self.half
            if len(self.tail) > 2 * keep + _CHUNK:  # trim rarely, so the cost stays amortised
                del self.tail[: len(self.tail) - keep]

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    def text(self) -> str:
        keep = self.cap - self.half
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace")
        dropped = self.total - len(self.head) - keep
        tail = bytes(self.tail[-keep:]) if keep else b""
        marker = f"\n[... swemill: {dropped} bytes dropped ...]\n".encode()
        return (bytes(self.head) + marker + tail).decode("utf-8", "replace")


class DiskWatch:
    """Measures a workspace's usage now and then; knows when it went over the cap.

    Measuring walks the workspace's writable layer, so the next poll waits at least ten times
    as long as the last one took: the watch never costs more than ~10% of a core.
    """

    __slots__ = ("cap", "next_at", "over", "usage", "used")

    def __init__(self, usage: Callable[[], int], cap_mb: int | None) -> None:
        self.usage = usage
        self.cap = None if cap_mb is None else cap_mb << 20
        self.next_at = time.monotonic() + _DISK_POLL_S
        self.over = False
        self.used = 0

    def wait(self) -> float:
        """Seconds until the next poll is due (an hour when nothing is capped)."""
        return 3600.0 if self.cap is None else max(self.next_at - time.monotonic(), 0.0)

    def poll(self, usage: Callable[[], int] | None = None) -> bool:
        """Measure now (with ``usage`` instead of the watch's own); whether the workspace is
        over its cap."""
        start = time.monotonic()
        self.used = (usage or self.usage)()
        now = time.monotonic()
        self.next_at = now + max(_DISK_POLL_S, _DISK_POLL_SHARE * (now - start))
        self.over = self.over or (self.cap is not None and self.used > self.cap)
        return self.over


class Started(Protocol):
    """A started command as :func:`run_started` drives it (a :class:`subprocess.Popen`, or a
    command of a session's runner): pipes, the host pid, the exit status once waited for."""

    pid: int
    returncode: int | None
    stdin: IO[bytes] | None
    stdout: IO[bytes] | None
    stderr: IO[bytes] | None

    def poll(self) -> int | None: ...

    def wait(self) -> int: ...


Start = Callable[[CommandCgroups | None], tuple[Started, int]]
"""Starts the command inside the given groups; returns it and a pidfd of its main process."""


def run_guarded(argv: Sequence[str], *, env: Mapping[str, str], cwd: str | None,
                stdin: bytes | None, limits: Limits, timeout: float,
                usage: Callable[[], int] | None = None, held: bool = False,
                pool: CgroupPool | None = None,
                settled_usage: Callable[[], int] | None = None) -> ExecResult:
    """Run ``argv`` under ``limits`` and return what it did (never raises for the command's
    own failures; raises :class:`SandboxError` when it cannot be started). ``usage``
    measures the workspace (bytes) for the disk cap; it is also called once at the end.
    ``held``: ``argv`` is a bwrap command line, started held (see :mod:`._launch`).
    ``pool``: the family's kept cgroups, to take the command's groups from and return them to.
    ``settled_usage``: ``usage`` for the final measure once the command's cgroup is known to be
    empty (nothing of it can change the workspace any more)."""
    def start(cg: CommandCgroups | None) -> tuple[Started, int]:
        proc = launch(argv, held=held, env=env, cwd=cwd, stdin=stdin is not None,
                      limits=limits, cg=cg)
        try:
            return proc, os.pidfd_open(proc.pid)
        except OSError:
            _kill_tree(proc, cg)
            proc.wait()
            raise

    return run_started(start, stdin=stdin, limits=limits, timeout=timeout, usage=usage,
                       pool=pool, settled_usage=settled_usage, guarded=not held)


def run_started(start: Start, *, stdin: bytes | None, limits: Limits, timeout: float,
                usage: Callable[[], int] | None = None, pool: CgroupPool | None = None,
                settled_usage: Callable[[], int] | None = None, guarded: bool = False,
                on_settled: Callable[[bool], None] | None = None) -> ExecResult:
    """:func:`run_guarded` for a command that ``start`` starts. ``guarded``: a guard shell's
    failure to enter the groups is an error. ``on_settled(emptied)``: called once the
    command is over and its groups were emptied (or could not be)."""
    cg = pool.acquire(limits) if pool is not None else open_cgroups(limits)
    try:
        started = time.perf_counter()
        proc, pidfd = start(cg)
        out, err = Capture(limits.output_bytes), Capture(limits.output_bytes)
        watch = DiskWatch(usage, limits.disk_mb) if usage is not None else None
        timed_out = _pump(proc, pidfd, stdin, out, err, timeout, lambda: _kill_tree(proc, cg),
                          watch)
        wall = time.perf_counter() - started
        emptied = cg is None or cg.kill_all()
        if on_settled is not None:
            on_settled(emptied)
        if watch is not None:  # the final measure, also the last sweep of what it left
            watch.poll(settled_usage if cg is not None and emptied and
                       settled_usage is not None else None)
        code = proc.returncode
        assert code is not None
        if guarded and code == 125 and err.text().startswith(GUARD_FAIL):
            raise SandboxError(err.text().strip())
        exit_code = 128 - code if code < 0 else code
        reason = _reason(cg, exit_code, code < 0, timed_out,
                         watch is not None and watch.over)
        return ExecResult(exit_code=exit_code, timed_out=timed_out, killed_reason=reason,
                          stdout=out.text(), stderr=err.text(), wall_s=wall,
                          truncated=out.truncated or err.truncated)
    finally:
        if cg is not None and pool is not None:
            pool.release(cg, limits)
        elif cg is not None:
            cg.remove()


def _reason(cg: CommandCgroups | None, exit_code: int, signalled: bool,
            timed_out: bool, over_disk: bool) -> KilledReason | None:
    """Why the command was stopped; a hit limit explains a kill better than the timeout."""
    if cg is not None and cg.oom_killed():
        return "memory"
    if cg is not None and cg.pids_limit_hit():
        return "pids"
    if over_disk:
        return "disk"
    if exit_code == 128 + signal.SIGXFSZ:
        return "file_size"
    if timed_out:
        return "timeout"
    return "signal" if signalled else None


def _kill_tree(proc: Started, cg: CommandCgroups | None) -> None:
    if isinstance(proc, subprocess.Popen):  # a runner's command: its groups hold all of it
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    if cg is not None:
        cg.kill_all()


def _setup_fds(proc: Started, sel: selectors.BaseSelector,
               out: Capture, err: Capture) -> None:
    for stream, cap in ((proc.stdout, out), (proc.stderr, err)):
        assert stream is not None
        fd = stream.fileno()
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, _F_SETPIPE_SZ, _CHUNK)  # fewer wake-ups on a flood
        sel.register(fd, selectors.EVENT_READ, cap)


def _pump(proc: Started, pidfd: int, stdin: bytes | None, out: Capture, err: Capture,
          timeout: float, kill: Callable[[], None], watch: DiskWatch | None = None) -> bool:
    """Stream output until the tree is gone or the deadline; returns whether it timed out
    (a kill for the disk cap is recorded in ``watch``). Closes ``pidfd``."""
    sel = selectors.DefaultSelector()
    try:
        _setup_fds(proc, sel, out, err)
        sel.register(pidfd, selectors.EVENT_READ, "exit")
        pending = memoryview(stdin or b"")
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE, "stdin")
        deadline = time.monotonic() + timeout
        streams, timed_out, exited = 2, False, False
        while streams or not exited:
            left = deadline - time.monotonic()
            if left <= 0 and exited:
                break  # the drain grace is over; a stream still open belongs to nothing alive
            if left <= 0:  # the wall-clock limit: kill, then drain briefly
                timed_out = exited = True
                _finish(proc, sel, pidfd, kill)
                deadline = time.monotonic() + _DRAIN_GRACE_S
                continue
            if watch is not None and not exited and watch.wait() <= 0 and watch.poll():
                exited = True  # over the disk cap: kill, then drain briefly
                _finish(proc, sel, pidfd, kill)
                deadline = time.monotonic() + _DRAIN_GRACE_S
                continue
            wait = left if watch is None or exited else min(left, watch.wait())
            for key, _ in sel.select(wait):
                if key.data == "exit":  # the main process is done: end what it left behind
                    exited = True
                    _finish(proc, sel, pidfd, kill)
                    deadline = min(deadline, time.monotonic() + _DRAIN_GRACE_S)
                elif key.data == "stdin":
                    pending = _feed(proc, sel, pending)
                elif chunk := os.read(key.fd, _CHUNK):
                    key.data.add(chunk)
                else:
                    sel.unregister(key.fd)
                    streams -= 1
        return timed_out
    finally:
        sel.close()
        os.close(pidfd)
        if proc.poll() is None:
            kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def _finish(proc: Started, sel: selectors.BaseSelector, pidfd: int,
            kill: Callable[[], None]) -> None:
    """Kill the rest of the tree, reap the main process, stop feeding stdin."""
    kill()
    proc.wait()
    for fd in (pidfd, proc.stdin.fileno() if proc.stdin and not proc.stdin.closed else -1):
        with contextlib.suppress(KeyError, ValueError):
            sel.unregister(fd)


def _feed(proc: Started, sel: selectors.BaseSelector,
          pending: memoryview) -> memoryview:
    assert proc.stdin is not None
    fd = proc.stdin.fileno()
    try:
        pending = pending[os.write(fd, pending[:65536]):]
    except BlockingIOError:
        return pending
    except BrokenPipeError:  # the command stopped reading; what is left is dropped
        pending = memoryview(b"")
    if not pending:
        sel.unregister(fd)
        with contextlib.suppress(OSError):
            proc.stdin.close()
    return pending
