"""The statement lines the head image hands its children for failure reports on an edited
module must be the very ones pytest would compute by parsing the whole edited text."""

from __future__ import annotations

import ast
import textwrap

import pytest
from _pytest._code.source import _statement_linenos

from swemill.validate.inside.report_cache import ReportCache


@pytest.fixture(scope="module")
def cache() -> ReportCache:
    asts = ReportCache()
    asts.detect()  # not install(): that would change this very pytest's failure reports
    return asts


HEAD = textwrap.dedent('''\
    """A module."""
    import functools

    LIMIT = 3


    def first(xs):
        for x in xs:
            if x:
                return x
        else:
            return None


    @functools.lru_cache
    def second(n):
        try:
            return n + 1
        finally:
            pass


    class Box:
        """Holds things."""

        size = 2

        def put(self, x):
            if x > LIMIT:
                raise ValueError(x)
            return x

        @property
        def full(self):
            return self.size > LIMIT

        class Inner:
            def deep(self):
                while True:
                    break
                return 1


    def last(y):
        return [z for z in range(y)]
    ''')

EDITS = [
    ("        if x:\n            return x\n", "        if not x:\n            return x\n"),
    ("        return None\n", "        y = 1\n        z = 2\n        return y + z\n"),
    ("        if x:\n            return x\n", "        continue\n"),
    ("        return n + 1\n", "        n += 1\n        return n\n"),
    ("        if x > LIMIT:\n            raise ValueError(x)\n", ""),
    ("        return self.size > LIMIT\n", "        a = self.size\n        return a\n"),
    ("            while True:\n                break\n", "            pass\n"),
    ("    return [z for z in range(y)]\n", "    out = []\n    return out\n"),
    # the removed lines run into the blank lines after the function
    ("            return 1\n\n\n", "\n"),
    ("        return x\n\n    @property", "        return x\n    @property"),
]


@pytest.mark.parametrize("old,new", EDITS)
def test_an_edit_inside_one_function_gets_the_lines_a_whole_parse_gives(
        cache: object, old: str, new: str) -> None:
    assert HEAD.count(old) == 1
    edited = HEAD.replace(old, new).rstrip("\n")
    tree = cache.stand_in(HEAD.rstrip("\n"), edited)  # type: ignore[attr-defined]
    assert tree is not None
    want = _statement_linenos(ast.parse(edited, "source", "exec"))
    assert tree._pytest_statement_linenos == want


@pytest.mark.parametrize("old,new", [
    ("LIMIT = 3\n", "LIMIT = 4\n"),  # module level
    ('        size = 2\n', '        size = 3\n'),  # class level
    ("def last(y):\n", "def last(y):\n    pass\n\n\ndef extra(y):\n"),  # one def became two
    ('"""A module."""\n', '"""Another module."""\n'),
])
def test_an_edit_outside_one_function_is_left_to_a_whole_parse(
        cache: object, old: str, new: str) -> None:
    edited = HEAD.replace(old, new).rstrip("\n")
    assert cache.stand_in(HEAD.rstrip("\n"), edited) is None  # type: ignore[attr-defined]


def test_statement_lines_worked_out_once_are_the_ones_pytest_counts() -> None:
    """``inside.stmt_lines`` (used where pytest < 9 walks the tree per traceback entry)
    counts the very lines pytest's own counting gives, on every statement shape and on real
    modules; and it keeps them on the tree, so a tree is walked once."""
    from pathlib import Path

    import _pytest.python
    import _pytest.runner

    from swemill.validate.inside import hotpatch, stmt_lines

    texts = [stmt_lines.PROBE, HEAD]
    texts += [Path(str(m.__file__)).read_text() for m in (_pytest.python, _pytest.runner,
                                                           hotpatch)]
    for text in texts:
        ours, theirs = ast.parse(text), ast.parse(text)
        assert stmt_lines.statement_linenos(ours) == _statement_linenos(theirs)
        assert stmt_lines.statement_linenos(ours) is ours._pytest_statement_linenos


def test_statement_lines_go_in_only_where_they_answer_as_pytest_does() -> None:
    """pytest 9 answers ``(0, None)`` above a module's first statement, where the walk of
    pytest < 9 (and ``startend``) answers otherwise: the probe tells them apart, so the
    replacement is never put in a pytest that answers differently."""
    from _pytest._code.source import get_statement_startend2

    from swemill.validate.inside import stmt_lines

    assert stmt_lines.agrees(stmt_lines.startend)
    assert not stmt_lines.agrees(get_statement_startend2)  # this pytest (9) is left alone
    tree = ast.parse(stmt_lines.PROBE)
    assert [stmt_lines.startend(n, tree) == get_statement_startend2(n, ast.parse(
        stmt_lines.PROBE)) for n in (-1, 3, 10, 40)] == [False, True, True, True]
