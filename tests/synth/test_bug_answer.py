"""A bug writer's answers read into new module text, or refused under a named reason."""

from __future__ import annotations

import ast
import textwrap

import pytest

from swemill.synth.bug_answer import AnswerRefused, function_spans, read_answer, stub_of
from swemill.synth.bug_prompts import PROMPTS, STUB_LINE, messages_for

MODULE = '''"""A module."""

import functools

LIMIT = 10


def clamp(x, lo=0, hi=LIMIT):
    """Keep x in [lo, hi]."""
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


class Box:
    """Holds things."""

    def __init__(self, items):
        self.items = list(items)

    @functools.lru_cache(maxsize=None)
    def total(self, scale=1):
        return sum(self.items) * scale

    def first(self):
        """The first item, or None."""
        return self.items[0] if self.items else None

    def last(self,
             default=None):
        # the items are never empty here
        return self.items[-1]
'''


def _span(qualname: str):  # type: ignore[no-untyped-def]
    return next(s for s in function_spans("pkg/mod.py", MODULE) if s.qualname == qualname)


def _shown(qualname: str) -> str:
    s = _span(qualname)
    return "".join(MODULE.splitlines(keepends=True)[s.start : s.end])


def _read(qualname: str, answer: str, shown: str | None = None) -> str:
    return read_answer(answer, source=MODULE, span=_span(qualname),
                       shown=shown if shown is not None else _shown(qualname))


def _refused(qualname: str, answer: str, shown: str | None = None) -> str:
    with pytest.raises(AnswerRefused) as info:
        _read(qualname, answer, shown)
    return info.value.reason


def test_spans_cover_functions_and_methods_with_their_decorators() -> None:
    spans = {s.qualname: s for s in function_spans("pkg/mod.py", MODULE)}
    assert list(spans) == ["clamp", "Box.__init__", "Box.total", "Box.first", "Box.last"]
    assert _shown("Box.total").lstrip().startswith("@functools.lru_cache")
    assert spans["Box.total"].indent == "    " and spans["clamp"].indent == ""


def test_a_whole_method_at_any_indent_is_put_back_at_its_own() -> None:
    answer = "Sure:\n```python\ndef first(self):\n    return self.items[-1] if self.items " \
             "else None\n```\nThis returns the last item."
    new = _read("Box.first", answer)
    ast.parse(new)
    assert new == MODULE.replace('        """The first item, or None."""\n'
                                 "        return self.items[0] if self.items else None\n",
                                 "        return self.items[-1] if self.items else None\n")


def test_a_method_answered_inside_its_class_is_taken_alone() -> None:
    answer = "```python\nclass Box:\n    def first(self):\n        return None\n```"
    new = _read("Box.first", answer)
    assert new == MODULE.replace('        """The first item, or None."""\n'
                                 "        return self.items[0] if self.items else None\n",
                                 "        return None\n")
    # the whole class again, another method included: that is more than the method
    whole = "```python\nclass Box:\n    def first(self):\n        return None\n\n" \
            "    def last(self, default=None):\n        return default\n```"
    assert _refused("Box.first", whole) == "answer_outside_function"
    # a module-level function is never looked for inside a class
    assert _refused("clamp", "```python\nclass C:\n    def clamp(x, lo=0, hi=LIMIT):\n"
                             "        return lo\n```") == "answer_outside_function"


def test_decorators_left_out_of_a_whole_function_are_kept() -> None:
    new = _read("Box.total", "```python\ndef total(self, scale=1):\n"
                             "    return sum(self.items) + scale\n```")
    assert "    @functools.lru_cache(maxsize=None)\n    def total(self, scale=1):\n" \
           "        return sum(self.items) + scale\n" in new


def test_a_diff_with_wrong_counts_and_no_header_applies_by_content() -> None:
    diff = "```diff\n@@ -100,9 +100,9 @@\n     if x < lo:\n         return lo\n" \
           "-    if x > hi:\n+    if x >= hi:\n         return hi\n```"
    new = _read("clamp", diff)
    assert "    if x >= hi:\n" in new and new.count("\n") == MODULE.count("\n")


def test_diffs_that_do_not_fit_are_refused_by_name() -> None:
    assert _refused("clamp", "```diff\n@@ -1 +1 @@\n-    if x < 0:\n+    if x <= 0:\n```") \
        == "answer_bad_diff"
    # the lines exist, but in another function
    assert _refused("clamp", "```diff\n@@ -1 +1 @@\n-        self.items = list(items)\n"
                             "+        self.items = tuple(items)\n```") == "answer_outside_function"
    two_files = ("--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1 +1 @@\n-    return x\n+    return lo\n"
                 "--- a/pkg/other.py\n+++ b/pkg/other.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n")
    assert _refused("clamp", f"```diff\n{two_files}```") == "answer_outside_function"


def test_edits_beyond_the_function_are_refused() -> None:
    extra_import = "```python\nimport os\n\ndef clamp(x, lo=0, hi=LIMIT):\n    return lo\n```"
    assert _refused("clamp", extra_import) == "answer_outside_function"
    helper = "```python\ndef clamp(x, lo=0, hi=LIMIT):\n    return lo\n\n" \
             "def helper():\n    return 1\n```"
    assert _refused("clamp", helper) == "answer_outside_function"
    # a diff that adds a module-level statement after the function
    diff = "```diff\n@@ -1 +1 @@\n     return x\n+\n+LIMIT = 11\n```"
    assert _refused("clamp", diff) == "answer_outside_function"


def test_no_op_signature_syntax_and_empty_answers_are_refused() -> None:
    same = _shown("clamp").replace('    """Keep x in [lo, hi]."""\n',
                                   '    """Keep x within [lo, hi], both ends included."""\n')
    assert _refused("clamp", f"```python\n{same}\n# reformatted\n```") == "answer_no_op"
    assert _refused("clamp", "```python\ndef clamp(x, lo=1, hi=LIMIT):\n    return x\n```") \
        == "answer_signature_changed"
    assert _refused("clamp", "```python\ndef clamp(y, lo=0, hi=LIMIT):\n    return y\n```") \
        == "answer_signature_changed"
    assert _refused("clamp", "```python\ndef clamp2(x, lo=0, hi=LIMIT):\n    return x\n```") \
        == "answer_outside_function"
    assert _refused("Box.total", "```python\n@functools.cache\ndef total(self, scale=1):\n"
                                 "    return 0\n```") == "answer_signature_changed"
    assert _refused("clamp", "```python\ndef clamp(x, lo=0, hi=LIMIT:\n    return x\n```") \
        == "answer_unparseable"
    assert _refused("clamp", "```python\ndef clamp(x, lo=0, hi=LIMIT):\n    return (\n") \
        == "answer_unparseable"
    assert _refused("clamp", "x = 1\n") == "answer_no_function"
    assert _refused("clamp", "  \n") == "answer_empty"


def test_rewrite_stub_keeps_signature_and_docstring_and_a_diff_against_it_applies() -> None:
    span = _span("clamp")
    stub = stub_of(MODULE, span)
    assert stub == 'def clamp(x, lo=0, hi=LIMIT):\n    """Keep x in [lo, hi]."""\n' \
                   f"    {STUB_LINE}\n"
    assert "if x < lo" not in stub
    assert stub_of(MODULE, _span("Box.last")) == \
        f"    def last(self,\n             default=None):\n        {STUB_LINE}\n"
    method = stub_of(MODULE, _span("Box.total"))
    assert method.startswith("    @functools.lru_cache")
    assert method.endswith(f"        {STUB_LINE}\n")
    diff = (f"```diff\n@@ -1,3 +1,3 @@\n def clamp(x, lo=0, hi=LIMIT):\n     \"\"\"Keep x in "
            f"[lo, hi].\"\"\"\n-    {STUB_LINE}\n+    return max(lo, min(x, hi + 1))\n```")
    new = _read("clamp", diff, shown=stub)
    assert "    return max(lo, min(x, hi + 1))\n" in new and "if x < lo" not in new


def test_prompts_are_versioned_data_and_show_no_test() -> None:
    for name, prompt in PROMPTS.items():
        assert prompt.strategy == name and prompt.version and prompt.tag == f"{name}@1"
        msgs = messages_for(prompt, repo="o/r", file="pkg/mod.py", qualname="clamp",
                            context=MODULE, function=_shown("clamp"))
        assert [m.role for m in msgs] == ["system", "user"]
        assert "`clamp`" in msgs[1].text and "def test_" not in msgs[1].text
    assert "signature" in textwrap.dedent(PROMPTS["lm-rewrite"].system)
