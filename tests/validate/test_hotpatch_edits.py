"""Hypothesis-generated body edits of real functions, of the bundled sample and of a PyPI
project (toolz 1.0.0): compiling only the edited def (``hotpatch.plan_edit``) plans exactly
the swaps compiling the whole edited module does (``hotpatch.plan``), or declines where that
refuses; and the statement lines the image hands a child for failure reports on the edited
file (``ReportCache.stand_in``) are the ones a whole parse gives."""

from __future__ import annotations

import ast
import types
from collections import Counter
from pathlib import Path

import pytest
from _pytest._code.source import _statement_linenos
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swemill.repo.sources import resolve_source
from swemill.validate.inside import hotpatch
from swemill.validate.inside.hotpatch import Unservable
from swemill.validate.inside.report_cache import ReportCache
from swemill.validate.inside.texts import report_text

pytestmark = pytest.mark.slow

_SWAP = {"+": "-", "-": "+", "*": "+", "==": "!=", "!=": "==", "<": "<=", "<=": "<",
         ">": ">=", ">=": ">", " and ": " or ", " or ": " and "}


def _functions(text: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Module-level functions and methods of module-level classes with a body to edit."""
    tree = ast.parse(text)
    found = []
    for node in tree.body:
        kids = node.body if isinstance(node, ast.ClassDef) else [node]
        found += [f for f in kids if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                  and f.body[-1].end_lineno and f.body[0].lineno > f.lineno]
    return found


def _edit(text: str, fn: ast.FunctionDef | ast.AsyncFunctionDef, data: st.DataObject) -> str:
    """One random edit inside ``fn``'s body: an operator swapped, a number changed, or a
    statement put before one of its statements (which moves everything below)."""
    lines = text.split("\n")
    first, last = fn.body[0].lineno, fn.body[-1].end_lineno or fn.body[0].lineno
    kind = data.draw(st.sampled_from(["operator", "number", "statement"]))
    if kind in ("operator", "number"):
        spots = [(i, op) for i in range(first - 1, last) for op in _SWAP if op in lines[i]] \
            if kind == "operator" else \
            [(i, d) for i in range(first - 1, last) for d in "0123456789" if d in lines[i]]
        if spots:
            i, old = data.draw(st.sampled_from(spots))
            new = _SWAP[old] if kind == "operator" else str((int(old) + 1) % 10)
            lines[i] = lines[i].replace(old, new, 1)
            return "\n".join(lines)
    statements = [s for s in fn.body if not isinstance(s, ast.Expr | ast.Pass)]
    target = data.draw(st.sampled_from(statements or fn.body))
    pad = " " * target.col_offset
    lines.insert(target.lineno - 1, f"{pad}_swemill_probe = {data.draw(st.integers(0, 99))}")
    return "\n".join(lines)


def _swaps(swaps: list[tuple[types.CodeType, types.CodeType]]) -> dict[int, tuple]:
    return {id(o): (n.co_firstlineno, n.co_code, bytes(getattr(n, "co_linetable", b"")))
            for o, n in swaps if o.co_flags & 0x0001}


def _check(path: Path, data: st.DataObject, cache: ReportCache, seen: Counter[str]) -> None:
    head = report_text(path.read_text())
    fn = data.draw(st.sampled_from(_functions(head)), label="function")
    new = _edit(head, fn, data)
    code = compile(head, str(path), "exec", dont_inherit=True)
    fast = hotpatch.plan_edit(code, ast.parse(head), head, new, str(path), set())
    try:
        full = hotpatch.plan(code, compile(new, str(path), "exec", dont_inherit=True), set())
    except (Unservable, SyntaxError):
        assert fast is None
        seen["refused"] += 1
        return
    if fast is not None:
        assert _swaps(fast) == _swaps(full)
        # an operator or digit drawn inside a comment or a string changes no code: nothing to
        # swap either way (toolz 1.0.0's sandbox/core.py, ' and ' in a comment)
        seen["planned" if _swaps(full) else "no code change"] += 1
    tree = cache.stand_in(head, new)
    if tree is not None:
        assert tree._pytest_statement_linenos == _statement_linenos(ast.parse(new))
        seen["lines"] += 1


def _modules(spec: str) -> list[Path]:
    """The project's own modules with functions to edit (no tests, no build helpers)."""
    root = resolve_source(spec).path
    return sorted(p for p in root.glob("*/**/*.py")
                  if "test" not in p.name and "tests" not in p.parts and "docs" not in p.parts
                  and _functions(p.read_text()))


@pytest.mark.parametrize("spec", ["sample",
                                  pytest.param("pypi:toolz==1.0.0", marks=pytest.mark.network)])
def test_random_body_edits_of_real_functions(spec: str, shared_cache: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEMILL_CACHE", str(shared_cache))
    modules = _modules(spec)
    assert modules
    cache = ReportCache()
    cache.detect()
    seen: Counter[str] = Counter()

    @settings(max_examples=40, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.data())
    def check(data: st.DataObject) -> None:
        _check(data.draw(st.sampled_from(modules), label="module"), data, cache, seen)

    check()
    # most random body edits are planned from the one def and get their report lines
    assert seen["planned"] >= 20 and seen["lines"] >= 20, seen
