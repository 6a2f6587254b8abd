"""Host-side view of a task workspace: what changed against the pristine snapshot.

It works on real directories without ever following a symbolic link, because the policy may
have planted links that point outside its workspace (``tests -> /etc``): a walk does not
descend into them, and a comparison reads the link target rather than the file behind it.
Bytecode caches (``__pycache__``) are part of the view: swemill's runs write none
(``PYTHONDONTWRITEBYTECODE``), and the monitor must see one put there on purpose. A suite's
own tests may write plain interpreter caches (multidict 6.1.0 runs ``python -I``, which
ignores that setting, from ``test_circular_imports.py``); the monitor leaves those out at
submission. What the grader takes from this change set is :mod:`swemill.agent.carry`'s business.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Changes", "Entry", "entries_digest", "tree_changes", "tree_entries", "SKIP_DIRS"]

SKIP_DIRS = frozenset({".git", ".pytest_cache", ".ruff_cache", ".mypy_cache"})
"""Never compared: git's own data and tool caches that no test run reads."""
_MAX_DIFF_FILE = 2_000_000
_MAX_DIFF_TEXT = 4_000_000


def _digest(path: Path) -> bytes:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.digest()


Entry = tuple[str, bytes]
"""``(kind, payload)``: ``("file", sha256)`` or ``("link", target)``."""


def tree_entries(root: Path) -> dict[str, Entry]:
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


def entries_digest(entries: dict[str, Entry]) -> str:
    """One SHA-256 of a tree's :func:`tree_entries` (paths, kinds, contents, link targets):
    equal digests, the same tree as the grader sees it."""
    h = hashlib.sha256()
    for rel in sorted(entries):
        kind, payload = entries[rel]
        h.update(b"%d:%s\0%s\0%d:" % (len(rel.encode()), rel.encode(), kind.encode(), len(payload)))
        h.update(payload)
    return h.hexdigest()


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
    old, new = tree_entries(before), tree_entries(after)
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
