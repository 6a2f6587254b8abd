"""A killed swemill leaves nothing behind for long.

Regression: SIGTERM or SIGKILL of ``swemill`` left its ``swemill-<pid>-*`` cgroups (with the
sandboxed command still in them) and its ``/tmp/swemill-*`` folders forever. Now SIGTERM runs
the clean-up before exit, and the next swemill start removes what a SIGKILL left — only for
owners that are dead, never another live process's.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from swemill.sandbox.cgroups import CommandCgroups, cgroup_support, leftover_groups
from swemill.sandbox.fork import STORE_PREFIX, _mount_overlay, overlay_usable
from swemill.sandbox.leftovers import (
    memory_parent,
    owner_pid,
    remove_own,
    scratch_dir,
    sweep_scratch,
)

CGROUPS = cgroup_support().pids or cgroup_support().memory


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.fixture
def live() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "120"])
    yield proc
    proc.kill()
    proc.wait()


def test_owner_pid_is_read_from_the_name() -> None:
    assert owner_pid("swemill-123-ws-abcd") == 123
    assert owner_pid("swemill-123-0a1b2c3d4e5f") == 123
    for name in ("swemill-ws-abcd", "swemill-bench-ingest-x", "swemill-0-x", "other-12-x",
                 "swemill-12"):
        assert owner_pid(name) is None


def test_remove_own_takes_this_process_folders_and_nothing_else(
        tmp_path: Path, live: subprocess.Popen[bytes]) -> None:
    # what a SIGTERM landing mid-rmtree in a ``finally`` leaves: a half-removed folder of ours
    mine = tmp_path / f"swemill-{os.getpid()}-snap-abc"
    (mine / "tree" / "pkg").mkdir(parents=True)
    (mine / "tree" / "pkg" / "m.py").write_text("x = 1\n")
    other = tmp_path / f"swemill-{live.pid}-snap-abc"
    other.mkdir()
    lookalike = tmp_path / f"swemill-{os.getpid()}0-snap-abc"  # another pid with our digits
    lookalike.mkdir()
    assert remove_own(tmp_path) == [mine]
    assert not mine.exists() and other.is_dir() and lookalike.is_dir()


@pytest.mark.skipif(not overlay_usable(), reason="no overlay mounts here (needs root)")
def test_remove_own_takes_an_overlay_store_a_sigterm_left_with_its_mount(
        tmp_path: Path, live: subprocess.Popen[bytes]) -> None:
    # regression (CI, two workers): SIGTERM landed in overlay_usable() between its mkdtemp and
    # its ``try``, and the ``swm-<pid>-probe*`` folder outlived the CLI's exit
    mine = tmp_path / f"{STORE_PREFIX}{os.getpid()}-probe1x2y"
    for name in ("l", "u", "w", "m"):
        (mine / name).mkdir(parents=True)
    (mine / "l" / "f").write_text("lower")
    _mount_overlay(mine / "m", [mine / "l"], mine / "u", mine / "w")
    other = tmp_path / f"{STORE_PREFIX}{live.pid}-abc"
    other.mkdir()
    try:
        assert (mine / "m" / "f").read_text() == "lower"  # mounted
        assert remove_own(tmp_path) == [mine]
        assert not mine.exists() and other.is_dir()
        assert str(mine) not in Path("/proc/self/mountinfo").read_text()
    finally:  # a failure must not leave a mount under pytest's temp directory
        if str(mine) in Path("/proc/self/mountinfo").read_text():
            subprocess.run(["umount", "-l", str(mine / "m")], check=False)


def test_sweep_removes_folders_of_dead_owners_only(tmp_path: Path,
                                                   live: subprocess.Popen[bytes]) -> None:
    dead = tmp_path / f"swemill-{_dead_pid()}-ws-abc"
    (dead / "ws" / "sub").mkdir(parents=True)
    (dead / "ws" / "sub" / "f").write_text("x")
    alive = tmp_path / f"swemill-{live.pid}-ws-abc"
    alive.mkdir()
    mine = tmp_path / f"swemill-{os.getpid()}-ws-abc"
    mine.mkdir()
    unnamed = tmp_path / "swemill-ws-abc"  # no owner recorded: not ours to judge
    unnamed.mkdir()
    assert sweep_scratch(tmp_path) == [dead]
    assert not dead.exists()
    assert alive.is_dir() and mine.is_dir() and unnamed.is_dir()


def test_scratch_dirs_carry_the_owner_pid() -> None:
    d = scratch_dir("probe")
    try:
        assert owner_pid(d.name) == os.getpid()
        assert d.name.startswith(f"swemill-{os.getpid()}-probe-")
    finally:
        d.rmdir()


@pytest.mark.skipif(memory_parent() is None, reason="no writable tmpfs at /dev/shm")
def test_in_memory_scratch_dirs_are_made_and_swept_in_dev_shm() -> None:
    memory = memory_parent()
    assert memory is not None
    mine = scratch_dir("gslot", in_memory=True)
    dead = memory / f"swemill-{_dead_pid()}-gslot-abc"
    (dead / "ws").mkdir(parents=True)
    try:
        assert mine.parent == memory and owner_pid(mine.name) == os.getpid()
        assert dead in sweep_scratch() and not dead.exists() and mine.is_dir()
        assert mine in remove_own() and not mine.exists()
    finally:
        for folder in (mine, dead):
            if folder.exists():
                shutil.rmtree(folder)


@pytest.mark.skipif(memory_parent(min_free=0) is None, reason="no writable tmpfs at /dev/shm")
def test_a_dev_shm_without_room_is_not_used() -> None:
    """A container's small /dev/shm (64 MiB by default) would fill with one grading tree:
    folders go there only while it has the headroom asked for."""
    shm = memory_parent(min_free=0)
    assert shm is not None
    st = os.statvfs(shm)
    free = st.f_bavail * st.f_frsize
    assert memory_parent(min_free=free + (1 << 30)) is None
    assert memory_parent(min_free=1) == shm


def _start(tmp_path: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, TMPDIR=str(tmp_path))
    return subprocess.Popen(
        [sys.executable, "-m", "swemill", "sandbox", "run", "--timeout", "60", "--", "sleep", "30"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _leftovers(tmp_path: Path, pid: int) -> tuple[list[Path], list[Path]]:
    dirs = sorted(tmp_path.glob(f"swemill-{pid}-*"))
    return (leftover_groups(pid) if CGROUPS else []), dirs


def _wait_running(proc: subprocess.Popen[str], tmp_path: Path) -> None:
    """Until the command runs: its folder exists and (with cgroups) its group has a member."""
    end = time.monotonic() + 60
    while time.monotonic() < end:
        groups, dirs = _leftovers(tmp_path, proc.pid)
        busy = not CGROUPS or any((g / "cgroup.procs").read_text().split() for g in groups)
        if dirs and busy:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    proc.kill()
    pytest.fail("the sandboxed command never started")


@pytest.mark.slow  # real swemill processes (~4 s of imports each)
def test_sigterm_cleans_up_before_exit(tmp_path: Path) -> None:
    proc = _start(tmp_path)
    _wait_running(proc, tmp_path)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode == 128 + signal.SIGTERM
    assert _leftovers(tmp_path, proc.pid) == ([], [])


@pytest.mark.slow
def test_the_next_start_removes_what_a_sigkill_left(tmp_path: Path,
                                                    live: subprocess.Popen[bytes]) -> None:
    proc = _start(tmp_path)
    _wait_running(proc, tmp_path)
    proc.kill()
    proc.communicate(timeout=30)
    groups, dirs = _leftovers(tmp_path, proc.pid)
    assert dirs and (groups or not CGROUPS)  # what a SIGKILL leaves
    # A live process's things look the same and must survive the sweep.
    other_dir = tmp_path / f"swemill-{live.pid}-ws-keep"
    other_dir.mkdir()
    other = CommandCgroups.adopt(groups[0].parent / f"swemill-{live.pid}-0123456789ab") \
        if CGROUPS else None
    if other is not None:
        other.dirs[0].mkdir()
    try:
        env = dict(os.environ, TMPDIR=str(tmp_path))
        start = subprocess.run([sys.executable, "-m", "swemill", "doctor", "--help"], env=env,
                               capture_output=True, text=True, timeout=120)
        assert start.returncode == 0, start.stderr
        assert _leftovers(tmp_path, proc.pid) == ([], [])
        assert other_dir.is_dir()
        assert other is None or other.dirs[0].is_dir()
    finally:
        if other is not None:
            assert other.remove() == []
