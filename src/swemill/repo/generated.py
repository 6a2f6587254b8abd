"""Files the project's install writes into its own tree (``_version.py`` of setuptools-scm or
hatch-vcs, in-place C extensions, ``version.txt`` hooks), carried into the test workspace.

Tests import the project from the workspace, not from the throw-away build copy, so a module
the build generated must be there too or every test that imports the package fails to
collect. The build copy holds the commit's tracked files only (:func:`copy_tracked`: no
stale ``_version.py`` or ``build/`` left in a user's directory), so after the install every
other regular file in it is the build's (symlinks are never followed: the build ran code
nobody here wrote). Those files are kept under the environment's ``generated/`` and placed
into the working copy as untracked files, never over a tracked one. The commit, and so every
patch and export, stays the same.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from swemill.repo.sources import git

__all__ = ["collect_generated", "copy_tracked", "place_generated", "tracked_files"]

_SKIP_DIRS = {".git", "__pycache__", ".pytest_cache", ".eggs", "build", "dist", ".tox", ".nox"}
_MAX_FILES = 500
_MAX_BYTES = 64 << 20


def tracked_files(src: Path) -> set[str]:
    """The paths git tracks in the working copy ``src``."""
    return {p for p in git(["ls-files", "-z"], src).split("\0") if p}


def copy_tracked(src: Path, dest: Path) -> set[str]:
    """Copy the tracked files of ``src`` (links as links) to ``dest``; returns their paths."""
    tracked = tracked_files(src)
    for rel in sorted(tracked):
        path = src / rel
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir() and not path.is_symlink():  # a submodule: its files as they are
            shutil.copytree(path, target, symlinks=True, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns(".git"))
        elif os.path.lexists(path):
            shutil.copy2(path, target, follow_symlinks=False)
    return tracked


def collect_generated(work: Path, tracked: set[str], stash: Path) -> list[str]:
    """Copy the files in ``work`` that git does not track to ``stash``; their paths."""
    found: list[str] = []
    total = 0
    for dirpath, dirnames, filenames in os.walk(work):
        dirnames[:] = sorted(d for d in dirnames
                             if d not in _SKIP_DIRS and not d.endswith(".egg-info"))
        for name in sorted(filenames):
            path = Path(dirpath, name)
            rel = path.relative_to(work)
            if name.endswith((".pyc", ".pyo")) or path.is_symlink() or not path.is_file():
                continue
            if rel.as_posix() in tracked:
                continue
            size = path.stat().st_size
            if len(found) >= _MAX_FILES or total + size > _MAX_BYTES:
                return found
            total += size
            (stash / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, stash / rel)
            shutil.copymode(path, stash / rel)
            found.append(rel.as_posix())
    return found


def place_generated(stash: Path, src: Path, files: list[str]) -> None:
    """Put the stashed ``files`` into the working copy ``src``, over untracked files only."""
    tracked = tracked_files(src) if files else set()
    for rel in files:
        dest = src / rel
        if rel in tracked or not (stash / rel).is_file():
            continue
        if dest.is_file() and not dest.is_symlink() and \
                dest.read_bytes() == (stash / rel).read_bytes():
            continue
        if not dest.resolve().is_relative_to(src.resolve()):
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.swemill-tmp")
        shutil.copyfile(stash / rel, tmp)
        shutil.copymode(stash / rel, tmp)
        tmp.replace(dest)
