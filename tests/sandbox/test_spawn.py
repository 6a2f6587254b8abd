"""spawn(): a long-lived process in the sandbox that the caller talks to over pipes."""

from __future__ import annotations

import time

import pytest

from swemill.core.errors import SandboxError
from swemill.sandbox.cgroups import leftover_groups
from swemill.sandbox.contract import Sandbox

from .conftest import processes_matching


def test_conversation_and_cleanup(sandbox: Sandbox) -> None:
    server = "while read line; do echo \"got $line in $(pwd)\"; done"
    sp = sandbox.spawn(server)  # type: ignore[attr-defined]
    try:
        assert sp.proc.stdin is not None and sp.proc.stdout is not None
        sp.proc.stdin.write(b"ping\n")
        sp.proc.stdin.flush()
        line = sp.proc.stdout.readline().decode()
        assert line.startswith("got ping in /")
        with pytest.raises(SandboxError):
            sandbox.fork()  # its workspace is in use
    finally:
        sp.close()
    assert sp.proc.returncode is not None
    with sandbox.fork() as child:  # allowed again once it is gone
        assert child.exec("true").ok


def test_close_ends_daemonised_children(sandbox: Sandbox) -> None:
    marker = "298.1357"
    sandbox.exec("true")  # a session runner (bwrap-runner) is up and keeps its group
    before = set(leftover_groups())
    sp = sandbox.spawn(f"setsid sleep {marker} & exec sleep 300")  # type: ignore[attr-defined]
    try:
        end = time.monotonic() + 5
        while not processes_matching(marker) and time.monotonic() < end:
            time.sleep(0.02)
        assert processes_matching(marker)
    finally:
        sp.close()
    end = time.monotonic() + 3
    while processes_matching(marker) and time.monotonic() < end:
        time.sleep(0.02)
    assert processes_matching(marker) == []
    assert set(leftover_groups()) == before
