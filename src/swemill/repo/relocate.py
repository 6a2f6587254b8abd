"""Move a venv's development-mode install of a project to the fixed workspace path.

Build backends record where the project lives in a few places: a ``.pth`` file holding the
path (flit, hatchling, setuptools' compat mode), an ``__editable__*finder.py`` mapping import
names to paths (setuptools), and ``direct_url.json``. Rewriting the build copy's path to
``/workspace`` in exactly those files makes the venv import whatever workspace is mounted there.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

__all__ = ["relocate_editable"]


def _hook_files(site: Path) -> list[Path]:
    files = [*site.glob("*.pth"), *site.glob("__editable__*.py")]
    files += site.glob("*.dist-info/direct_url.json")
    return sorted(files)


def relocate_editable(venv: Path, build_dir: Path, workspace: str) -> list[str]:
    """Rewrite ``build_dir`` to ``workspace`` in the venv's import hooks.

    Returns the workspace-relative import roots the hooks now point at (``.``, ``src``...);
    an empty list means no development-mode install was found.
    """
    site = next(venv.glob("lib/python*/site-packages"))
    olds = {str(build_dir), os.path.realpath(build_dir)}
    roots: set[str] = set()
    for path in _hook_files(site):
        text = path.read_text()
        new = text
        for old in sorted(olds, key=len, reverse=True):
            new = new.replace(old, workspace)
        if new != text:
            path.write_text(new)
        roots |= _roots_in(path, new, workspace)
    return sorted(roots)


def _roots_in(path: Path, text: str, workspace: str) -> set[str]:
    ws = PurePosixPath(workspace)
    found: set[str] = set()
    if path.suffix == ".pth":
        for line in text.splitlines():
            line = line.strip()
            if line.startswith(workspace) and not line.startswith("import"):
                found.add(PurePosixPath(line).relative_to(ws).as_posix())
    elif path.name.startswith("__editable__"):
        # setuptools' finder maps each top-level name to its package dir or module file.
        for target in re.findall(r"['\"](" + re.escape(workspace) + r"[^'\"]*)['\"]", text):
            rel = PurePosixPath(target).relative_to(ws)
            found.add(rel.parent.as_posix() if rel.parts else ".")
    return found
