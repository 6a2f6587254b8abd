"""Host side of the warm pytest worker (see :mod:`swemill.validate.warm_server`).

A :class:`WarmWorker` owns one long-lived server process inside a sandbox over its own
workspace. The validator changes the workspace's files, asks the server to run some tests, and
gets per-test outcomes back; the server forks a fresh child for every request.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from swemill.core.errors import SandboxError

__all__ = ["HOTPATCH_INSIDE", "HOTPATCH_PATH", "SERVER_INSIDE", "SERVER_PATH", "Deadlines",
           "WarmResult", "WarmWorker"]

SERVER_PATH = Path(__file__).with_name("warm_server.py")
SERVER_INSIDE = "/opt/swemill/warm_server.py"
"""Where the server script is bound (read-only) inside an isolating sandbox."""
HOTPATCH_PATH = Path(__file__).with_name("hotpatch.py")
HOTPATCH_INSIDE = "/opt/swemill/hotpatch.py"
"""The server loads this file from its own directory."""


@dataclass(frozen=True, slots=True)
class Deadlines:
    """Per-test limits within one run, by node id: ``wall`` seconds since the test started,
    ``cpu`` seconds the test process used since then (either one ends the run as timed out)."""

    wall: Mapping[str, float] = field(default_factory=dict)
    cpu: Mapping[str, float] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.wall or self.cpu)

    def request(self) -> dict[str, object]:
        return {"deadlines": dict(self.wall), "cpu_deadlines": dict(self.cpu)}


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
    """Talks JSON lines to a warm server started by ``proc`` (a Popen with pipes)."""

    def __init__(self, proc: subprocess.Popen[bytes], *, ready_timeout: float = 120.0) -> None:
        self.proc = proc
        self._buf = b""
        self._seq = 0
        ready = self._read_line(ready_timeout)
        if not ready.get("ready"):
            raise SandboxError(f"warm worker did not start: {ready}")
        self.startup_s = float(ready.get("startup_s", 0.0))
        self.preloaded: list[str] = [str(p) for p in ready.get("preloaded") or []]
        """Workspace files the server imported itself (see :mod:`.warm_server`)."""

    def _read_line(self, timeout: float) -> dict:
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
        return json.loads(line)

    def _stderr_tail(self) -> str:
        if self.proc.stderr is None:
            return ""
        try:
            self.proc.wait(timeout=2)
            return self.proc.stderr.read()[-800:].decode("utf-8", "replace").strip()
        except (subprocess.TimeoutExpired, ValueError, OSError):
            return ""

    def _ask(self, request: dict[str, object], timeout: float) -> dict:
        assert self.proc.stdin is not None
        self._seq += 1
        request["id"] = self._seq
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise SandboxError(f"warm worker is gone: {exc}") from exc
        return self._read_line(timeout)

    def start_image(self, args: list[str], timeout: float) -> dict:
        """Fork the head image (the workspace must be at head): ``{"ready": bool, "items",
        "startup_s", "cpu_s", "error"}``."""
        return self._ask({"op": "image", "args": args, "timeout": timeout}, timeout + 30.0)

    def run(self, args: list[str], timeout: float,
            deadlines: Deadlines | None = None, *, cold: bool = False) -> WarmResult:
        """Run pytest with ``args`` in a fresh child; ``timeout`` bounds the child, and
        ``deadlines`` bound single tests within it. ``cold``: the child is a fresh
        interpreter, not a fork of the warm one."""
        request: dict[str, object] = {"args": args, "timeout": timeout}
        if cold:
            request["cold"] = True
        if deadlines:
            request.update(deadlines.request())
        return self._result(self._ask(request, timeout + 30.0))

    def run_image(self, nodeids: list[str], hotpatch: list[str], timeout: float,
                  deadlines: Deadlines | None = None) -> WarmResult:
        """Run ``nodeids`` in a fork of the head image, with the edited functions of the
        ``hotpatch`` files (workspace-relative) swapped in; ``unservable`` set when it can't."""
        request: dict[str, object] = {"image": True, "nodeids": nodeids, "hotpatch": hotpatch,
                                      "timeout": timeout}
        if deadlines:
            request.update(deadlines.request())
        return self._result(self._ask(request, timeout + 60.0))

    @staticmethod
    def _result(reply: dict) -> WarmResult:
        if reply.get("unservable"):
            return WarmResult(exit_code=-1, timed_out=False, outcomes={},
                              cpu_s=float(reply.get("cpu_s", 0.0)),
                              unservable=str(reply["unservable"]),
                              log_tail=str(reply.get("log_tail", "")))
        return WarmResult(
            exit_code=int(reply["exit_code"]), timed_out=bool(reply["timed_out"]),
            outcomes=dict(reply.get("outcomes", {})), durations=dict(reply.get("durations", {})),
            messages=dict(reply.get("messages", {})), log_tail=reply.get("log_tail", ""),
            wall_s=float(reply.get("wall_s", 0.0)), cpu_s=float(reply.get("cpu_s", 0.0)),
            hung=reply.get("hung") or None,
            hotpatched=reply.get("hotpatched"),
        )

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
                self.proc.stdin.write(b'{"op": "exit"}\n')
                self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
