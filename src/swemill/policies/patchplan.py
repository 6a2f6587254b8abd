"""Turn a unified diff into the ordinary tool calls that make the same change.

Used by the oracle policies: each modified file becomes ``edit`` calls (one str_replace per
hunk, its old text widened with neighbouring lines until it occurs exactly once in the file as
it is at that moment), each new file a ``write``, each deleted file a ``bash rm``. When the
file's current content is unknown, the hunk's own text (context + removed lines) is used.
"""

from __future__ import annotations

import random
import shlex
from dataclasses import dataclass, field, replace
from typing import Literal

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from swemill.core.errors import PolicyError
from swemill.core.tools import ToolCall

__all__ = ["Hunk", "FileChange", "parse_patch", "apply_hunks", "edit_pairs", "file_calls",
           "perturb"]


@dataclass(frozen=True, slots=True)
class Hunk:
    old: tuple[str, ...]
    """Context and removed lines, with their line ends, in file order."""
    new: tuple[str, ...]
    """Context and added lines."""
    start: int
    """0-based line of ``old`` in the file before this patch."""


@dataclass(frozen=True, slots=True)
class FileChange:
    path: str
    kind: Literal["modify", "add", "delete", "rename"]
    hunks: tuple[Hunk, ...] = field(default_factory=tuple)
    source: str | None = None
    """The path before a rename."""


def _strip(path: str) -> str:
    return path[2:] if path.startswith(("a/", "b/")) else path


def _hunk(raw: object) -> Hunk:
    old: list[str] = []
    new: list[str] = []
    last: tuple[list[str], ...] = ()
    for line in raw:  # type: ignore[attr-defined]
        kind, value = line.line_type, line.value
        if kind == "\\":  # "\ No newline at end of file" refers to the line before it
            for target in last:
                target[-1] = target[-1].rstrip("\n")
            continue
        last = {" ": (old, new), "-": (old,), "+": (new,)}.get(kind, ())
        for target in last:
            target.append(value)
    # "-3,0" (nothing removed, no context) means "after line 3", not "at line 3".
    start = raw.source_start if not old else raw.source_start - 1  # type: ignore[attr-defined]
    start = max(0, start)
    return Hunk(tuple(old), tuple(new), start)


def parse_patch(patch: str) -> list[FileChange]:
    """The file changes of a unified diff (git or plain); binary changes are refused."""
    try:
        files = PatchSet(patch)
    except UnidiffParseError as exc:
        raise PolicyError(f"golden patch is not a unified diff: {exc}") from exc
    changes = []
    for f in files:
        if f.is_binary_file:
            raise PolicyError(f"golden patch changes binary file {f.path!r}; no tool can do that")
        hunks = tuple(_hunk(h) for h in f)
        if f.is_added_file:
            changes.append(FileChange(_strip(f.target_file), "add", hunks))
        elif f.is_removed_file:
            changes.append(FileChange(_strip(f.source_file), "delete", hunks))
        elif f.is_rename or _strip(f.source_file) != _strip(f.target_file):
            changes.append(FileChange(_strip(f.target_file), "rename", hunks,
                                      source=_strip(f.source_file)))
        else:
            changes.append(FileChange(f.path, "modify", hunks))
    if not changes:
        raise PolicyError("golden patch changes no files")
    return changes


def _find(lines: list[str], old: tuple[str, ...], expected: int) -> int | None:
    """Where ``old`` sits in ``lines``: the occurrence nearest the expected line."""
    n = len(old)
    if n == 0:
        return min(max(expected, 0), len(lines))
    hits = [i for i in range(len(lines) - n + 1) if tuple(lines[i:i + n]) == old]
    return min(hits, key=lambda i: abs(i - expected)) if hits else None


def _unique(text: str, needle: str) -> bool:
    first = text.find(needle)
    return first >= 0 and text.find(needle, first + 1) < 0


def edit_pairs(content: str | None, hunks: tuple[Hunk, ...]) -> list[tuple[str, str]]:
    """(old_str, new_str) per hunk, each unique in the file at the moment it is applied.
    Falls back to the bare hunk text if ``content`` is None or does not hold the hunks."""
    if content is None:
        return [("".join(h.old), "".join(h.new)) for h in hunks]
    lines = content.splitlines(keepends=True)
    pairs: list[tuple[str, str]] = []
    shift = 0
    for h in hunks:
        pos = _find(lines, h.old, h.start + shift)
        if pos is None:
            return pairs + edit_pairs(None, hunks[len(pairs):])
        a, b = pos, pos + len(h.old)
        text = "".join(lines)
        while (not "".join(lines[a:b]) or not _unique(text, "".join(lines[a:b]))) and (
            a > 0 or b < len(lines)
        ):
            a, b = max(0, a - 1), min(len(lines), b + 1)
        segment = lines[a:pos] + list(h.new) + lines[pos + len(h.old):b]
        pairs.append(("".join(lines[a:b]), "".join(segment)))
        lines[a:b] = segment
        shift += len(h.new) - len(h.old)
    return pairs


def apply_hunks(content: str, hunks: tuple[Hunk, ...]) -> str:
    """The file after ``hunks`` (used for renames, and by tests as a reference)."""
    for old, new in edit_pairs(content, hunks):
        if old:
            if old not in content:
                raise PolicyError("patch does not apply: a hunk's text is not in the file")
            content = content.replace(old, new, 1)
        else:
            content = new
    return content


def file_calls(change: FileChange, content: str | None) -> list[ToolCall]:
    """The tool calls that make one file change, given the file's current content if known."""
    if change.kind == "add":
        return [ToolCall("write", {"path": change.path,
                                   "content": "".join(x for h in change.hunks for x in h.new)})]
    if change.kind == "delete":
        return [ToolCall("bash", {"command": f"rm -f -- {shlex.quote(change.path)}"})]
    if change.kind == "rename":
        if content is None:
            raise PolicyError(f"cannot rename {change.source!r}: its content was not read")
        new = apply_hunks(content, change.hunks)
        rm = f"rm -f -- {shlex.quote(change.source or '')}"
        return [ToolCall("write", {"path": change.path, "content": new}),
                ToolCall("bash", {"command": rm})]
    calls = []
    for old, new in edit_pairs(content, change.hunks):
        if old:
            calls.append(ToolCall("edit", {"path": change.path, "old_str": old, "new_str": new}))
        else:  # an empty file: nothing to replace, so write it whole
            calls.append(ToolCall("write", {"path": change.path, "content": new}))
    return calls


def _is_code(line: str) -> bool:
    """Lines whose loss changes behaviour (not blank, not a comment, not a bare string)."""
    text = line.strip()
    return bool(text) and not text.startswith(("#", '"', "'"))


def _changed(h: Hunk) -> tuple[list[int], list[str]]:
    added = [i for i, line in enumerate(h.new) if line.strip() and line not in h.old]
    removed = [line for line in h.old if line.strip() and line not in h.new]
    return added, removed


def _drop_line(h: Hunk, rng: random.Random) -> Hunk:
    """A plausible near-miss of one hunk: lose one added line, or keep one removed line.
    Code lines are preferred, so that the near-miss is likely to fail the tests."""
    added, removed = _changed(h)
    added = [i for i in added if _is_code(h.new[i])] or added
    if added:
        i = rng.choice(added)
        return replace(h, new=h.new[:i] + h.new[i + 1:])
    removed = [line for line in removed if _is_code(line)] or removed
    if removed:
        return replace(h, new=(rng.choice(removed),) + h.new)
    return h


def _touches_code(change: FileChange, j: int) -> bool:
    if not change.hunks:
        return True
    added, removed = _changed(change.hunks[j])
    h = change.hunks[j]
    return any(_is_code(h.new[i]) for i in added) or any(_is_code(x) for x in removed)


def perturb(changes: list[FileChange], rng: random.Random) -> list[FileChange]:
    """A wrong version of the fix: with several hunks, one that changes code is left out;
    with one, it is changed by a line. The result always differs from the golden change."""
    units = [(i, j) for i, c in enumerate(changes) for j in range(len(c.hunks) or 1)]
    if len(units) >= 2:
        code_units = [(i, j) for i, j in units if _touches_code(changes[i], j)]
        fi, hj = rng.choice(code_units or units)
        change = changes[fi]
        if change.kind == "modify" and len(change.hunks) > 1:
            kept = change.hunks[:hj] + change.hunks[hj + 1:]
            return changes[:fi] + [replace(change, hunks=kept)] + changes[fi + 1:]
        return changes[:fi] + changes[fi + 1:]
    change = changes[0]
    if not change.hunks or change.kind in ("delete", "rename"):
        return []  # a single whole-file operation: doing nothing is the wrong fix
    hunk = _drop_line(change.hunks[0], rng)
    if hunk == change.hunks[0]:
        return []
    return [replace(change, hunks=(hunk,))]
