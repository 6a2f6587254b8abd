"""Which functions and tests a patch touches, found by line ranges in the changed file.

Used where a patch did not come from our own mutators (git history, imported rows, merged
bugs), so the changed symbols and the tests a change adds have to be read back from the text.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import PurePosixPath

from swemill.synth.patches import FilePatch

__all__ = ["Span", "changed_lines", "spans", "symbols_at", "test_ids_at"]

MODULE_LEVEL = "<module>"


@dataclass(frozen=True, slots=True)
class Span:
    qualname: str
    start: int
    end: int
    is_test: bool


def spans(source: str) -> list[Span]:
    """Module-level functions, classes and methods (nested functions fold into their owner)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    out: list[Span] = []

    def walk(body: list[ast.stmt], prefix: list[str]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                name = ".".join([*prefix, node.name])
                end = node.end_lineno or start
                out.append(Span(name, start, end, node.name.startswith("test")))
            elif isinstance(node, ast.ClassDef):
                walk(node.body, [*prefix, node.name])

    walk(tree.body, [])
    return out


def changed_lines(fp: FilePatch) -> set[int]:
    """Lines of the new side that a file patch adds, or next to which it removes lines."""
    lines: set[int] = set()
    for h in fp.hunks:
        new = h.new_start
        for line in h.lines:
            tag, blank = line[:1], not line[1:].strip()
            if tag == "+":
                if not blank:  # blank lines between definitions belong to no symbol
                    lines.add(new)
                new += 1
            elif tag == "-":
                if not blank:
                    lines.add(max(new, 1))
            elif tag == " ":
                new += 1
    return lines


def symbols_at(source: str, lines: set[int]) -> list[str]:
    """Qualified names of the functions covering ``lines``; ``<module>`` for lines outside."""
    found: set[str] = set()
    table = spans(source)
    for ln in lines:
        owners = [s for s in table if s.start <= ln <= s.end]
        found.add(owners[-1].qualname if owners else MODULE_LEVEL)
    return sorted(found)


def test_ids_at(path: str, source: str, lines: set[int] | None) -> list[str]:
    """pytest node ids of the test functions covering ``lines`` (all of them when None)."""
    ids = []
    for s in spans(source):
        if not s.is_test:
            continue
        if lines is not None and not any(s.start <= ln <= s.end for ln in lines):
            continue
        parts = s.qualname.split(".")
        if len(parts) > 1 and not parts[-2].startswith("Test"):
            continue  # a helper method of a non-test class: pytest would not collect it
        ids.append("::".join([PurePosixPath(path).as_posix(), *parts]))
    return sorted(ids)
