"""Does a problem statement give the fix away? Pure checks on text, no model, no I/O.

A statement (the template's or a model's) may say what the failing tests observe. It must
not point at the edit: a line of the bug or golden patch (whitespace normalised; lines
shorter than ``min_chars`` such as ``return x`` are too common to mean anything), an
identifier that only the changed lines contain (one the policy could not have read in the
broken file or in the failing tests' output), or a diff. :class:`LeakCheck` is built once per
task from its patches and what the policy may read, and lists the reasons a text leaks.
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Iterable
from dataclasses import dataclass

from swemill.synth.patches import parse_patch

__all__ = ["LeakCheck", "changed_lines", "code_names", "identifiers", "looks_like_diff",
           "unchanged_text"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DIFF_LINE = re.compile(r"^\s*(diff --git |@@ -\d|\+\+\+ [ab/]|--- [ab/]|index [0-9a-f]+\.\.)")
_PROSE = re.compile(r"""[rbuf]*("([^"\\]|\\.)*"|'([^'\\]|\\.)*')|#.*$""", re.IGNORECASE)
_COMMON = frozenset(keyword.kwlist).union(
    dir(builtins), dir(str), dir(dict), dir(list), dir(set), dir(int), {"self", "cls"})
"""Keywords, builtins and the methods of builtin types (``get``, ``items``, ``split``): too
common, in code and in English, to give an edit away."""


def _norm(line: str) -> str:
    return " ".join(line.split())


def identifiers(text: str, min_len: int = 3) -> set[str]:
    """The Python-like names in ``text``, but keywords, builtins and very short ones."""
    return {n for n in _IDENT.findall(text) if len(n) >= min_len and n not in _COMMON}


def code_names(line: str) -> set[str]:
    """:func:`identifiers` of a code line outside its string literals and comment: the
    English of a message (``"prefix must be three letters"``) names no code."""
    return identifiers(_PROSE.sub(" ", line))


def changed_lines(patch: str) -> tuple[list[str], list[str]]:
    """A unified diff's removed and added lines (without the sign), in order."""
    removed: list[str] = []
    added: list[str] = []
    for fp in parse_patch(patch):
        for line in (ln for h in fp.hunks for ln in h.lines):
            if line[:1] == "-":
                removed.append(line[1:])
            elif line[:1] == "+":
                added.append(line[1:])
    return removed, added


def unchanged_text(file_text: str, patch: str) -> str:
    """A file's lines minus those ``patch`` added or removed: what stays the same on both
    sides of the edit, so a name found here is no secret of the changed lines."""
    removed, added = changed_lines(patch)
    edited = {_norm(ln) for ln in removed + added}
    return "\n".join(ln for ln in file_text.splitlines() if _norm(ln) not in edited)


def looks_like_diff(text: str) -> bool:
    return any(_DIFF_LINE.match(ln) for ln in text.splitlines())


@dataclass(frozen=True, slots=True)
class LeakCheck:
    """What one task's statement must not contain."""

    lines: frozenset[str]
    """Normalised non-trivial lines of the bug and golden patches' changes."""
    names: frozenset[str]
    """Identifiers only the changed lines contain."""

    @classmethod
    def of(cls, bug_patch: str, golden_patch: str = "", known: Iterable[str] = (),
           min_chars: int = 12) -> LeakCheck:
        """``known``: texts the policy may read anyway (the unchanged lines of the edited
        files, the failing test ids and their messages); names in them are not secrets."""
        changed = [ln for patch in (bug_patch, golden_patch) if patch.strip()
                   for side in changed_lines(patch) for ln in side]
        lines = {_norm(ln) for ln in changed if len(_norm(ln)) >= min_chars}
        seen = set().union(*(identifiers(t, 1) for t in known))
        names = set().union(*(code_names(ln) for ln in changed)) - seen
        return cls(frozenset(lines), frozenset(names))

    def reasons(self, statement: str) -> list[str]:
        """Why ``statement`` leaks (empty when it does not)."""
        flat = _norm(statement)
        out = [f"quotes a changed line: {ln!r}" for ln in sorted(self.lines) if ln in flat]
        said = set(_IDENT.findall(statement))
        out += [f"names {n!r}, which only the changed lines contain"
                for n in sorted(self.names & said)]
        if looks_like_diff(statement):
            out.append("contains a diff")
        return out

    def ok(self, statement: str) -> bool:
        return not self.reasons(statement)
