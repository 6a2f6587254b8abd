"""Host-side views of a task workspace: what changed, and putting the tests back.

Both work on real directories without ever following a symbolic link, because the policy may
have planted links that point outside its workspace (``tests -> /etc``): a walk does not
descend into them, a comparison reads the link target rather than the file behind it, and a
restore removes a link before it writes where the link was.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

__all__ = ["Changes", "tree_changes", "is_graded_path", "restore_tests", "SKIP_DIRS"]

SKIP_DIRS = frozenset({".git", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache"})
_CONFIG_NAMES = frozenset({"pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", "conftest.py",
                           "sitecustomize.py", "usercustomize.py", "noxfile.py", ".coveragerc"})
_TEST_DIRS = frozenset({"tests", "test"})
_MAX_DIFF_FILE = 2_000_000
_MAX_DIFF_TEXT = 4_000_000


def is_graded_path(rel: str) -> bool:
    """Files the grader takes from the pristine snapshot, never from the policy's workspace:
    test modules, everything under ``tests/`` or ``test/``, pytest/tox/setup configuration,
    ``conftest.py``, ``sitecustomize``/``usercustomize`` and ``.pth`` files."""
    p = PurePosixPath(rel)
    name = p.name
    if name in _CONFIG_NAMES or name.endswith(".pth"):
        return True
    if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")):
        return True
    return any(part in _TEST_DIRS for part in p.parts[:-1])


def _digest(path: Path) -> bytes:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.digest()


def _entries(root: Path) -> dict[str, tuple[str, bytes]]:
    """``rel -> (kind, payload)``: files by content digest, links by target; never follows
    links. Memory stays small however many or large the files a policy wrote."""
    out: dict[str, tuple[str, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath)
        keep = []
        for d in dirnames:
            full = base / d
            if full.is_symlink():
                out[full.relative_to(root).as_posix()] = ("link", os.readlink(full).encode())
            elif d not in SKIP_DIRS and not d.startswith(".swemill-run-"):
                keep.append(d)
        dirnames[:] = keep
        for name in filenames:
            full = base / name
            rel = full.relative_to(root).as_posix()
            st = full.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(full).encode())
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", _digest(full))
    return out


@dataclass(slots=True)
class Changes:
    """The policy's change set against the pristine broken tree."""

    paths: list[str] = field(default_factory=list)
    added: dict[str, str] = field(default_factory=dict)
    """Per changed text file: its added lines, joined (what the hack monitor reads)."""
    diff: str = ""
    lines_added: int = 0
    lines_removed: int = 0

    @property
    def lines(self) -> int:
        return self.lines_added + self.lines_removed


def _text(root: Path, rel: str, entry: tuple[str, bytes] | None) -> list[str] | None:
    """The file's lines for a diff; None for links, binary and very large files."""
    if entry is None:
        return []
    path = root / rel  # found by a walk that entered no link, and itself a regular file
    if entry[0] != "file" or path.stat().st_size > _MAX_DIFF_FILE:
        return None
    data = path.read_bytes()
    if b"\x00" in data:
        return None
    return data.decode("utf-8", errors="replace").splitlines(keepends=True)


def tree_changes(before: Path, after: Path) -> Changes:
    """Compare two trees (``.git`` and caches left out) and describe the difference."""
    old, new = _entries(before), _entries(after)
    out = Changes()
    for rel in sorted(set(old) | set(new)):
        a, b = old.get(rel), new.get(rel)
        if a == b:
            continue
        out.paths.append(rel)
        a_lines, b_lines = _text(before, rel, a), _text(after, rel, b)
        if a_lines is None or b_lines is None or len(out.diff) > _MAX_DIFF_TEXT:
            out.diff += f"Binary, link or oversized change: {rel}\n"
            continue
        diff = list(difflib.unified_diff(a_lines, b_lines, f"a/{rel}", f"b/{rel}", n=3))
        added = [d[1:] for d in diff[2:] if d.startswith("+")]
        out.lines_added += len(added)
        out.lines_removed += sum(1 for d in diff[2:] if d.startswith("-"))
        out.added[rel] = "".join(added)
        out.diff += "".join(d if d.endswith("\n") else d + "\n\\ No newline at end of file\n"
                            for d in diff)
    return out


def _clear(path: Path) -> None:
    """Remove whatever sits at ``path`` (file, link or directory) without following links."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _safe_parent(root: Path, rel: str) -> Path:
    """The parent directory of ``rel`` under ``root`` with every component a real directory
    (links and files in the way are removed); returns the target path."""
    cur = root
    for part in PurePosixPath(rel).parts[:-1]:
        cur = cur / part
        if cur.is_symlink() or (cur.exists() and not cur.is_dir()):
            _clear(cur)
        if not cur.exists():
            cur.mkdir()
    return cur / PurePosixPath(rel).name


def restore_tests(root: Path, pristine: Path) -> list[str]:
    """Make every graded file under ``root`` exactly as in ``pristine``: restore changed or
    deleted ones, delete added ones. Returns the paths it touched, sorted."""
    want = {rel: e for rel, e in _entries(pristine).items() if is_graded_path(rel)}
    have = {rel: e for rel, e in _entries(root).items() if is_graded_path(rel)}
    touched = []
    for rel in sorted(set(have) - set(want)):
        _clear(root / rel)  # found by a walk that never entered a link: really under root
        touched.append(rel)
    for rel, entry in sorted(want.items()):
        if have.get(rel) == entry:
            continue
        target = _safe_parent(root, rel)
        if target.exists() or target.is_symlink():
            _clear(target)
        shutil.copy2(pristine / rel, target, follow_symlinks=False)
        touched.append(rel)
    return sorted(set(touched))
