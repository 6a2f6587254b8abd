"""scrub_tree: nothing that could reveal the fix survives, and the tree is one fresh commit."""

from __future__ import annotations

import subprocess
from pathlib import Path

from swemill.validate.scrub import scrub_tree


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def _make_leaky_repo(root: Path) -> None:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("def f():\n    return 1\n")
    _git(root, "init", "-q")
    _git(root, "-c", "user.name=a", "-c", "user.email=a@b", "add", "-A")
    _git(root, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "fixed version")
    (root / "pkg" / "mod.py").write_text("def f():\n    return 2\n")  # the bug
    (root / "pkg" / "__pycache__").mkdir()
    (root / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"fixed bytecode")
    (root / "pkg" / "mod.py.orig").write_text("def f():\n    return 1\n")
    (root / ".pytest_cache").mkdir()
    (root / ".coverage").write_text("data")
    (root / "build" / "lib" / "pkg").mkdir(parents=True)
    (root / "build" / "lib" / "pkg" / "mod.py").write_text("def f():\n    return 1\n")
    (root / "pkg.egg-info").mkdir()


def test_scrub_removes_every_leak_and_leaves_one_parentless_commit(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    _make_leaky_repo(root)
    removed = scrub_tree(root)
    for leak in (".git", "pkg/__pycache__", "pkg/mod.py.orig", ".pytest_cache", ".coverage",
                 "build", "pkg.egg-info"):
        assert leak in removed
        assert not (root / leak).exists() or leak == ".git"
    # the broken source is kept, the fixed text appears nowhere in the tree's files
    assert (root / "pkg" / "mod.py").read_text() == "def f():\n    return 2\n"
    for path in root.rglob("*"):
        if path.is_file() and ".git" not in path.parts:
            assert b"return 1" not in path.read_bytes(), path
    # history: exactly one commit, no parents, no reflog entries beyond it, no remotes
    assert _git(root, "rev-list", "--all", "--count") == "1"
    assert _git(root, "log", "--format=%P") == ""
    assert _git(root, "remote") == ""
    objects = _git(root, "rev-list", "--all", "--objects")
    blobs = [line.split()[0] for line in objects.splitlines()]
    for blob in blobs:
        content = subprocess.run(["git", "-C", str(root), "cat-file", "-p", blob],
                                 capture_output=True).stdout
        assert b"return 1" not in content


def test_scrub_is_deterministic(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        _make_leaky_repo(root)
        scrub_tree(root)
    assert _git(a, "rev-parse", "HEAD") == _git(b, "rev-parse", "HEAD")


def test_scrubbed_trees_pack_to_the_same_snapshot_and_stay_clean(tmp_path: Path) -> None:
    """The git index caches stat data (inode, times): without it rebuilt, the same tree made
    twice packs to different snapshot bytes, and a resumed build's tasks differ."""
    from swemill.validate.snapshot import pack_tree, unpack_tree

    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        _make_leaky_repo(root)
        scrub_tree(root)
    assert pack_tree(a) == pack_tree(b)
    out = unpack_tree(pack_tree(a), tmp_path / "out")
    assert _git(out, "status", "--porcelain") == ""
