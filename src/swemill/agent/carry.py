"""What the grader takes from the policy's workspace: the change to the source, nothing else.

The grading tree is built fresh: a copy of the pristine snapshot, minus any bytecode cache,
plus the policy's change *reduced* the way a model patch is applied to a clean checkout. A
changed path is carried only when all of these hold:

* its new state is a regular file of UTF-8 text (no NUL byte, at most 2 MB), or it was a file
  of the snapshot and is now gone (a deletion);
* it is not test code or test configuration (:func:`is_test_input`): test modules, anything
  under ``tests/``/``test/``/``testing/``, ``conftest.py``, pytest/tox/setup/pyproject
  configuration (``pytest.ini``, ``.pytest.ini``, ``pytest.toml``, ``tox.ini``,
  ``setup.cfg``, ``pyproject.toml``), ``sitecustomize``/``usercustomize`` and ``.pth`` files;
* no part of its path is hidden (``.name``), a bytecode cache (``__pycache__``, ``.pyc``)
  or package metadata (``*.dist-info``, ``*.egg-info``, ``*.egg-link``, ``entry_points.txt``);
* it is not a *new* top-level module or package that would shadow one the test process
  imports (``pytest.py``, ``_pytest/``, ``pluggy/``, a standard-library name, anything at the
  top of the environment's site-packages): ``python -m pytest`` puts the workspace root first
  on ``sys.path``;
* it is not part of the test runner's own code (``pluggy/``, ``src/_pytest/``, ...:
  :func:`~swemill.repo.runner_code.runner_top`), which the grader's machinery would run, nor
  a module the pristine ``conftest.py`` files load as a pytest plugin
  (:func:`~swemill.repo.runner_code.suite_plugin_files`), whose hooks every run calls.

Everything else keeps its pristine state, and is listed with the reason. Links are never
carried, never followed, and never written through: the tree is built from the pristine copy
and regular files only.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from swemill.agent.tree import Entry, entries_digest, tree_entries
from swemill.repo.runner_code import RUNNER_PACKAGES, runner_top, suite_plugin_files_of

__all__ = ["Carried", "build_grading_tree", "is_test_input", "runner_modules", "MAX_FILE_BYTES"]

MAX_FILE_BYTES = 2_000_000
_TEST_DIRS = frozenset({"tests", "test", "testing"})
_CONFIG_NAMES = frozenset({
    "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini", "setup.cfg",
    "pyproject.toml", "conftest.py", "sitecustomize.py", "usercustomize.py", "noxfile.py",
    ".coveragerc",
})
_CACHE_PARTS = frozenset({"__pycache__", ".pytest_cache"})
_META_SUFFIXES = (".dist-info", ".egg-info", ".egg-link")
_RUNNER = RUNNER_PACKAGES | {"_swemill_report"}


def is_test_input(rel: str) -> bool:
    """Files the grader always takes from the pristine snapshot: test modules, everything
    under a test directory, test configuration, interpreter start-up hooks."""
    p = PurePosixPath(rel)
    name = p.name
    if name in _CONFIG_NAMES or name.endswith(".pth"):
        return True
    if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")):
        return True
    return any(part in _TEST_DIRS for part in p.parts[:-1])


def runner_modules(site_packages: Iterable[Path] = ()) -> frozenset[str]:
    """Top-level names a new workspace module must not take: the test runner's own, the
    standard library's, and every module or package at the top of ``site_packages``."""
    names = set(_RUNNER) | set(sys.stdlib_module_names)
    for site in site_packages:
        for child in site.iterdir() if site.is_dir() else ():
            stem = child.name.split(".")[0] if child.is_file() else child.name
            if stem.isidentifier() and not child.name.endswith(_META_SUFFIXES):
                names.add(stem)
    return frozenset(names)


@dataclass(slots=True)
class Carried:
    """The reduced change: what went into the grading tree, and what did not, with why."""

    applied: list[str] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)
    source: str = ""
    """:func:`~swemill.agent.tree.entries_digest` of the workspace it was built from: the
    same digest, the same grading tree."""

    def describe(self) -> list[str]:
        return [f"{rel} ({why})" for rel, why in sorted(self.dropped.items())]


def _path_reason(rel: str) -> str | None:
    p = PurePosixPath(rel)
    if any(part in _CACHE_PARTS for part in p.parts) or p.suffix in (".pyc", ".pyo"):
        return "bytecode or cache"
    if any(part.endswith(_META_SUFFIXES) for part in p.parts) or p.name == "entry_points.txt":
        return "package metadata"
    if any(part.startswith(".") for part in p.parts):
        return "hidden path"
    if is_test_input(rel):
        return "test code or configuration"
    return None


def _shadows(rel: str, pristine: Path, shadowed: frozenset[str]) -> bool:
    top = PurePosixPath(rel).parts[0]
    name = top[:-3] if top.endswith(".py") else top
    return name in shadowed and not (pristine / top).exists()


def _content_reason(path: Path) -> tuple[str | None, bytes]:
    if path.stat().st_size > MAX_FILE_BYTES:
        return "larger than 2 MB", b""
    data = path.read_bytes()
    if b"\x00" in data:
        return "binary", b""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8 text", b""
    return None, data


def _copy_pristine(pristine: Path, dest: Path) -> None:
    shutil.copytree(pristine, dest, symlinks=True, dirs_exist_ok=True)  # dest: absent or empty
    for dirpath, dirnames, filenames in os.walk(dest):
        for d in [d for d in dirnames if d == "__pycache__"]:
            shutil.rmtree(Path(dirpath, d))
            dirnames.remove(d)
        for name in filenames:
            if name.endswith((".pyc", ".pyo")):
                Path(dirpath, name).unlink()


def _behind_link(root: Path, rel: str) -> bool:
    parts = PurePosixPath(rel).parts[:-1]
    return any(root.joinpath(*parts[:i]).is_symlink() for i in range(1, len(parts) + 1))


def _reason(rel: str, new: Entry | None, pristine: Path, workspace: Path,
            shadowed: frozenset[str], plugins: frozenset[str]) -> str | None:
    if (why := _path_reason(rel)) is not None:
        return why
    if new is None and _behind_link(workspace, rel):
        return "behind a symbolic link"
    if new is not None and new[0] != "file":
        return "symbolic link"
    if new is not None and _shadows(rel, pristine, shadowed):
        return "shadows a module the test run imports"
    if runner_top(rel) is not None:
        return "the test runner's own code"
    if rel in plugins:
        return "a pytest plugin the suite's conftest loads"
    return None


def _parent_is_real(dest: Path, rel: str) -> bool:
    """Every directory on the way to ``rel`` under ``dest`` is a real one (created if absent)."""
    cur = dest
    for part in PurePosixPath(rel).parts[:-1]:
        cur = cur / part
        if cur.is_symlink() or (cur.exists() and not cur.is_dir()):
            return False
        cur.mkdir(exist_ok=True)
    return True


def _is_real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def build_grading_tree(pristine: Path, workspace: Path, dest: Path, *,
                       shadowed: frozenset[str] = frozenset()) -> Carried:
    """Make ``dest`` (absent, or an empty directory) the pristine tree plus the carried part
    of the workspace's change."""
    _copy_pristine(pristine, dest)
    old, new = tree_entries(pristine), tree_entries(workspace)
    plugins = suite_plugin_files_of(pristine)
    out = Carried(source=entries_digest(new))
    for rel in sorted(set(old) | set(new)):
        before, after = old.get(rel), new.get(rel)
        if before == after:
            continue
        why = _reason(rel, after, pristine, workspace, shadowed, plugins)
        data = b""
        if why is None and after is not None:
            why, data = _content_reason(workspace / rel)  # a regular file, found by lstat
        if why is None and (not _parent_is_real(dest, rel) or _is_real_dir(dest / rel)):
            why = "a link, file or directory of the snapshot is in the way"
        if why is not None:
            out.dropped[rel] = why
            continue
        target = dest / rel
        if target.is_symlink() or target.exists():
            target.unlink()
        if after is not None:
            target.write_bytes(data)
            keep = before is not None and before[0] == "file"
            target.chmod((pristine / rel).stat().st_mode & 0o777 if keep else 0o644)
        out.applied.append(rel)
    return out
