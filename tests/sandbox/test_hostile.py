"""The hostile battery, under bwrap. Every attack is bounded on its own (a hard cap in the
script and a timeout), so failed containment cannot harm the machine."""

from __future__ import annotations

import resource
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from swemill.sandbox import Limits, open_sandbox
from swemill.sandbox.cgroups import cgroup_support, leftover_groups
from swemill.sandbox.contract import Sandbox

from .conftest import needs_bwrap, processes_matching, warm

pytestmark = needs_bwrap


@pytest.fixture(params=["per-command", "session-runner"])
def box(workspace: Path, request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    """A bwrap sandbox with a sandbox per command, and one whose commands a session runner
    forks (:meth:`~swemill.sandbox.bwrap.BwrapSandbox.keep_warm`): every attack, both ways."""
    limits = Limits(timeout_s=20, memory_mb=256, pids=200, output_bytes=64_000)
    with open_sandbox(workspace, backend="bwrap", limits=limits) as sb:
        if request.param == "session-runner":
            warm(sb)
        yield sb
        if request.param == "session-runner":  # after the attack, the runner still serves
            assert sb.exec("true").extra.get("session_runner") == 1.0
    assert leftover_groups() == []


def _gone_soon(marker: str, within_s: float = 3.0) -> bool:
    end = time.monotonic() + within_s
    while processes_matching(marker):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def test_tcp_connect_to_a_host_listener_fails(box: Sandbox) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted: list[object] = []
    server.settimeout(5)
    t = threading.Thread(target=lambda: accepted.append(_accept(server)), daemon=True)
    t.start()
    try:
        probe = ("import socket,sys\ns=socket.socket();s.settimeout(3)\n"
                 f"try:\n s.connect(('127.0.0.1',{port}));print('CONNECTED')\n"
                 "except OSError as e:\n print('refused', e)")
        r = box.exec(["python3", "-c", probe], timeout=10)
        assert "CONNECTED" not in r.stdout and "refused" in r.stdout
        # the listener itself works: a host-side connect gets through
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        t.join(6)
        assert accepted == ["ok"]
    finally:
        server.close()


def _accept(server: socket.socket) -> str:
    try:
        conn, _ = server.accept()
        conn.close()
        return "ok"
    except OSError:
        return "none"


def test_writes_to_etc_and_the_host_home_fail_and_leave_nothing(box: Sandbox) -> None:
    marker = f"swemill-hostile-{time.time_ns()}"
    home = Path.home()
    r = box.exec(f"echo x > /etc/{marker}; echo x > {home}/{marker}; mkdir /{marker}; "
                 f"echo x > ~/{marker} && echo home-is-private-tmp")
    assert not Path("/etc", marker).exists()
    assert not (home / marker).exists()
    assert not Path("/", marker).exists()
    assert "Read-only file system" in r.stderr or "No such file" in r.stderr
    assert "home-is-private-tmp" in r.stdout  # HOME=/tmp, a tmpfs gone with the command
    assert not Path("/tmp", marker).exists()


def test_the_host_environment_is_not_visible(box: Sandbox,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hostile-secret-91c3")
    r = box.exec("env; cat /proc/1/environ /proc/self/environ 2>/dev/null | tr '\\0' '\\n'")
    assert "hostile-secret-91c3" not in r.stdout and "AWS_SECRET" not in r.stdout


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_bounded_fork_bomb_is_stopped(box: Sandbox) -> None:
    marker = "1234.5678"  # sleepers carry it, so only our own processes are counted
    script = f"for i in $(seq 5000); do sleep {marker} & done; wait"  # hard cap: 5000
    r = box.exec(script, timeout=4)
    if cgroup_support().pids:
        assert r.killed_reason == "pids"
    else:
        assert not r.ok
    assert _gone_soon(marker), "sleepers outlived the command"


@pytest.mark.timeout(120)
def test_a_memory_hog_is_killed_with_a_reason(box: Sandbox) -> None:
    hog = ("chunks = []\nfor _ in range(200):\n"  # at most 2 GB, in 10 MB steps
           "    chunks.append(bytearray(10 << 20))\nprint('survived')")
    r = box.exec(["python3", "-c", hog], timeout=30)
    assert "survived" not in r.stdout
    if cgroup_support().memory:
        assert r.killed_reason == "memory"
    else:
        assert r.exit_code != 0


@pytest.mark.parametrize("tail", ["sleep 100", "echo parent-done"])
def test_a_setsid_grandchild_does_not_outlive_the_command(box: Sandbox, tail: str) -> None:
    marker = "299.4321" if tail.startswith("sleep") else "299.8765"
    r = box.exec(f"setsid sh -c 'sleep {marker}' & {tail}", timeout=2)
    assert r.timed_out == tail.startswith("sleep")
    assert r.wall_s < 10
    assert _gone_soon(marker), "the daemonised grandchild survived"


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_1gb_stdout_flood_returns_capped_output(box: Sandbox) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = box.exec("yes swemill-flood | head -c 1G; echo tail-marker", timeout=60)
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert r.exit_code == 0 and not r.timed_out and r.truncated
    assert len(r.stdout.encode()) <= 64_000 + 200
    assert r.stdout.startswith("swemill-flood\n") and r.stdout.endswith("tail-marker\n")
    assert "bytes dropped" in r.stdout
    assert grown_kb < 200_000, f"test process grew by {grown_kb} KiB"


@pytest.mark.parametrize("runner", [False, True])
def test_file_size_limit(workspace: Path, runner: bool) -> None:
    with open_sandbox(workspace, backend="bwrap", limits=Limits(file_size_mb=1)) as sb:
        if runner:
            warm(sb)
        r = sb.exec(["head", "-c", "5000000", "/dev/zero"], timeout=10)
        assert r.ok  # to a pipe: not a file
        r = sb.exec("exec head -c 5000000 /dev/zero > big", timeout=10)
        assert r.killed_reason == "file_size"
    assert (workspace / "big").stat().st_size <= 1 << 20


def test_net_flag_shares_the_host_network(workspace: Path) -> None:
    """The one deliberate opening (environment builds reaching a registry) really opens."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        with open_sandbox(workspace, backend="bwrap", limits=Limits(net=True)) as sb:
            probe = f"import socket;socket.create_connection(('127.0.0.1',{port}),3);print('ok')"
            assert sb.exec(["python3", "-c", probe], timeout=10).stdout == "ok\n"
    finally:
        server.close()
