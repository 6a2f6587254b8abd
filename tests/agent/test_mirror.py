"""The exact copy a warm ``run_tests`` runs over (swemill.agent.mirror): everything copied as
it is, links as links; refused where a fork of the warm server could run it differently."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from swemill.agent.carry import build_grading_tree
from swemill.agent.mirror import NotMirrored, check_mirrorable, layout_difference, mirror_tree
from swemill.agent.tree import entries_digest, tree_entries

_SHADOWED = frozenset({"json", "pytest", "pluggy"})


def _tree(root: Path) -> dict[str, tuple[str, int, int, str | bytes]]:
    """rel -> (kind, mode, mtime_ns, content or link target), links never followed."""
    out: dict[str, tuple[str, int, int, str | bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            st = path.lstat()
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = ("link", 0, 0, os.readlink(path))
            elif path.is_dir():
                out[rel] = ("dir", st.st_mode, st.st_mtime_ns, "")
            else:
                out[rel] = ("file", st.st_mode, st.st_mtime_ns, path.read_bytes())
    return out


@pytest.fixture
def trees(tmp_path: Path) -> tuple[Path, Path, Path]:
    pristine, ws, dest = tmp_path / "pristine", tmp_path / "ws", tmp_path / "dest"
    for root in (pristine, ws):
        (root / "pkg").mkdir(parents=True)
        (root / "pkg" / "__init__.py").write_text("")
        (root / "pkg" / "json.py").write_text("X = 1\n")  # a submodule: never shadows
        (root / "tests").mkdir()
        (root / "tests" / "test_a.py").write_text("def test_a():\n    assert True\n")
    dest.mkdir()
    return pristine, ws, dest


def test_the_copy_is_exact_and_never_follows_a_link(trees: tuple[Path, Path, Path],
                                                    tmp_path: Path) -> None:
    pristine, ws, dest = trees
    (tmp_path / "outside").write_text("secret")
    (ws / "pkg" / "json.py").write_text("X = 2\n")  # edited inside a package: fine
    (ws / "tests" / "conftest.py").write_text("import pytest\n")
    (ws / "tests" / "out").symlink_to(tmp_path / "outside")
    (ws / "loop").symlink_to(ws)
    (ws / "run.sh").write_text("#!/bin/sh\n")
    (ws / "run.sh").chmod(0o751)
    (ws / "__pycache__").mkdir()
    (ws / "__pycache__" / "mod.cpython-312.pyc").write_bytes(b"\x00\x01")
    os.utime(ws / "tests" / "test_a.py", ns=(1_000_000_000, 1_234_567_890_123_456_789))
    (ws / "frozen").mkdir()
    (ws / "frozen" / "f.txt").write_text("f")
    (ws / "frozen").chmod(0o555)
    try:
        mirror_tree(ws, dest, pristine=pristine, shadowed=_SHADOWED)
        assert _tree(dest) == _tree(ws)
    finally:
        (ws / "frozen").chmod(0o755)
        if (dest / "frozen").exists():
            (dest / "frozen").chmod(0o755)
    assert os.readlink(dest / "tests" / "out") == str(tmp_path / "outside")


@pytest.mark.parametrize("rel", ["json.py", "tests/json.py", "pytest/__init__.py",
                                 "sitecustomize.py", "pluggy.cpython-312-x86_64-linux-gnu.so",
                                 "tests/json"])
def test_a_new_module_named_like_one_the_server_imported_is_refused(
        trees: tuple[Path, Path, Path], rel: str) -> None:
    pristine, ws, dest = trees
    (ws / rel).parent.mkdir(parents=True, exist_ok=True)
    if rel == "tests/json":
        (ws / rel).symlink_to("../pkg")  # a link to a package, under a shadowing name
    else:
        (ws / rel).write_text("raise ImportError('the workspace version')\n")
    with pytest.raises(NotMirrored, match="would shadow"):
        mirror_tree(ws, dest, pristine=pristine, shadowed=_SHADOWED)


def test_a_shadowing_name_left_as_in_the_snapshot_or_inside_a_package_is_copied(
        trees: tuple[Path, Path, Path]) -> None:
    pristine, ws, dest = trees
    for root in (pristine, ws):
        (root / "tests" / "json.py").write_text("A = 1\n")  # the snapshot's own
    (ws / "pkg" / "sub").mkdir()
    (ws / "pkg" / "sub" / "__init__.py").write_text("")
    (ws / "pkg" / "sub" / "pytest.py").write_text("B = 1\n")  # pkg.sub.pytest, not pytest
    mirror_tree(ws, dest, pristine=pristine, shadowed=_SHADOWED)
    assert (dest / "pkg" / "sub" / "pytest.py").read_text() == "B = 1\n"
    (ws / "tests" / "json.py").write_text("A = 2\n")  # now the policy's
    shutil.rmtree(dest)
    dest.mkdir()
    with pytest.raises(NotMirrored):
        mirror_tree(ws, dest, pristine=pristine, shadowed=_SHADOWED)


def test_a_fifo_or_an_oversized_tree_is_refused(trees: tuple[Path, Path, Path]) -> None:
    pristine, ws, dest = trees
    os.mkfifo(ws / "tests" / "pipe")
    with pytest.raises(NotMirrored, match="not a directory, a regular file or a link"):
        mirror_tree(ws, dest, pristine=pristine, shadowed=_SHADOWED)
    (ws / "tests" / "pipe").unlink()
    (ws / "big.bin").write_bytes(b"x" * 5000)
    shutil.rmtree(dest)
    dest.mkdir()
    with pytest.raises(NotMirrored, match="more than"):
        mirror_tree(ws, dest, pristine=pristine, shadowed=_SHADOWED, max_bytes=4096)

    check_mirrorable(ws, pristine=pristine, shadowed=_SHADOWED)  # what mirror_tree refuses...
    (ws / "json.py").write_text("raise ImportError\n")
    with pytest.raises(NotMirrored, match="would shadow the module 'json'"):
        check_mirrorable(ws, pristine=pristine, shadowed=_SHADOWED, max_bytes=1 << 20)
    assert not (dest / "json.py").exists()  # ...without copying anything


def _grading(pristine: Path, ws: Path, dest: Path) -> str | None:
    shutil.rmtree(dest)
    carried = build_grading_tree(pristine, ws, dest)
    assert not carried.dropped and carried.source == entries_digest(tree_entries(ws))
    return layout_difference(ws, dest)


@pytest.mark.parametrize(("change", "differs"), [
    (lambda ws: (ws / "pkg" / "mod.py").write_text("Y = 1\n"), None),  # carried as it is
    (lambda ws: (ws / "pkg" / "json.py").unlink(), None),  # a deletion is carried too
    (lambda ws: (ws / "pkg" / "json.py").chmod(0o755), "pkg/json.py"),  # a mode is not
    (lambda ws: (ws / "pkg" / "sub").mkdir(), "pkg/sub"),  # nor an empty folder
    (lambda ws: (ws / ".git" / "HEAD").write_text("ref: refs/heads/y\n"), ".git/HEAD"),
])
def test_a_grading_tree_is_the_workspace_only_when_nothing_a_run_sees_differs(
        trees: tuple[Path, Path, Path], change: object, differs: str | None) -> None:
    pristine, ws, dest = trees
    for root in (pristine, ws):
        (root / ".git").mkdir()
        (root / ".git" / "HEAD").write_text("ref: refs/heads/x\n")  # same size when changed
        os.utime(root / ".git" / "HEAD", ns=(1, 1))
    assert _grading(pristine, ws, dest) is None
    change(ws)  # type: ignore[operator]
    assert _grading(pristine, ws, dest) == differs


def test_entry_points_in_the_snapshot_never_match(trees: tuple[Path, Path, Path]) -> None:
    """A run with plugin autoloading (the policy's) would load them, a grading run not."""
    pristine, ws, dest = trees
    for root in (pristine, ws):
        (root / "x.dist-info").mkdir()
        (root / "x.dist-info" / "entry_points.txt").write_text("[pytest11]\nx = x\n")
    assert _grading(pristine, ws, dest) == "x.dist-info/entry_points.txt"
