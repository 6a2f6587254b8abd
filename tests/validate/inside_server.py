"""A warm server (:mod:`swemill.validate.inside`) in a real subprocess, spoken to in its own
typed records over its pipes, for the tests of the inside package."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from swemill.validate.inside import protocol as wire
from swemill.validate.inside.protocol import Flags
from swemill.validate.warm import server_argv

ARGS = ["-p", "no:cacheprovider", "-p", "no:randomly", "-q", "--tb=short", "-o", "addopts="]


class Server:
    """``python -u inside/__main__.py ROOT``; each method sends one request and returns the
    reply as a dict. ``args`` are prefixed with :data:`ARGS` unless ``plain``."""

    def __init__(self, root: Path, *, env: dict[str, str] | None = None,
                 flags: Flags | None = None, python: str = sys.executable,
                 plain: bool = False) -> None:
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
        self.prefix = [] if plain else ARGS
        self.proc = subprocess.Popen(server_argv(python, str(root), isolated=False,
                                                 flags=flags or Flags()),
                                     cwd=root, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.ready = self._read()
        assert self.ready["op"] == "ready" and self.ready["ready"], self.ready
        self._seq = 0

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        return asdict(wire.decode(self.proc.stdout.readline()))

    def ask(self, request: wire.Request) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(wire.encode(request))
        self.proc.stdin.flush()
        return self._read()

    def _id(self) -> int:
        self._seq += 1
        return self._seq

    def run(self, args: list[str], timeout: float, **extra: Any) -> dict[str, Any]:
        return self.ask(wire.Run(self._id(), [*self.prefix, *args], timeout, **extra))

    def start_image(self, timeout: float, args: list[str] | None = None) -> dict[str, Any]:
        return self.ask(wire.StartImage(self._id(), [*self.prefix, *(args or [])], timeout))

    def in_image(self, nodeids: list[str], timeout: float, **extra: Any) -> dict[str, Any]:
        return self.ask(wire.RunInImage(self._id(), nodeids, timeout=timeout, **extra))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(wire.encode(wire.Exit()))
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
