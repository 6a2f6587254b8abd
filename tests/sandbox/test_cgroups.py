"""Per-command cgroups on the real hierarchy of this machine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from swemill.sandbox import Limits, open_sandbox
from swemill.sandbox._cgpool import KEEP_CHARGED_MB
from swemill.sandbox.cgroups import CgroupSupport, CommandCgroups, cgroup_support, leftover_groups

from .conftest import needs_bwrap

support = cgroup_support()
needs_cgroups = pytest.mark.skipif(not (support.pids and support.memory),
                                   reason=f"cgroup controllers not writable here: {support}")


def test_support_is_reported() -> None:
    assert isinstance(support, CgroupSupport)
    assert support.version in ("v1", "v2", "")


@needs_cgroups
def test_groups_are_created_with_limits_and_removed() -> None:
    cg = CommandCgroups(pids=50, memory_mb=64)
    try:
        assert len(cg.dirs) >= 1 and all(d.name.startswith("swemill-") for d in cg.dirs)
        assert set(leftover_groups()) == set(cg.dirs)
        if cg.version == "v1":
            pids_dir = next(d for d in cg.dirs if "/pids/" in str(d))
            mem_dir = next(d for d in cg.dirs if "/memory/" in str(d))
            assert (pids_dir / "pids.max").read_text().strip() == "50"
            assert int((mem_dir / "memory.limit_in_bytes").read_text()) == 64 << 20
    finally:
        assert cg.remove() == []
    assert leftover_groups() == []
    assert all(not d.exists() for d in cg.dirs)


@needs_cgroups
def test_only_the_child_enters_and_kill_all_empties_the_group() -> None:
    cg = CommandCgroups(pids=20, memory_mb=None)
    procs = cg.procs_files[0].decode()
    try:
        # the child moves itself in, then leaves a setsid'd grandchild behind
        p = subprocess.Popen(["/bin/sh", "-c", f"echo $$ > {procs}; setsid sleep 77.123 & "
                              "exec sleep 77.124"])
        for _ in range(200):
            if len(cg.members()) == 2:
                break
            subprocess.run(["sleep", "0.01"])
        members = cg.members()
        assert len(members) == 2 and p.pid in members
        assert str(os.getpid()) not in (cg.dirs[0] / "cgroup.procs").read_text().split()
        assert cg.kill_all()
        assert cg.members() == []
        p.wait(5)
    finally:
        assert cg.remove() == []


@needs_cgroups
@needs_bwrap
def test_a_family_reuses_emptied_groups_and_counts_limit_events_per_command(
        tmp_path: Path) -> None:
    limits = Limits(timeout_s=20, pids=40, memory_mb=256)
    marker = "296.1357"
    with open_sandbox(tmp_path, backend="bwrap", limits=limits) as sb:
        r = sb.exec(f"for i in $(seq 200); do sleep {marker} & done; wait", timeout=5)
        assert r.killed_reason == "pids"
        groups = set(leftover_groups())
        with sb.fork() as child:  # a fork takes its family's kept groups
            r = child.exec("true")
            assert r.ok and r.killed_reason is None  # the earlier hit is not this command's
            assert set(leftover_groups()) == groups
            # a command that leaves much page cache charged does not hand it to the next one
            assert child.exec(f"head -c {(KEEP_CHARGED_MB + 16) << 20} /dev/zero > big").ok
            assert set(leftover_groups()) == set()
    assert leftover_groups() == []
