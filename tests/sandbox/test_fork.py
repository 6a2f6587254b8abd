"""fork(): copy-on-write snapshots whose writes never cross (real overlay mounts or copies)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from swemill.core.errors import SandboxError
from swemill.sandbox.contract import Sandbox
from swemill.sandbox.fork import overlay_usable


def _mounted(path: Path) -> bool:
    return any(line.split()[4] == str(path)
               for line in Path("/proc/self/mountinfo").read_text().splitlines())


def test_fork_sees_the_parent_and_writes_do_not_cross(sandbox: Sandbox, workspace: Path) -> None:
    with sandbox.fork() as child:
        assert child.read_file("README") == b"original\n"
        assert child.exec("cat pkg/mod.py").stdout == "VALUE = 1\n"
        child.write_file("README", "child\n")
        assert child.exec("echo 2 >> pkg/mod.py && rm run.sh && echo new > added").ok
        assert child.read_file("README") == b"child\n"
        assert child.exec("cat pkg/mod.py; ls").stdout.splitlines() == [
            "VALUE = 1", "2", "README", "added", "pkg"]
        # the parent and its host directory are untouched
        assert (workspace / "README").read_text() == "original\n"
        assert (workspace / "pkg" / "mod.py").read_text() == "VALUE = 1\n"
        assert (workspace / "run.sh").exists() and not (workspace / "added").exists()
        # and the parent's own later writes do not reach the child
        sandbox.write_file("README", "parent\n")
        assert sandbox.exec("echo p > parent_only").ok
        assert child.read_file("README") == b"child\n"
        assert child.exec("test -e parent_only").exit_code == 1


def test_sibling_forks_are_isolated(sandbox: Sandbox) -> None:
    a, b = sandbox.fork(), sandbox.fork()
    try:
        a.write_file("pkg/mod.py", "VALUE = 'a'\n")
        assert b.exec("echo 'VALUE = \"b\"' > pkg/mod.py").ok
        assert a.read_file("pkg/mod.py") == b"VALUE = 'a'\n"
        assert b.read_file("pkg/mod.py") == b'VALUE = "b"\n'
        assert sandbox.read_file("pkg/mod.py") == b"VALUE = 1\n"
        assert a.workspace != b.workspace != sandbox.workspace
    finally:
        a.close()
        b.close()


def test_nested_forks_keep_each_level_apart(sandbox: Sandbox) -> None:
    f1 = sandbox.fork()
    f1.write_file("level", "1")
    f2 = f1.fork()
    f2.write_file("level", "2")
    f1.write_file("README", "f1 after fork\n")
    f3 = f2.fork()
    assert f3.exec("rm README").ok
    try:
        assert [f.read_file("level") for f in (f1, f2, f3)] == [b"1", b"2", b"2"]
        assert f2.read_file("README") == b"original\n"
        assert f1.read_file("README") == b"f1 after fork\n"
        with pytest.raises(FileNotFoundError):
            f3.read_file("README")
        with pytest.raises(FileNotFoundError):
            sandbox.read_file("level")
    finally:
        for f in (f3, f2, f1):
            f.close()
    assert sandbox.read_file("README") == b"original\n"


def test_in_place_writes_to_original_files_stay_private(sandbox: Sandbox,
                                                       workspace: Path) -> None:
    """No hard links: appending to a file that existed in the original changes one copy only."""
    with sandbox.fork() as child:
        host = child.workspace / "pkg" / "mod.py"
        with open(host, "a") as fh:  # host-side, in place, through the fork's own path
            fh.write("# child\n")
        assert (workspace / "pkg" / "mod.py").read_text() == "VALUE = 1\n"
        with sandbox.fork() as sibling:
            assert sibling.read_file("pkg/mod.py") == b"VALUE = 1\n"
    assert os.stat(workspace / "pkg" / "mod.py").st_nlink == 1


def test_closing_a_fork_deletes_its_copy(sandbox: Sandbox) -> None:
    child = sandbox.fork()
    child.write_file("big.bin", os.urandom(1 << 16))
    path = child.workspace
    assert path.is_dir() and (path / "big.bin").exists()
    child.close()
    assert not path.exists()
    assert not _mounted(path)
    with pytest.raises(SandboxError):
        child.read_file("README")


def test_forks_of_a_closed_parent_keep_working(sandbox: Sandbox) -> None:
    child = sandbox.fork()
    sandbox.close()
    try:
        assert child.read_file("README") == b"original\n"
        assert child.exec("cat README").stdout == "original\n"
    finally:
        child.close()


@pytest.mark.skipif(not overlay_usable(), reason="overlay forks need root and overlayfs")
def test_overlay_store_is_removed_with_the_last_tree(sandbox: Sandbox) -> None:
    child = sandbox.fork()
    store = child.workspace.parent
    grandchild = child.fork()
    assert store.name.startswith(f"swm-{os.getpid()}-")
    child.close()
    grandchild.close()
    sandbox.close()
    assert not store.exists()


def test_fork_of_a_busy_view_snapshots_it(sandbox: Sandbox) -> None:
    """A host process holding a file open in a fork keeps it mounted; forking still works."""
    with sandbox.fork() as child:
        child.write_file("state", "before")
        with open(child.workspace / "state", "rb"):
            grandchild = child.fork()
        try:
            child.write_file("state", "child later")
            assert grandchild.read_file("state") == b"before"
            grandchild.write_file("state", "grandchild")
            assert child.read_file("state") == b"child later"
        finally:
            grandchild.close()


def test_a_later_fork_sees_what_the_parent_wrote_since(sandbox: Sandbox) -> None:
    """The parent's snapshot is reused only while the parent is unchanged."""
    first = sandbox.fork()
    assert sandbox.exec("echo v2 > README").ok
    second = sandbox.fork()
    sandbox.write_file("pkg/mod.py", "VALUE = 3\n")
    third = sandbox.fork()
    try:
        assert first.read_file("README") == b"original\n"
        assert second.read_file("README") == b"v2\n"
        assert second.read_file("pkg/mod.py") == b"VALUE = 1\n"
        assert third.read_file("pkg/mod.py") == b"VALUE = 3\n"
    finally:
        for f in (first, second, third):
            f.close()
