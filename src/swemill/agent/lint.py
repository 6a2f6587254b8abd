"""Lint findings a change introduced, counted with ruff on the host.

The repository's own environment may not have ruff, so both versions of every changed Python
file are copied out of the workspaces (regular files only, never through a link) and checked
here with ruff's default rules and no configuration from the repository (``--isolated``).
A finding is *introduced* when its rule fires more often in a file after the change than before.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from swemill.sandbox.leftovers import scratch_prefix

__all__ = ["ruff_path", "lint_introduced"]

_TIMEOUT_S = 60


def ruff_path() -> str | None:
    """ruff next to this interpreter (the dev venv), else on PATH, else None."""
    here = Path(sys.executable).with_name("ruff")
    return str(here) if here.is_file() else shutil.which("ruff")


def _copy_regular(src_root: Path, rel: str, dst_root: Path) -> bool:
    src = src_root / rel
    parent = src_root
    for part in Path(rel).parts[:-1]:
        parent = parent / part
        if parent.is_symlink() or not parent.is_dir():
            return False
    if src.is_symlink() or not src.is_file():
        return False
    dst = dst_root / rel
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    return True


def _findings(ruff: str, root: Path) -> Counter[tuple[str, str]]:
    proc = subprocess.run([ruff, "check", "--isolated", "--no-cache", "--exit-zero",
                           "--output-format", "json", "."], cwd=root, capture_output=True,
                          text=True, timeout=_TIMEOUT_S)
    rows = json.loads(proc.stdout or "[]")
    return Counter((Path(r["filename"]).resolve().relative_to(root.resolve()).as_posix(),
                    str(r.get("code"))) for r in rows)


def lint_introduced(before: Path, after: Path, paths: Iterable[str]) -> int | None:
    """Findings in ``after`` that ``before`` did not have, over the changed ``.py`` files.
    None when ruff is not installed or cannot run."""
    ruff = ruff_path()
    py = [p for p in paths if p.endswith(".py")]
    if ruff is None:
        return None
    if not py:
        return 0
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("lint")) as tmp:
        old_root, new_root = Path(tmp, "before"), Path(tmp, "after")
        old_root.mkdir()
        new_root.mkdir()
        for rel in py:
            _copy_regular(before, rel, old_root)
            _copy_regular(after, rel, new_root)
        try:
            old, new = _findings(ruff, old_root), _findings(ruff, new_root)
        except (OSError, subprocess.SubprocessError, ValueError, KeyError):
            return None
    return sum(max(0, n - old.get(key, 0)) for key, n in new.items())
