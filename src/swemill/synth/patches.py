"""Unified-diff helpers: write, reverse, split, check and apply patches.

Every patch swemill writes must round-trip through ``git apply``: paths are ``a/<rel>`` and
``b/<rel>`` relative to the repository root, and a last line without a newline carries git's
``\\ No newline at end of file`` marker.
"""

from __future__ import annotations

import difflib
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from unidiff import PatchedFile, PatchSet
from unidiff.errors import UnidiffParseError

from swemill.core.errors import SynthesisError
from swemill.core.git import run_git

__all__ = [
    "FilePatch",
    "Hunk",
    "apply_patch",
    "check_patch",
    "file_diff",
    "join_patches",
    "parse_patch",
    "patch_files",
    "reverse_patch",
    "split_lines",
]

_NO_NEWLINE = "\\ No newline at end of file"


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split at ``\\n`` only: git treats ``\\r``, form feeds and
    other separators ``str.splitlines`` honours as ordinary characters inside a line."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    return out + [parts[-1]] if parts[-1] else out


def _diff_lines(lines: list[str]) -> list[str]:
    """Terminate every diff line; a line that had no newline gets git's marker after it."""
    out: list[str] = []
    for line in lines:
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n")
            out.append(_NO_NEWLINE + "\n")
    return out


def file_diff(relpath: str, before: str, after: str, context: int = 3) -> str:
    """A git-style unified diff of one file, ``before`` -> ``after``; "" when they are equal."""
    if before == after:
        return ""
    a, b = split_lines(before), split_lines(after)
    out = [f"diff --git a/{relpath} b/{relpath}\n", f"--- a/{relpath}\n", f"+++ b/{relpath}\n"]
    for group in _grouped_ops(a, b, context):
        out += _hunk_text(a, b, group, context)
    return "".join(out)


def _grouped_ops(a: list[str], b: list[str], context: int) -> list[list[tuple[int, ...]]]:
    """Change opcodes in whole-file line numbers, grouped into hunks.

    A mutant changes a few lines of a long file, so only the stretch between the common
    prefix and suffix is matched (difflib is slow on long inputs); and building hunks over
    the whole file keeps every hunk's context real, so git never reads a hunk as anchored
    to the end of the file.
    """
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    sm = difflib.SequenceMatcher(None, a[head : len(a) - tail], b[head : len(b) - tail],
                                 autojunk=False)
    ops = [(i1 + head, i2 + head, j1 + head, j2 + head)
           for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag != "equal"]
    groups: list[list[tuple[int, ...]]] = []
    for op in ops:
        if groups and op[0] - groups[-1][-1][1] <= 2 * context:
            groups[-1].append(op)
        else:
            groups.append([op])
    return groups


def _hunk_text(a: list[str], b: list[str], ops: list[tuple[int, ...]], context: int) -> list[str]:
    start_a = max(ops[0][0] - context, 0)
    start_b = ops[0][2] - (ops[0][0] - start_a)
    end_a = min(ops[-1][1] + context, len(a))
    lines = [" " + ln for ln in a[start_a : ops[0][0]]]
    for k, (i1, i2, j1, j2) in enumerate(ops):
        lines += ["-" + ln for ln in a[i1:i2]] + ["+" + ln for ln in b[j1:j2]]
        stop = ops[k + 1][0] if k + 1 < len(ops) else end_a
        lines += [" " + ln for ln in a[i2:stop]]
    old_len = end_a - start_a
    new_len = sum(1 for ln in lines if ln[0] in " +")
    # An empty side is written "k,0": k is the line it comes after.
    old = f"{start_a + (1 if old_len else 0)},{old_len}"
    new = f"{start_b + (1 if new_len else 0)},{new_len}"
    return [f"@@ -{old} +{new} @@\n", *_diff_lines(lines)]


@dataclass(slots=True)
class Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    section: str
    lines: list[str] = field(default_factory=list)
    """Body lines with their ``' '``/``'-'``/``'+'``/``'\\'`` prefix and newline."""


@dataclass(slots=True)
class FilePatch:
    """One file's part of a patch: the header lines as written, and its hunks."""

    old_path: str | None
    new_path: str | None
    header: list[str] = field(default_factory=list)
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""


def _strip_prefix(raw: str) -> str | None:
    if raw == "/dev/null":
        return None
    return raw[2:] if raw[:2] in ("a/", "b/") else raw


def _header(f: PatchedFile) -> list[str]:
    """The file's header lines as written: git's extended header (from ``diff --git``: modes,
    index, renames), then ``---``/``+++`` where the diff has them. Lines before a plain
    diff's ``---`` (a mail's preamble, a stat) are not the file's."""
    info = list(f.patch_info or [])
    out = info if info and info[0].startswith("diff --git ") else []
    if f.source_file and (f or not out):  # a hunkless git header (rename, mode) has none
        out.append(f"--- {_stamped(f.source_file, f.source_timestamp)}\n")
        out.append(f"+++ {_stamped(f.target_file, f.target_timestamp)}\n")
    return out


def _stamped(path: str, stamp: str | None) -> str:
    return f"{path}\t{stamp}" if stamp else path


def parse_patch(patch: str) -> list[FilePatch]:
    """Split a unified diff into files and hunks (``unidiff``); raises SynthesisError on a
    malformed one."""
    try:
        files = PatchSet(patch)
    except UnidiffParseError as exc:
        raise SynthesisError(f"malformed patch: {exc}") from exc
    out = []
    for f in files:
        git_paths = _git_header_paths(f.patch_info[0]) if f.patch_info else (None, None)
        fp = FilePatch(_strip_prefix(f.source_file) if f else git_paths[0],
                       _strip_prefix(f.target_file) if f else git_paths[1], _header(f))
        for h in f:
            fp.hunks.append(Hunk(h.source_start, h.source_length, h.target_start,
                                 h.target_length, f" {h.section_header}" if h.section_header
                                 else "", [str(line) for line in h]))
        out.append(fp)
    return out


def _git_header_paths(line: str) -> tuple[str | None, str | None]:
    if not line.startswith("diff --git a/"):
        return None, None
    a, sep, b = line.rstrip("\n")[len("diff --git a/") :].partition(" b/")
    return (a, b) if sep else (None, None)


def patch_files(patch: str) -> list[str]:
    """The repository-relative paths a patch touches, in order."""
    return [fp.path for fp in parse_patch(patch)]


def _reverse_header(header: list[str]) -> list[str]:
    swaps = {"--- ": "+++ ", "+++ ": "--- ", "new file": "deleted file", "deleted file": "new file"}
    out = []
    for line in header:
        if line.startswith("diff --git "):
            parts = line.rstrip("\n")[len("diff --git ") :].split(" b/", 1)
            if len(parts) == 2:
                line = f"diff --git a/{parts[1]} b/{parts[0][2:]}\n"
        elif line.startswith("index "):
            ids, _, mode = line.rstrip("\n")[6:].partition(" ")
            old, _, new = ids.partition("..")
            line = f"index {new}..{old}{' ' + mode if mode else ''}\n"
        else:
            for src, dst in swaps.items():
                if line.startswith(src):
                    line = dst + line[len(src) :]
                    if src in ("--- ", "+++ "):
                        line = line[:4] + _swap_ab(line[4:])
                    break
        out.append(line)
    # git wants --- before +++; swapping the prefixes reversed their order.
    minus = [i for i, ln in enumerate(out) if ln.startswith("--- ")]
    plus = [i for i, ln in enumerate(out) if ln.startswith("+++ ")]
    if minus and plus and plus[0] < minus[0]:
        out[plus[0]], out[minus[0]] = out[minus[0]], out[plus[0]]
    return out


def _swap_ab(path: str) -> str:
    if path.startswith("a/"):
        return "b/" + path[2:]
    if path.startswith("b/"):
        return "a/" + path[2:]
    return path


def _reverse_hunk(h: Hunk) -> list[str]:
    body: list[str] = []
    for i, line in enumerate(h.lines):
        if line.startswith("\\"):
            continue  # re-attached below to whichever line it followed
        tag = {"-": "+", "+": "-"}.get(line[0], line[0])
        body.append(tag + line[1:])
        if i + 1 < len(h.lines) and h.lines[i + 1].startswith("\\"):
            body.append(h.lines[i + 1])
    # Within each change block git lists removals before additions.
    out: list[str] = []
    i = 0
    while i < len(body):
        if body[i][0] in "+-":
            j = i
            while j < len(body) and (body[j][0] in "+-" or body[j].startswith("\\")):
                j += 1
            block = _group(body[i:j])
            out += [ln for tag, grp in block if tag == "-" for ln in grp]
            out += [ln for tag, grp in block if tag == "+" for ln in grp]
            i = j
        else:
            out.append(body[i])
            i += 1
    head = f"@@ -{h.new_start},{h.new_len} +{h.old_start},{h.old_len} @@{h.section}\n"
    return [head, *out]


def _group(lines: list[str]) -> list[tuple[str, list[str]]]:
    """Pair each diff line with the no-newline marker that follows it."""
    groups: list[tuple[str, list[str]]] = []
    for ln in lines:
        if ln.startswith("\\") and groups:
            groups[-1][1].append(ln)
        else:
            groups.append((ln[0], [ln]))
    return groups


def reverse_patch(patch: str) -> str:
    """The patch that undoes ``patch`` (broken -> base for a bug patch)."""
    out: list[str] = []
    for fp in parse_patch(patch):
        out += _reverse_header(fp.header)
        for h in fp.hunks:
            out += _reverse_hunk(h)
    return "".join(out)


def join_patches(patches: list[str]) -> str:
    return "".join(p if p.endswith("\n") or not p else p + "\n" for p in patches)


def _git_apply(root: Path, patch: str, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.NamedTemporaryFile("w", suffix=".diff", delete=False, encoding="utf-8") as fh:
        fh.write(patch)
        name = fh.name
    try:
        return run_git(["apply", "--whitespace=nowarn", *args, name], root)
    finally:
        os.unlink(name)


def check_patch(root: Path, patch: str, reverse: bool = False) -> str | None:
    """None when ``patch`` applies cleanly to the tree at ``root``; else git's reason."""
    if not patch.strip():
        return "empty patch"
    proc = _git_apply(root, patch, "--check", *(["-R"] if reverse else []))
    return None if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["?"])[0]


def apply_patch(root: Path, patch: str, reverse: bool = False) -> None:
    """Apply ``patch`` to the working tree at ``root``; SynthesisError with git's reason if not."""
    proc = _git_apply(root, patch, *(["-R"] if reverse else []))
    if proc.returncode != 0:
        raise SynthesisError(f"patch does not apply in {root}: {proc.stderr.strip()[:200]}")
