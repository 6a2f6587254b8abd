"""Snapshots are deterministic, round-trip exactly, and refuse unsafe archives."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from swemill.core.errors import ValidationError
from swemill.validate.snapshot import digest, pack_tree, unpack_tree


def _tree(root: Path) -> None:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("x = 1\n")
    (root / "README").write_text("hello\n")
    (root / "pkg" / "run.sh").write_text("#!/bin/sh\n")
    (root / "pkg" / "run.sh").chmod(0o755)


def test_round_trip_and_determinism(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _tree(a)
    _tree(b)
    (b / "pkg" / "a.py").touch()  # other mtime, same content
    data = pack_tree(a)
    assert digest(data) == digest(pack_tree(b))
    out = unpack_tree(data, tmp_path / "out")
    assert (out / "pkg" / "a.py").read_text() == "x = 1\n"
    assert (out / "pkg" / "run.sh").stat().st_mode & 0o111


def test_refuses_escaping_members(tmp_path: Path) -> None:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        info = tarfile.TarInfo("../evil.txt")
        info.size = 4
        tar.addfile(info, io.BytesIO(b"evil"))
    with pytest.raises(ValidationError):
        unpack_tree(raw.getvalue(), tmp_path / "out")
    assert not (tmp_path / "evil.txt").exists()


def test_an_unpacked_snapshot_gets_the_builds_products_but_keeps_its_own_files(
        tmp_path: Path) -> None:
    """A task's snapshot holds the repository's files; what the install wrote into its tree
    (a compiled extension, a ``_version.py``) is laid over it wherever it is unpacked (the
    audit, a rollout's workspace and its pristine copy), never over a tracked file."""
    import sys

    from swemill.repo.envbuild import RepoEnv
    from swemill.repo.recipe import Recipe
    from swemill.repo.sources import git
    from swemill.validate.snapshot import pack_tree, unpack_tree

    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "core.py").write_text("x = 1\n")
    git(["init", "-q"], repo)
    git(["add", "-A"], repo)
    git(["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "c"], repo)
    env_dir = tmp_path / "env"
    for rel, data in (("pkg/_speedups.so", b"\x7fELF"), ("pkg/_version.py", b"v = '1'\n"),
                      ("pkg/core.py", b"x = 'stale'\n")):
        (env_dir / "generated" / rel).parent.mkdir(parents=True, exist_ok=True)
        (env_dir / "generated" / rel).write_bytes(data)
    env = RepoEnv(key="k", path=env_dir, repo="repo", commit="c", source_path=repo,
                  recipe=Recipe(), python_version="3.11", base_prefix=Path(sys.base_prefix),
                  generated=["pkg/_speedups.so", "pkg/_version.py", "pkg/core.py"])
    tree = unpack_tree(pack_tree(repo), tmp_path / "ws")
    env.lay_generated(tree)
    assert (tree / "pkg" / "_speedups.so").read_bytes() == b"\x7fELF"
    assert (tree / "pkg" / "_version.py").read_text() == "v = '1'\n"
    assert (tree / "pkg" / "core.py").read_text() == "x = 1\n"  # tracked: the task's own
