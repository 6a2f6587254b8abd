"""Fixtures for the sandbox tests: real bwrap, real cgroups, real processes; no mocks."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from swemill.sandbox import Limits, open_sandbox
from swemill.sandbox.bwrap import usable
from swemill.sandbox.cgroups import leftover_groups
from swemill.sandbox.contract import Sandbox

needs_bwrap = pytest.mark.skipif(not usable()[0], reason=f"bwrap unusable: {usable()[1]}")


def processes_matching(marker: str) -> list[int]:
    """Host pids running exactly ``sleep <marker>`` (a marker of our own, so other users'
    processes and shells that merely mention it never count)."""
    wanted = b"sleep\0" + marker.encode() + b"\0"
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes()
        except OSError:
            continue
        if cmdline == wanted or cmdline.endswith(b"/" + wanted):
            found.append(int(entry.name))
    return found


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "mod.py").write_text("VALUE = 1\n")
    (ws / "README").write_text("original\n")
    run = ws / "run.sh"
    run.write_text("#!/bin/sh\necho ran\n")
    run.chmod(0o755)
    return ws


def warm(sb: Sandbox) -> Sandbox:
    """``sb`` with its commands forked by a session runner, started (skips where none can
    run)."""
    if not sb.keep_warm(wait=True):
        note = getattr(sb, "runner_note", "")
        sb.close()
        pytest.skip(f"no session runner here: {note}")
    return sb


@pytest.fixture(params=["bwrap", "bwrap-runner", "local"])
def backend(request: pytest.FixtureRequest) -> str:
    """A backend, and ``bwrap-runner``: bwrap with a session runner (``keep_warm``)."""
    if str(request.param).startswith("bwrap") and not usable()[0]:
        pytest.skip(f"bwrap unusable: {usable()[1]}")
    return str(request.param)


@pytest.fixture
def sandbox(workspace: Path, backend: str) -> Iterator[Sandbox]:
    with pytest.warns(RuntimeWarning) if backend == "local" else contextlib.nullcontext():
        sb = open_sandbox(workspace, backend=backend.removesuffix("-runner"),
                          limits=Limits(timeout_s=30))
    if backend.endswith("-runner"):
        warm(sb)
    try:
        yield sb
    finally:
        sb.close()
    assert leftover_groups() == []

