"""The docker backend: runs only where a Docker engine answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from swemill.core.errors import SandboxUnavailable
from swemill.sandbox import Limits, open_sandbox
from swemill.sandbox.docker import engine_info

ok, why, _ = engine_info()
pytestmark = [pytest.mark.docker]
needs_engine = pytest.mark.skipif(not ok, reason=f"no Docker engine: {why}")


@pytest.mark.skipif(ok, reason="a Docker engine answers here")
def test_unavailable_engine_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable, match="docker sandbox unusable.*fix"):
        open_sandbox(tmp_path, backend="docker")


@needs_engine
def test_lockdown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "docker-secret-77")
    (tmp_path / "f").write_text("in\n")
    with open_sandbox(tmp_path, backend="docker", limits=Limits(timeout_s=120)) as sb:
        r = sb.exec("cat f; echo out > g; env; touch /etc/x 2>&1; id -u; "
                    "grep CapEff /proc/self/status")
        assert r.exit_code == 0, r.stderr
        assert "in" in r.stdout and "docker-secret-77" not in r.stdout
        assert "Read-only file system" in r.stdout and "0000000000000000" in r.stdout
        assert (tmp_path / "g").read_text() == "out\n"
        net = sb.exec(["python3", "-c", "import socket;socket.create_connection(('1.1.1.1',53),3)"])
        assert net.exit_code != 0


@needs_engine
def test_timeout_and_memory(tmp_path: Path) -> None:
    with open_sandbox(tmp_path, backend="docker",
                      limits=Limits(timeout_s=120, memory_mb=128)) as sb:
        assert sb.exec("sleep 60", timeout=3).timed_out
        hog = "b=[]\nfor _ in range(100): b.append(bytearray(10<<20))"
        assert sb.exec(["python3", "-c", hog]).killed_reason == "memory"
