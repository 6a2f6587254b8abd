"""Functional behaviour shared by the bwrap and local backends (real processes)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from swemill.core.errors import SandboxError
from swemill.sandbox import WORKSPACE, ExecResult
from swemill.sandbox.cgroups import leftover_groups
from swemill.sandbox.contract import Sandbox


def test_exit_code_stdout_and_stderr_are_kept_apart(sandbox: Sandbox) -> None:
    r = sandbox.exec("echo out; echo err >&2; exit 7")
    assert isinstance(r, ExecResult)
    assert (r.exit_code, r.stdout, r.stderr) == (7, "out\n", "err\n")
    assert not r.timed_out and r.killed_reason is None and not r.ok
    assert 0 < r.wall_s < 30


def test_argv_is_not_reparsed_by_a_shell(sandbox: Sandbox) -> None:
    r = sandbox.exec(["printf", "%s|", "a b", "$HOME", ";echo no"])
    assert r.ok and r.stdout == "a b|$HOME|;echo no|"


def test_cwd_is_the_workspace(sandbox: Sandbox, backend: str) -> None:
    r = sandbox.exec("pwd; cat README; ./run.sh")
    first, *rest = r.stdout.splitlines()
    expected = WORKSPACE if backend.startswith("bwrap") else str(sandbox.workspace)
    assert sandbox.workdir == expected
    assert os.path.realpath(first) == os.path.realpath(expected)
    assert rest == ["original", "ran"]
    assert sandbox.exec("pwd", cwd="pkg").stdout.strip().endswith("/pkg")


def test_environment_is_an_allow_list(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "do-not-leak-4f2a")
    monkeypatch.setenv("SWEMILL_TEST_HOST_VAR", "host")
    r = sandbox.exec(["env"], env={"EXTRA": "given"})
    env = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    assert "do-not-leak-4f2a" not in r.stdout
    assert "AWS_SECRET_ACCESS_KEY" not in env and "SWEMILL_TEST_HOST_VAR" not in env
    assert env["EXTRA"] == "given" and env["HOME"] == "/tmp" and env["LANG"] == "C.UTF-8"
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin"


def test_stdin_is_fed(sandbox: Sandbox) -> None:
    data = b"line\n" * 50_000  # larger than a pipe buffer
    r = sandbox.exec("wc -l", stdin=data)
    assert r.stdout.strip() == "50000"


def test_writes_by_commands_land_in_the_workspace(sandbox: Sandbox, workspace: Path) -> None:
    assert sandbox.exec("mkdir -p out && echo made > out/f.txt").ok
    assert (workspace / "out" / "f.txt").read_text() == "made\n"
    assert sandbox.read_file("out/f.txt") == b"made\n"


def test_read_and_write_file(sandbox: Sandbox, workspace: Path) -> None:
    assert sandbox.read_file("pkg/mod.py") == b"VALUE = 1\n"
    assert sandbox.read_file(f"{WORKSPACE}/README") == b"original\n"
    sandbox.write_file("new/deep/file.txt", "hello")
    sandbox.write_file("run.sh", "#!/bin/sh\necho changed\n")
    assert (workspace / "new" / "deep" / "file.txt").read_text() == "hello"
    assert os.access(workspace / "run.sh", os.X_OK), "replacing a file keeps its mode"
    assert sandbox.exec("./run.sh").stdout == "changed\n"
    with pytest.raises(FileNotFoundError):
        sandbox.read_file("missing.txt")


@pytest.mark.parametrize("path", ["../outside.txt", "pkg/../../outside.txt", "/etc/passwd",
                                  "link_out/passwd", "abs_link", "/workspace/../etc/passwd"])
def test_paths_escaping_the_workspace_are_refused(sandbox: Sandbox, workspace: Path,
                                                  path: str) -> None:
    (workspace / "link_out").symlink_to("/etc")
    (workspace / "abs_link").symlink_to("/etc/passwd")
    with pytest.raises(SandboxError):
        sandbox.read_file(path)
    with pytest.raises(SandboxError):
        sandbox.write_file(path, "x")
    assert not (workspace.parent / "outside.txt").exists()


def test_symlinks_inside_the_workspace_are_followed(sandbox: Sandbox, workspace: Path) -> None:
    (workspace / "rel").symlink_to("pkg/mod.py")
    (workspace / "abs").symlink_to(f"{WORKSPACE}/pkg/mod.py")
    assert sandbox.read_file("rel") == sandbox.read_file("abs") == b"VALUE = 1\n"


def test_no_cgroup_is_left_behind(sandbox: Sandbox, backend: str) -> None:
    """Between commands a sandbox keeps only the emptied groups of its last command (the next
    one reuses them), and a session runner's own group holding the runner and its sandbox's
    init; closing it removes them (the fixture checks)."""
    kept: set[Path] = set()
    for cmd in ("true", "exit 3", "sleep 5 & sleep 5 & echo bg"):
        sandbox.exec(cmd, timeout=2)
        groups = set(leftover_groups())
        assert not kept or groups == kept
        busy = {g.name: len((g / "cgroup.procs").read_text().split()) for g in groups
                if (g / "cgroup.procs").read_text()}
        assert list(busy.values()) == ([2] if backend.endswith("-runner") else [])
        kept = groups
    sandbox.exec("sleep 10", timeout=0.5)
    assert set(leftover_groups()) == kept


def test_closed_sandbox_refuses_work(sandbox: Sandbox) -> None:
    sandbox.close()
    with pytest.raises(SandboxError):
        sandbox.exec("true")
