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
