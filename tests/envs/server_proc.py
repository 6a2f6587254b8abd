"""``swemill serve`` as a real subprocess on a free loopback port, for tests and the benchmark."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

__all__ = ["Served", "free_port"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """Starts the server, waits for ``/health``, and stops it (SIGTERM, then kill)."""

    def __init__(self, root: Path, run_id: str, cache: Path, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "SWEMILL_CACHE": str(cache)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "swemill", "serve", "--tasks", run_id, "--out", str(root),
             "--port", str(self.port), *args],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"swemill serve exited: {self.proc.stdout.read()}")  # type: ignore[union-attr]
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("swemill serve did not answer /health within 60 s")

    def stop(self) -> str:
        self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return out
