"""``scrub_tree``: make a broken tree safe to show a policy.

A policy must never find the fix in what it is given. The fix hides in places that are easy to
forget: git history and reflogs (the base commit *is* the fixed tree), bytecode compiled from
the fixed sources, pytest and coverage caches, build outputs that copy the sources, and the
``.orig``/``.rej`` files that patch tools leave behind. Everything of that kind is removed and
the tree becomes one fresh commit with no parents.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from swemill.core.errors import ValidationError
from swemill.core.git import git

__all__ = ["scrub_tree", "LEAKY_DIRS", "LEAKY_SUFFIXES", "fresh_commit"]

LEAKY_DIRS = frozenset({
    ".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis",
    ".tox", ".nox", ".eggs", "htmlcov", ".cache", ".benchmarks",
})
TOP_LEVEL_LEAKY_DIRS = frozenset({"build", "dist"})
"""Only at the root: a package may well have a sub-package called ``build``."""
LEAKY_SUFFIXES = (".pyc", ".pyo", ".orig", ".rej", ".egg-info", ".dist-info")
LEAKY_FILES = frozenset({".coverage", "coverage.xml", "coverage.json", ".noseids"})


def _is_leaky(name: str, is_dir: bool, top: bool = False) -> bool:
    if is_dir and (name in LEAKY_DIRS or (top and name in TOP_LEVEL_LEAKY_DIRS)):
        return True
    if name in LEAKY_FILES or name.startswith(".coverage."):
        return True
    return name.endswith(LEAKY_SUFFIXES)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def fresh_commit(root: Path, message: str = "swemill task") -> str:
    """Make ``root`` a git repository with exactly one parentless commit; return its hash."""
    def run(*args: str) -> str:
        return git(args, root, error=ValidationError)

    run("init", "-q", "-b", "main")
    run("add", "-A", "-f", ".")
    run("commit", "-q", "--allow-empty", "--no-verify", "--no-gpg-sign", "-m", message)
    # The index caches each file's stat data (times, inode): rebuilt from the commit it holds
    # none, so the same tree packs to the same snapshot bytes on every run (git status
    # re-reads the files once and finds them clean).
    run("read-tree", "HEAD")
    return run("rev-parse", "HEAD")


def scrub_tree(root: Path, *, commit: bool = True) -> list[str]:
    """Remove everything in ``root`` that could reveal the fix; return the removed paths.

    With ``commit`` the tree ends as one fresh commit (no history, no reflog, no remotes).
    """
    removed: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root, topdown=True):
        base = Path(dirpath)
        top = base == root
        for name in list(dirnames):
            target = base / name
            if target.is_symlink():
                dirnames.remove(name)  # kept, never walked: it may point outside the tree
                continue
            if _is_leaky(name, True, top):
                removed.append(str(target.relative_to(root)))
                _remove(target)
                dirnames.remove(name)
        for name in filenames:
            if _is_leaky(name, False):
                target = base / name
                removed.append(str(target.relative_to(root)))
                _remove(target)
    if commit:
        fresh_commit(root)
    return sorted(removed)
