"""Session runners (``keep_warm``): one long-lived bwrap sandbox per session, every command
forked in it. Real bwrap, real cgroups; each hostile command is bounded by its own timeout.
The hostile battery itself runs both ways in ``test_hostile.py``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from swemill.sandbox import Bind, Limits, open_sandbox
from swemill.sandbox.cgroups import leftover_groups
from swemill.sandbox.contract import ExecResult, Sandbox

from .conftest import needs_bwrap, warm

pytestmark = needs_bwrap

FIND_RUNNER = "runner=$PPID"  # the runner forked the command's shell


@pytest.fixture
def pair(workspace: Path, tmp_path: Path) -> Iterator[tuple[Sandbox, Sandbox]]:
    """A sandbox with a session runner, and one with a sandbox per command, over copies."""
    other = tmp_path / "other"
    other.mkdir()
    for f in workspace.rglob("*"):
        dest = other / f.relative_to(workspace)
        if f.is_dir():
            dest.mkdir(exist_ok=True)
        else:
            dest.write_bytes(f.read_bytes())
            dest.chmod(f.stat().st_mode)
    limits = Limits(timeout_s=20, memory_mb=256, pids=200)
    with open_sandbox(workspace, backend="bwrap", limits=limits) as runner, \
            open_sandbox(other, backend="bwrap", limits=limits) as plain:
        yield warm(runner), plain
    assert leftover_groups() == []


def _seen(r: ExecResult) -> tuple[object, ...]:
    return r.exit_code, r.stdout, r.stderr, r.timed_out, r.killed_reason


COMMANDS: list[str | list[str]] = [
    "echo out; echo err >&2; exit 7",
    "kill -TERM $$",
    ["printf", "%s|", "a b", "$HOME"],
    "id; grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status",
    "ulimit -c; ulimit -f; ulimit -v; umask; echo $HOME $PWD; hostname; ls /",
    "yes | head -n 2; echo ${PIPESTATUS[0]}",  # SIGPIPE is the default again
    "echo x > /tmp/f; mkdir /dev/shm/d; ls -A /tmp /dev/shm",
    "ls -A /tmp /dev/shm; cat /proc/sysvipc/shm | wc -l",
    "cd pkg && pwd && cat mod.py",
    "ip link 2>/dev/null || cat /proc/net/dev | tail -n +3 | cut -d: -f1",
    "exec 3>&1; echo to-3 >&3; ls /proc/self/fd",
]


def test_a_command_sees_what_a_sandbox_of_its_own_would_show(
        pair: tuple[Sandbox, Sandbox]) -> None:
    runner, plain = pair
    for cmd in COMMANDS:
        a, b = runner.exec(cmd, timeout=10), plain.exec(cmd, timeout=10)
        assert _seen(a) == _seen(b), cmd
        assert a.extra.get("session_runner") == 1.0 and "session_runner" not in b.extra
    fed = runner.exec("wc -c", stdin=b"x" * 200_000)
    assert fed.stdout.strip() == "200000" and fed.extra.get("session_runner") == 1.0


def test_a_command_cannot_reach_the_runner_or_forge_its_reply(tmp_path: Path) -> None:
    with warm(open_sandbox(tmp_path, backend="bwrap")) as sb:
        probe = (f"{FIND_RUNNER}; grep -q swemill-runner /proc/$runner/cmdline && echo found; "
                 "ls /proc/$runner/fd || echo fd-denied; "
                 "cat /proc/$runner/environ || echo environ-denied; "
                 "python3 -c \"import ctypes,sys; r=ctypes.CDLL(None).ptrace(16,int(sys.argv[1]),"
                 "0,0); print('ptrace', r)\" $runner; "
                 "ls -l /proc/[0-9]*/fd/ 2>/dev/null | grep -c socket; "
                 "printf 'X0'; printf 'S1' >&2; exit 3")
        r = sb.exec(probe, timeout=10)
        assert r.extra.get("session_runner") == 1.0
        lines = r.stdout.splitlines()
        assert lines[:3] == ["found", "fd-denied", "environ-denied"], r
        assert lines[3] == "ptrace -1"  # PTRACE_ATTACH refused: the runner is not dumpable
        assert lines[4] == "0"  # no socket in any process a command can look into
        assert r.exit_code == 3 and r.stdout.endswith("X0") and r.stderr.endswith("S1")


def _runner_gone_then_back(sb: Sandbox, attack: str, timeout: float) -> ExecResult:
    r = sb.exec(f"{FIND_RUNNER}; {attack}", timeout=timeout)
    assert r.extra.get("session_runner") == 1.0
    assert sb.keep_warm(wait=True)  # a new runner (the next command would wait for it too)
    after = sb.exec("echo again")
    assert after.ok and after.stdout == "again\n" and after.extra.get("session_runner") == 1.0
    return r


def test_a_command_that_kills_its_runner_is_killed_with_it(tmp_path: Path) -> None:
    with warm(open_sandbox(tmp_path, backend="bwrap")) as sb:
        r = _runner_gone_then_back(sb, "kill -9 $runner; sleep 3; echo survived", 10)
        assert "survived" not in r.stdout and r.killed_reason == "signal" and not r.ok
    assert leftover_groups() == []


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_command_that_stops_its_runner_counts_as_killed(tmp_path: Path) -> None:
    """A stopped runner cannot report the exit status: after its wait the host ends the
    runner and reports the command killed; the next command gets a new runner."""
    with warm(open_sandbox(tmp_path, backend="bwrap")) as sb:
        r = _runner_gone_then_back(sb, "kill -STOP $runner; exit 0", 30)
        assert r.exit_code == 137 and r.killed_reason == "signal"
    assert leftover_groups() == []


def test_nothing_a_command_leaves_in_memory_outlives_it(tmp_path: Path) -> None:
    """/tmp and /dev/shm are the session sandbox's tmpfs, and System V IPC its namespace's:
    emptied after every command, even what the command made hard to remove."""
    shm = ("import ctypes; libc = ctypes.CDLL(None); "
           "print(libc.shmget(0, 1 << 20, 0o1000 | 0o600) >= 0, "
           "libc.semget(0, 1, 0o1000 | 0o600) >= 0, libc.msgget(0, 0o1000 | 0o600) >= 0)")
    with warm(open_sandbox(tmp_path, backend="bwrap")) as sb:
        made = sb.exec("mkdir -p /tmp/a/b && echo x > /tmp/a/b/f && chmod 000 /tmp/a/b /tmp/a "
                       "&& ln -s /workspace /tmp/ws && head -c 1000000 /dev/zero > /dev/shm/big "
                       f"&& python3 -c '{shm}' && cat /proc/sysvipc/shm | wc -l", timeout=10)
        assert made.ok and made.stdout == "True True True\n2\n", made
        left = sb.exec("ls -A /tmp /dev/shm; tail -qn +2 /proc/sysvipc/shm /proc/sysvipc/sem "
                       "/proc/sysvipc/msg | wc -l")
        assert left.stdout == "/dev/shm:\n\n/tmp:\n0\n", left
        assert left.extra.get("session_runner") == 1.0
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # the link's target was left alone


def test_binds_under_tmp_are_kept_and_never_emptied(tmp_path: Path) -> None:
    """A bind inside the sandbox's /tmp (an environment kept under the host's /tmp, as in the
    tests and benchmarks) stays whole: only what the command left around it is removed."""
    ws, env = tmp_path / "ws", tmp_path / "env"
    ws.mkdir()
    (env / "lib").mkdir(parents=True)
    (env / "lib" / "keep.txt").write_text("kept\n")
    for path in (env, env / "lib"):
        path.chmod(0o777)  # the sandbox user could delete it all, were it walked
    (env / "lib" / "keep.txt").chmod(0o666)
    inside = f"/tmp/cache/envs/{env.name}"
    binds = [Bind(env, inside, writable=True)]
    with warm(open_sandbox(ws, backend="bwrap", binds=binds)) as sb:
        made = sb.exec(f"echo x > /tmp/f && mkdir /tmp/d && echo z > {inside}/new && ls -A /tmp",
                       timeout=10)
        assert made.ok and made.stdout == "cache\nd\nf\n", made
        left = sb.exec(f"ls -A /tmp /tmp/cache /tmp/cache/envs; cat {inside}/lib/keep.txt")
        assert left.extra.get("session_runner") == 1.0
        assert left.stdout == (f"/tmp:\ncache\n\n/tmp/cache:\nenvs\n\n/tmp/cache/envs:\n"
                               f"{env.name}\nkept\n"), left
    assert (env / "lib" / "keep.txt").read_text() == "kept\n"
    assert (env / "new").read_text() == "z\n"  # the bind is the host's own directory


def test_a_fork_never_sees_what_the_parent_does_after_it(tmp_path: Path) -> None:
    """Forking an overlay workspace remounts it over a fresh upper layer: the runner, which
    holds the old mount, is ended first, so the parent's later writes cannot land in the layer
    the fork now shares."""
    (tmp_path / "ws").mkdir()
    with open_sandbox(tmp_path / "ws", backend="bwrap") as base, base.fork() as parent:
        warm(parent)
        assert parent.exec("echo 1 > a").extra.get("session_runner") == 1.0
        with parent.fork() as child:
            assert parent.keep_warm(wait=True)  # a new runner over the remounted workspace
            second = parent.exec("echo 2 > a; echo 2 > b")
            assert second.ok and second.extra.get("session_runner") == 1.0
            assert child.read_file("a") == b"1\n"
            assert child.exec("cat a; ls").stdout == "1\na\n"
        assert parent.read_file("a") == b"2\n"


def test_commands_at_once_share_nothing(tmp_path: Path) -> None:
    """A runner serves one command at a time; one more at once gets a sandbox of its own."""
    with warm(open_sandbox(tmp_path, backend="bwrap")) as sb:
        sb.exec("true")
        results: list[ExecResult] = []
        threads = [threading.Thread(target=lambda i=i: results.append(
            sb.exec(f"sleep 1; echo {i}", timeout=20))) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(r.stdout for r in results) == ["0\n", "1\n"]
        assert sorted(r.extra.get("session_runner", 0.0) for r in results) == [0.0, 1.0]


def test_where_no_runner_can_run_commands_keep_a_sandbox_each(tmp_path: Path) -> None:
    with open_sandbox(tmp_path, backend="bwrap",
                      limits=Limits(pids=None, memory_mb=None)) as unlimited:
        assert not unlimited.keep_warm()
        assert "cgroup" in unlimited.runner_note  # type: ignore[attr-defined]
        assert unlimited.exec("echo ok").stdout == "ok\n"
    with warm(open_sandbox(tmp_path, backend="bwrap")) as sb:
        big = sb.exec("echo $((${#A} + ${#B}))", env={"A": "x" * 80_000, "B": "y" * 80_000})
        assert big.stdout == "160000\n" and "session_runner" not in big.extra
        assert "exceed" in sb.runner_note  # type: ignore[attr-defined]
        assert sb.exec("true").extra.get("session_runner") == 1.0


def _runner_pids() -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and b"swemill-runner" in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_close_ends_the_runner_and_its_sandbox(tmp_path: Path) -> None:
    before = set(_runner_pids())
    sb = warm(open_sandbox(tmp_path, backend="bwrap"))
    assert sb.exec("true").extra.get("session_runner") == 1.0
    assert set(_runner_pids()) - before
    sb.close()
    end = time.monotonic() + 5
    while set(_runner_pids()) - before and time.monotonic() < end:
        time.sleep(0.02)
    assert not set(_runner_pids()) - before
    assert leftover_groups() == []
