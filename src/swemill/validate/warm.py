"""Host side of the warm pytest worker (see :mod:`swemill.validate.inside`).

A :class:`WarmWorker` owns one long-lived server process inside a sandbox over its own
workspace. The validator changes the workspace's files, asks the server to run some tests, and
gets per-test outcomes back; the server forks a fresh child for every request. The two speak
the typed records of :mod:`swemill.validate.inside.protocol`.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from swemill.core.errors import SandboxError
from swemill.validate.inside import protocol as wire
from swemill.validate.inside.protocol import Flags

__all__ = ["INSIDE_DIR", "INSIDE_MOUNT", "Deadlines", "Flags", "WarmResult", "WarmWorker",
           "server_argv"]

INSIDE_DIR = Path(wire.__file__).parent
"""The :mod:`swemill.validate.inside` package's folder on the host."""
INSIDE_MOUNT = "/opt/swemill/swemill_inside"
"""Where that folder is bound (read-only) inside an isolating sandbox."""


def server_argv(python: str, workdir: str, *, isolated: bool, flags: Flags) -> list[str]:
    """The command that starts the warm server over ``workdir`` with ``flags``."""
    folder = INSIDE_MOUNT if isolated else str(INSIDE_DIR)
    off = flags.off()
    return [python, "-u", f"{folder}/__main__.py", workdir, *(["--off", ",".join(off)] if off
                                                            else [])]


@dataclass(frozen=True, slots=True)
class Deadlines:
    """Per-test limits within one run, by node id: ``wall`` seconds since the test started,
    ``cpu`` seconds the test process used since then (either one ends the run as timed out)."""

    wall: Mapping[str, float] = field(default_factory=dict)
    cpu: Mapping[str, float] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.wall or self.cpu)




@dataclass(slots=True)
class WarmResult:
    exit_code: int
    timed_out: bool
    outcomes: dict[str, str]
    durations: dict[str, float] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    log_tail: str = ""
    wall_s: float = 0.0
    cpu_s: float = 0.0
    """CPU seconds of the forked test process (and whatever it started and reaped)."""
    hung: str | None = None
    """The test that ran past its own deadline (the run was then killed: timed out)."""
    unservable: str | None = None
    """Why the head image could not serve the run, in short (nothing ran: run it the
    ordinary way); ``log_tail`` then says what it was about."""
    hotpatched: int | None = None
    """Served by the head image: how many live functions took the edited code."""


class WarmWorker:
    """Talks to a warm server started by ``proc`` (a Popen with pipes)."""

    def __init__(self, proc: subprocess.Popen[bytes], *, ready_timeout: float = 120.0) -> None:
        self.proc = proc
        self._buf = b""
        self._seq = 0
        ready = self._read(ready_timeout)
        if not isinstance(ready, wire.Ready) or not ready.ready:
            raise SandboxError(f"warm worker did not start: {ready}")
        self.startup_s = ready.startup_s
        self.flags_off: list[str] = list(ready.flags_off)
        """The optimisations the server was started without (see :class:`Flags`)."""
        self.preloaded: list[str] = [str(p) for p in ready.preloaded]
        """Workspace files the server imported itself (see :mod:`.inside.serve_loop`)."""

    def _read(self, timeout: float) -> wire.Message:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    self.kill()
                    raise SandboxError(f"warm worker gave no answer within {timeout:.0f}s")
                chunk = os.read(fd, 65536)
                if not chunk:
                    err = self._stderr_tail()
                    raise SandboxError(f"warm worker exited (code {self.proc.poll()}): {err}")
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            return wire.decode(line)
        except wire.ProtocolError as exc:
            self.kill()
            raise SandboxError(f"warm worker spoke out of protocol: {exc}") from exc

    def _stderr_tail(self) -> str:
        if self.proc.stderr is None:
            return ""
        try:
            self.proc.wait(timeout=2)
            return self.proc.stderr.read()[-800:].decode("utf-8", "replace").strip()
        except (subprocess.TimeoutExpired, ValueError, OSError):
            return ""

    def _ask(self, request: wire.Request, timeout: float) -> wire.Message:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(wire.encode(request))
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise SandboxError(f"warm worker is gone: {exc}") from exc
        return self._read(timeout)

    def _id(self) -> int:
        self._seq += 1
        return self._seq

    def start_image(self, args: list[str], timeout: float, *,
                    tree: bool = False) -> wire.ImageReady:
        """Fork the head image (the workspace must be at head), or with ``tree`` the tree
        image of the workspace as it is."""
        reply = self._ask(wire.StartImage(self._id(), args, timeout, tree), timeout + 30.0)
        if not isinstance(reply, wire.ImageReady):
            raise SandboxError(f"warm worker answered {reply.op} to start_image")
        return reply

    def run(self, args: list[str], timeout: float, deadlines: Deadlines | None = None, *,
            cold: bool = False, terse: bool = False, maxfail: int = 0,
            cpu_timeout: float = 0.0) -> WarmResult:
        """Run pytest with ``args`` in a fresh child; ``timeout`` bounds the child, and
        ``deadlines`` bound single tests within it. ``cold``: the child is a fresh
        interpreter, not a fork of the warm one. ``terse``: outcomes only (failures not
        formatted, no failure messages); ``maxfail``: stop after that many failures;
        ``cpu_timeout``: the child's CPU seconds at which the run ends, timed out (0: none)."""
        limits = deadlines or Deadlines()
        request = wire.Run(self._id(), args, timeout, dict(limits.wall), dict(limits.cpu), cold,
                           terse, maxfail, cpu_timeout)
        return self._result(self._ask(request, timeout + 30.0))

    def run_image(self, nodeids: list[str] | None, hotpatch: list[str], timeout: float,
                  deadlines: Deadlines | None = None, *, terse: bool = False,
                  maxfail: int = 0, tree: bool = False, cpu_timeout: float = 0.0) -> WarmResult:
        """Run ``nodeids`` in a fork of the head image, with the edited functions of the
        ``hotpatch`` files (workspace-relative) swapped in; ``unservable`` set when it can't.
        ``nodeids`` None: every test the image collected (the head tree's whole suite).
        ``tree``: in a fork of the tree image (no ``hotpatch``); ``cpu_timeout``: as
        :meth:`run`'s."""
        limits = deadlines or Deadlines()
        request = wire.RunInImage(self._id(), nodeids or [], hotpatch, timeout,
                                  dict(limits.wall), dict(limits.cpu), nodeids is None, terse,
                                  maxfail, tree, cpu_timeout)
        return self._result(self._ask(request, timeout + 60.0))

    @staticmethod
    def _result(reply: wire.Message) -> WarmResult:
        if not isinstance(reply, wire.Result):
            raise SandboxError(f"warm worker answered {reply.op} to a run")
        if reply.unservable:
            return WarmResult(exit_code=-1, timed_out=False, outcomes={}, cpu_s=reply.cpu_s,
                              unservable=reply.unservable, log_tail=reply.log_tail)
        return WarmResult(
            exit_code=reply.exit_code, timed_out=reply.timed_out, outcomes=dict(reply.outcomes),
            durations=dict(reply.durations), messages=dict(reply.messages),
            log_tail=reply.log_tail, wall_s=reply.wall_s, cpu_s=reply.cpu_s,
            hung=reply.hung or None, hotpatched=reply.hotpatched)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)

    def close(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            try:
                self.proc.stdin.write(wire.encode(wire.Exit()))
                self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
