"""The sandbox package's public names and backend selection."""

from __future__ import annotations

from pathlib import Path

import pytest

import swemill.sandbox as sandbox
from swemill.core.errors import SandboxError, SandboxUnavailable
from swemill.sandbox import Sandbox, open_sandbox

from .conftest import needs_bwrap


def test_all_is_pinned() -> None:
    assert sorted(sandbox.__all__) == ["Bind", "ExecResult", "Limits", "Sandbox", "WORKSPACE",
                                       "open_sandbox"]


@needs_bwrap
def test_auto_is_bwrap_and_satisfies_the_protocol(tmp_path: Path) -> None:
    with open_sandbox(tmp_path) as sb:
        assert type(sb).__name__ == "BwrapSandbox"
        assert isinstance(sb, Sandbox)
        with sb.fork() as child:
            assert isinstance(child, type(sb))


def test_local_warns_that_nothing_is_isolated(tmp_path: Path) -> None:
    with pytest.warns(RuntimeWarning, match="NOT isolated"), \
            open_sandbox(tmp_path, backend="local") as sb:
        assert isinstance(sb, Sandbox)
        assert sb.workdir == str(tmp_path)


def test_bad_choices_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable, match="unknown sandbox backend"):
        open_sandbox(tmp_path, backend="chroot")
    with pytest.raises(SandboxError, match="not a directory"):
        open_sandbox(tmp_path / "missing", backend="local")
