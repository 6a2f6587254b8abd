"""``swemill serve`` as a child process on a free loopback port: for trainer scripts that
start their own environment server, the benchmark and the tests."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from swemill.core.errors import SwemillError

__all__ = ["ServerProcess", "free_port"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """Starts ``swemill serve --tasks RUN_ID --out ROOT [ARGS]`` on 127.0.0.1 and waits until
    ``/health`` answers; :meth:`stop` ends it (SIGTERM, then SIGKILL) and returns its output."""

    def __init__(self, root: Path | str, run_id: str, *args: str, cache: Path | None = None,
                 start_timeout_s: float = 60.0) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ)
        if cache is not None:
            env["SWEMILL_CACHE"] = str(cache)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "swemill", "serve", "--tasks", run_id, "--out", str(root),
             "--port", str(self.port), *args],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SwemillError(f"swemill serve exited: {self.stop().strip()[-500:]}")
            if self._healthy():
                return
            time.sleep(0.2)
        self.stop()
        raise SwemillError(f"swemill serve did not answer /health in {start_timeout_s:g} s")

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                return bool(json.loads(r.read()).get("status") == "ok")
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return out or ""

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
