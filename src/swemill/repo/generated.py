"""Files the project's install writes into its own tree (``_version.py`` of setuptools-scm or
hatch-vcs, in-place C extensions, ``version.txt`` hooks), carried into the test workspace.

Tests import the project from the workspace, not from the throw-away build copy, so a module
the build generated must be there too or every test that imports the package fails to
collect. After the install the build copy is compared with the working copy: each new regular
file (symlinks are never followed: the build ran code nobody here wrote) is kept under the
environment's ``generated/`` and placed into the working copy as an untracked file, never over
a file that is already there. The commit, and so every patch and export, stays the same.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["collect_generated", "place_generated"]

_SKIP_DIRS = {".git", "__pycache__", ".pytest_cache", ".eggs", "build", "dist", ".tox", ".nox"}
_MAX_FILES = 500
_MAX_BYTES = 64 << 20


def collect_generated(work: Path, src: Path, stash: Path) -> list[str]:
    """Copy files present in ``work`` and absent from ``src`` to ``stash``; their paths."""
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
            if os.path.lexists(src / rel):
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
    """Put the stashed ``files`` into the working copy ``src`` where they are missing."""
    for rel in files:
        dest = src / rel
        if os.path.lexists(dest) or not (stash / rel).is_file():
            continue
        if not dest.resolve().is_relative_to(src.resolve()):
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.swemill-tmp")
        shutil.copyfile(stash / rel, tmp)
        shutil.copymode(stash / rel, tmp)
        tmp.replace(dest)
