"""The bundled sample repository: its size, its own test suite, and its git materialization."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from swemill.core.errors import SourceError
from swemill.repo.sample import materialize_sample, sample_files, sample_path
from swemill.repo.sample.history import HISTORY


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _pytest(repo: Path) -> tuple[int, str]:
    # Our own environment's plugins are not the sample's business, and loading them is slow.
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf"],
        cwd=repo, capture_output=True, text=True, timeout=120, env=env,
    )
    return proc.returncode, proc.stdout


def _count(summary: str, word: str) -> int:
    found = re.search(rf"(\d+) {word}", summary)
    return int(found.group(1)) if found else 0


def test_sample_path_holds_the_tree() -> None:
    root = sample_path()
    names = ("LICENSE", "README.md", "pyproject.toml", "inventory/items.py", "tests/conftest.py")
    for name in names:
        assert (root / name).is_file(), name


def test_sample_files_skip_build_debris() -> None:
    files = sample_files()
    assert "inventory/stock.py" in files
    assert not [p for p in files if "__pycache__" in p or p.endswith(".pyc")]


def test_sample_size_and_variety() -> None:
    modules = {p: ast.parse(t) for p, t in sample_files().items() if p.startswith("inventory/")}
    top = [node for tree in modules.values() for node in tree.body]
    top_functions = [n for n in top if isinstance(n, ast.FunctionDef)]
    classes = {n.name: n for n in top if isinstance(n, ast.ClassDef)}
    assert 15 <= len(top_functions) <= 25
    subclasses = [c for c in classes.values() if "Item" in {getattr(b, "id", "") for b in c.bases}]
    assert len(subclasses) >= 3
    base_methods = {n.name for n in classes["Item"].body if isinstance(n, ast.FunctionDef)}
    for sub in subclasses:  # every subclass overrides at least one method of the base
        assert base_methods & {n.name for n in sub.body if isinstance(n, ast.FunctionDef)}
    kinds = {type(node) for tree in modules.values() for node in ast.walk(tree)}
    assert {ast.For, ast.If, ast.With, ast.Try, ast.BinOp, ast.Compare, ast.JoinedStr} <= kinds
    constants = [
        n for n in top
        if isinstance(n, ast.Assign)
        and all(isinstance(t, ast.Name) and t.id.isupper() for t in n.targets)
    ]
    assert len(constants) >= 8


def test_sample_suite_passes_in_a_copy(tmp_path: Path) -> None:
    repo = materialize_sample(tmp_path / "inventory")
    code, out = _pytest(repo)
    assert code == 0, out[-2000:]
    assert _count(out, "passed") >= 60
    assert _count(out, "failed") == 0


def test_materialize_is_deterministic(tmp_path: Path) -> None:
    first = materialize_sample(tmp_path / "a")
    second = materialize_sample(tmp_path / "nested" / "b")
    assert _git(first, "rev-parse", "HEAD") == _git(second, "rev-parse", "HEAD")
    assert _git(first, "rev-list", "--count", "HEAD") == "1"
    assert _git(first, "status", "--porcelain") == ""
    assert (first / "LICENSE").read_text().startswith("MIT License")
    assert not list(tmp_path.glob(".*partial*"))


def test_materialize_refuses_a_non_empty_destination(tmp_path: Path) -> None:
    dest = tmp_path / "taken"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    with pytest.raises(SourceError, match="not empty"):
        materialize_sample(dest)
    assert (dest / "keep.txt").read_text() == "mine"


def test_materialize_into_an_empty_directory(tmp_path: Path) -> None:
    dest = tmp_path / "empty"
    dest.mkdir()
    assert (materialize_sample(dest) / "inventory" / "items.py").is_file()


def test_history_ends_at_the_shipped_tree(tmp_path: Path) -> None:
    flat = materialize_sample(tmp_path / "flat")
    hist = materialize_sample(tmp_path / "hist", history=True)
    assert _git(hist, "rev-parse", "HEAD^{tree}") == _git(flat, "rev-parse", "HEAD^{tree}")
    assert int(_git(hist, "rev-list", "--count", "HEAD")) == len(HISTORY) + 1
    again = materialize_sample(tmp_path / "again", history=True)
    assert _git(hist, "rev-parse", "HEAD") == _git(again, "rev-parse", "HEAD")
    subjects = _git(hist, "log", "--reverse", "--format=%s").splitlines()[1:]
    assert subjects == [change.message for change in HISTORY]


@pytest.mark.slow
def test_each_history_fix_is_shown_by_its_tests(tmp_path: Path) -> None:
    """Every state passes its suite; each fix reverted (its tests kept) fails its new tests."""
    hist = materialize_sample(tmp_path / "hist", history=True)
    commits = _git(hist, "rev-list", "--reverse", "HEAD").splitlines()
    fixes = 0
    for parent, commit in zip(commits, commits[1:], strict=False):
        _git(hist, "checkout", "-q", commit)
        code, out = _pytest(hist)
        assert code == 0, out[-2000:]
        changed = _git(hist, "diff", "--name-only", parent, commit).splitlines()
        source = [p for p in changed if p.startswith("inventory/")]
        if not source:
            continue
        fixes += 1
        _git(hist, "checkout", "-q", parent, "--", *source)
        code, out = _pytest(hist)
        added = _git(hist, "diff", parent, commit, "--", "tests").count("\n+def test_")
        assert code == 1 and _count(out, "failed") >= 1, out[-2000:]
        assert _count(out, "failed") <= added
        _git(hist, "checkout", "-q", commit, "--", *source)
    assert fixes == 5


def test_our_suite_does_not_collect_the_sample_tests() -> None:
    repo_root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         str(sample_path().parent)],
        cwd=repo_root, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 5, proc.stdout[-2000:]  # 5: no tests collected
