"""Turn per-test covered lines into the map ``"file.py::Qual.name" -> tests that execute it``.

A covered line belongs to the innermost function or method whose *body* holds it. ``def`` and
decorator lines run when a module is imported, not when a function is called, so they never
count; neither do module- or class-level lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

__all__ = ["function_spans", "build_coverage_map", "line_owner", "shared_functions"]


def function_spans(source: str) -> list[tuple[int, int, str]]:
    """``(first_body_line, last_line, qualname)`` of every function, nested ones included."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    spans: list[tuple[int, int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                qual = f"{prefix}{child.name}"
                end = child.end_lineno or child.body[-1].lineno
                spans.append((child.body[0].lineno, end, qual))
                visit(child, qual + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return spans


def line_owner(spans: list[tuple[int, int, str]]) -> dict[int, str]:
    """Line -> innermost function; wider spans are laid down first, inner ones overwrite."""
    owner: dict[int, str] = {}
    for start, end, qual in sorted(spans, key=lambda s: s[0] - s[1]):
        for line in range(start, end + 1):
            owner[line] = qual
    return owner


def build_coverage_map(per_file: dict[str, dict[str, list[int]]], root: Path
                       ) -> dict[str, list[str]]:
    """Map each function to the sorted node ids of the tests that executed a line of it."""
    out: dict[str, set[str]] = {}
    for rel, per_test in per_file.items():
        path = root / rel
        try:
            owner = line_owner(function_spans(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue
        for nodeid, lines in per_test.items():
            for qual in {owner[ln] for ln in lines if ln in owner}:
                out.setdefault(f"{rel}::{qual}", set()).add(nodeid)
    return {key: sorted(tests) for key, tests in sorted(out.items())}


def shared_functions(per_file: dict[str, list[int]], root: Path) -> list[str]:
    """``"file.py::Qual.name"`` of every function a line of which ran outside any one test
    (while modules were imported, tests collected, wider-scoped fixtures set up): what it
    computed may be used by any test, so no selection of tests can stand for the suite."""
    out: set[str] = set()
    for rel, lines in per_file.items():
        try:
            owner = line_owner(function_spans((root / rel).read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue
        out.update(f"{rel}::{owner[ln]}" for ln in lines if ln in owner)
    return sorted(out)
