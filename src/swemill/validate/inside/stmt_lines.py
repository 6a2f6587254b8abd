"""Statement line numbers of a parsed module, worked out once per tree, for pytest < 9.

To show the statement a traceback entry points into, pytest finds the statement lines
around it: pytest < 9 walks the whole module's tree for every entry of every failure report
(``_pytest._code.source.get_statement_startend2``), pytest 9 once per tree (memoized on the
tree as ``_pytest_statement_linenos``). On a long test module the walks were most of a broken
run's cost: wrapt 1.16.0 (pytest 8.4) spent about 1 CPU s formatting the 8 to 55 failures of
one whole-suite run of a broken tree that ran 0.4 s outcomes-only. :func:`startend` gives
the same answer from the lines of the tree memoized the way pytest 9 memoizes them; the
report cache puts it in pytest's place only where it agrees with pytest's own function on
every line of :data:`PROBE` (:func:`agrees`), so another pytest's rules leave pytest as it is.
"""

from __future__ import annotations

import ast
import bisect
from collections.abc import Callable
from typing import Any

PROBE = '''"""Every kind of statement line pytest counts."""
import os


@staticmethod
@property
def decorated(a):
    if a:
        return 1
    elif a is None:
        return 2
    else:
        return 3


class Box(object):
    size = 2

    async def run(self):
        async for x in self:
            pass
        else:
            await x
        async with self as y:
            return y

    def loops(self, n):
        for i in range(n):
            continue
        else:
            pass
        while n:
            n -= 1
        else:
            n = 0
        try:
            x = [z
                 for z in range(n)]
        except ValueError as exc:
            raise RuntimeError() from exc
        except Exception:
            pass
        else:
            x = 1
        finally:
            del x
        with open(os.devnull) as fh:
            fh.read()
        return lambda: (
            n)


try:
    import missing
finally:
    pass
'''
"""A module with every statement shape whose lines pytest treats specially (decorators,
``else``/``elif`` and ``finally`` blocks, handlers, multi-line statements)."""


def statement_linenos(node: ast.AST) -> list[int]:
    """The sorted 0-based lines that begin a statement below ``node``, as pytest counts
    them: every statement's and handler's first line, each decorator's, and the line just
    above the first statement of an ``else`` or ``finally`` block (where its keyword is);
    kept on the node, as pytest 9 keeps them, so a tree is walked once."""
    memo: list[int] | None = getattr(node, "_pytest_statement_linenos", None)
    if memo is not None:
        return memo
    lines: list[int] = []
    for sub in ast.walk(node):
        if not isinstance(sub, (ast.stmt, ast.ExceptHandler)):
            continue
        lines.append(sub.lineno - 1)
        if isinstance(sub, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            lines.extend(deco.lineno - 1 for deco in sub.decorator_list)
        for block in (getattr(sub, "finalbody", None), getattr(sub, "orelse", None)):
            if block:
                lines.append(block[0].lineno - 2)
    lines.sort()
    node._pytest_statement_linenos = lines  # type: ignore[attr-defined]
    return lines


def startend(lineno: int, node: ast.AST) -> tuple[int, int | None]:
    """The statement lines around 0-based ``lineno``: the last one at or before it and the
    next one after it (None past the last), as ``get_statement_startend2`` answers."""
    lines = statement_linenos(node)
    at = bisect.bisect_right(lines, lineno)
    return lines[at - 1], lines[at] if at < len(lines) else None


def agrees(original: Callable[[int, Any], Any]) -> bool:
    """Does pytest's ``original(lineno, tree)`` answer as :func:`startend` on every line of
    :data:`PROBE` (and one past either end)?"""
    try:
        ours, theirs = ast.parse(PROBE), ast.parse(PROBE)
        return all(tuple(original(n, theirs)) == startend(n, ours)
                   for n in range(-1, PROBE.count("\n") + 2))
    except Exception:  # noqa: BLE001 - a pytest that answers otherwise: leave it alone
        return False
