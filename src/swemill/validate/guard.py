"""The last check before a row is kept: what a policy was shown must not contain the fix.

Tasks are built so that nothing from ``golden/`` reaches a policy, but a corpus row also
carries whatever a harness or an imported log put in front of the agent. This guard looks at
the prompt part of a row (system messages and the task message) for golden-only material:

* lines the golden patch adds (the fixed code) that the golden patch does not also show as
  context or removed lines (those are in the broken tree, which the policy may read);
* the definition line (``def name`` / ``class name``) of every deleted symbol.

Bare names of deleted symbols are not checked: the failing tests call them, so a problem
statement may rightly name them. Lines shorter than ``min_chars`` (``return x``, ``}``) are
too common to mean anything. Code the agent wrote itself in its own turns is never checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from swemill.core.records import Golden
from swemill.synth.patches import parse_patch

__all__ = ["GoldenGuard", "golden_lines"]


def _hunk_lines(patch: str) -> dict[str, set[str]]:
    """A unified diff's stripped hunk lines by sign: ``+`` added, ``-`` removed, ``" "``
    context."""
    out: dict[str, set[str]] = {"+": set(), "-": set(), " ": set()}
    for fp in parse_patch(patch):
        for line in (ln for h in fp.hunks for ln in h.lines):
            out.get(line[:1], set()).add(line[1:].strip())
    return out


def golden_lines(golden: Golden, min_chars: int = 12) -> set[str]:
    """Golden-only lines: added by the fix, absent from its context/removed lines."""
    fix, bug = _hunk_lines(golden.golden_patch), _hunk_lines(golden.bug_patch)
    # The bug patch removes exactly what the fix brings back.
    added = fix["+"] | bug["-"]
    seen = fix[" "] | fix["-"] | bug[" "] | bug["+"]
    return {ln for ln in added - seen if len(ln) >= min_chars}


@dataclass(frozen=True, slots=True)
class GoldenGuard:
    """Finds golden-only material in a text; one per task."""

    lines: frozenset[str]
    definitions: tuple[re.Pattern[str], ...]

    @classmethod
    def of(cls, golden: Golden, min_chars: int = 12) -> GoldenGuard:
        names = [s.rpartition(".")[2].rpartition("::")[2] for s in golden.deleted_symbols]
        defs = tuple(
            re.compile(rf"\b(?:async\s+def|def|class)\s+{re.escape(n)}\b") for n in names if n
        )
        return cls(frozenset(golden_lines(golden, min_chars)), defs)

    def leaks(self, text: str) -> list[str]:
        """The golden-only pieces found in ``text`` (empty when clean)."""
        found = [ln for ln in self.lines if ln in text]
        found += [p.pattern for p in self.definitions if p.search(text)]
        return found

    def leaks_in(self, texts: Iterable[str]) -> list[str]:
        return [leak for t in texts for leak in self.leaks(t)]
