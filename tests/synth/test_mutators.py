"""Each mutator on a small snippet: the exact text it produces, and the sites it counts."""

from __future__ import annotations

import random
import textwrap

import libcst as cst
import pytest

from swemill.core.errors import SynthesisError
from swemill.synth.mutators import MUTATORS, mutator


def _target(module: cst.Module) -> cst.FunctionDef | cst.ClassDef:
    node = module.body[0]
    assert isinstance(node, cst.FunctionDef | cst.ClassDef)
    return node


def count(kind: str, src: str) -> int:
    m = MUTATORS[kind]
    node = _target(cst.parse_module(textwrap.dedent(src)))
    return m.count(node if m.level == "class" else node.body)


def mutate(kind: str, src: str, site: int = 0, seed: int = 0) -> str:
    m = MUTATORS[kind]
    module = cst.parse_module(textwrap.dedent(src))
    node = _target(module)
    if m.level == "class":
        new = m.apply(node, site, random.Random(seed))
    else:
        new = node.with_changes(body=m.apply(node.body, site, random.Random(seed)))
    return module.deep_replace(node, new).code


def d(src: str) -> str:
    return textwrap.dedent(src)


def test_every_required_kind_is_registered() -> None:
    assert sorted(MUTATORS) == sorted([
        "remove_assignment", "remove_conditional", "remove_loop", "remove_wrapper",
        "invert_if_else", "shuffle_lines", "change_operator", "change_constant",
        "swap_operands", "break_call_chain", "remove_class_base", "remove_method",
        "shuffle_methods",
    ])
    with pytest.raises(SynthesisError, match="unknown mutator 'nope'"):
        mutator("nope")


def test_remove_assignment() -> None:
    src = """
    def f(x):
        y = x + 1
        y += 2
        z: int = 3
        w: int
        return y
    """
    assert count("remove_assignment", src) == 3  # a bare annotation assigns nothing
    assert mutate("remove_assignment", src, 1) == d("""
    def f(x):
        y = x + 1
        z: int = 3
        w: int
        return y
    """)


def test_remove_assignment_leaves_a_valid_block() -> None:
    src = """
    def f(x):
        if x:
            x = 1
        return x
    """
    assert mutate("remove_assignment", src) == d("""
    def f(x):
        if x:
            pass
        return x
    """)


def test_remove_conditional_and_loop() -> None:
    src = """
    def f(xs):
        out = []
        for x in xs:
            if x > 0:
                out.append(x)
        while out and out[-1] == 0:
            out.pop()
        return out
    """
    assert count("remove_conditional", src) == 1
    assert mutate("remove_conditional", src) == d("""
    def f(xs):
        out = []
        for x in xs:
            pass
        while out and out[-1] == 0:
            out.pop()
        return out
    """)
    assert count("remove_loop", src) == 2
    assert mutate("remove_loop", src, 1) == d("""
    def f(xs):
        out = []
        for x in xs:
            if x > 0:
                out.append(x)
        return out
    """)


def test_remove_wrapper_unwraps_with_and_try() -> None:
    src = """
    def f(path):
        with open(path) as fh:
            text = fh.read()
        try:
            n = int(text)
        except ValueError:
            n = 0
        finally:
            print("done")
        return n
    """
    assert count("remove_wrapper", src) == 2
    assert mutate("remove_wrapper", src, 1) == d("""
    def f(path):
        with open(path) as fh:
            text = fh.read()
        n = int(text)
        return n
    """)
    assert mutate("remove_wrapper", src, 0).startswith(d("""
    def f(path):
        text = fh.read()
        try:
    """))


def test_invert_if_else_skips_elif() -> None:
    src = """
    def sign(x):
        if x < 0:
            return -1
        elif x == 0:
            return 0
        if x > 100:
            return 2
        else:
            return 1
    """
    assert count("invert_if_else", src) == 1
    assert mutate("invert_if_else", src) == d("""
    def sign(x):
        if x < 0:
            return -1
        elif x == 0:
            return 0
        if x > 100:
            return 1
        else:
            return 2
    """)


def test_shuffle_lines_keeps_the_docstring_first_and_depends_on_seed() -> None:
    src = """
    def f():
        \"\"\"Doc.\"\"\"
        a = 1
        b = 2
        c = 3
        return a + b + c
    """
    assert count("shuffle_lines", src) == 1
    outs = {mutate("shuffle_lines", src, 0, seed) for seed in range(6)}
    assert d(src) not in outs and len(outs) > 1
    for out in outs:
        lines = out.strip().splitlines()
        assert lines[1].strip() == '"""Doc."""'
        assert sorted(ln.strip() for ln in lines[2:]) == sorted(
            ["a = 1", "b = 2", "c = 3", "return a + b + c"])
    assert mutate("shuffle_lines", src, 0, 3) == mutate("shuffle_lines", src, 0, 3)


def test_change_operator_covers_arithmetic_comparison_boolean() -> None:
    src = """
    def f(a, b):
        a -= 1
        return a + b < 3 and a is not None
    """
    assert count("change_operator", src) == 5
    got = {mutate("change_operator", src, i).splitlines()[-1].strip() for i in range(1, 5)}
    assert got == {
        "return a - b < 3 and a is not None",
        "return a + b <= 3 and a is not None",
        "return a + b < 3 and a is None",
        "return a + b < 3 or a is not None",
    }
    assert "a += 1" in mutate("change_operator", src, 0)


def test_change_constant_numbers_booleans_strings_not_docstrings() -> None:
    src = """
    def f(x):
        \"\"\"A docstring is not a constant to change.\"\"\"
        flag: "str" = True
        return x * 10 + 2.5, flag, "abc", b"raw"
    """
    assert count("change_constant", src) == 4  # True, 10, 2.5, "abc"
    assert "flag: \"str\" = False" in mutate("change_constant", src, 0)
    ten = mutate("change_constant", src, 1).splitlines()[-1]
    assert "x * 11" in ten or "x * 9" in ten
    s = mutate("change_constant", src, 3).splitlines()[-1]
    assert any(v in s for v in ("'ab'", "''")), s


def test_swap_operands_skips_symmetric_and_commutative() -> None:
    src = """
    def f(a, b):
        return (a - b, a * b, a == b, a < b, a + a, a - b * 2)
    """
    # a - b, a < b, a - b * 2; not a * b, b * 2 (commutative), a == b (symmetric), a + a
    assert count("swap_operands", src) == 3
    outs = [mutate("swap_operands", src, i).splitlines()[-1].strip() for i in range(3)]
    assert "return (b - a, a * b, a == b, a < b, a + a, a - b * 2)" in outs
    assert "return (a - b, a * b, a == b, b < a, a + a, a - b * 2)" in outs
    assert "return (a - b, a * b, a == b, a < b, a + a, (b * 2) - a)" in outs


def test_swap_operands_keeps_grouping_with_parentheses() -> None:
    src = """
    def f(a, b, c):
        return a - b - c
    """
    outs = {mutate("swap_operands", src, i).splitlines()[-1].strip() for i in range(2)}
    assert outs == {"return b - a - c", "return c - (a - b)"}


def test_break_call_chain() -> None:
    src = """
    def f(s):
        return s.strip().lower().split()
    """
    assert count("break_call_chain", src) == 2
    outs = {mutate("break_call_chain", src, i).splitlines()[-1].strip() for i in range(2)}
    assert outs == {"return s.strip().split()", "return s.lower().split()"}


CLASS = """
class Point(Base, object, Mixin, metaclass=Meta):
    def __init__(self, x):
        self.x = x

    def norm(self):
        return abs(self.x)

    def twice(self):
        return self.x * 2
"""


def test_remove_class_base_keeps_keywords_and_skips_object() -> None:
    assert count("remove_class_base", CLASS) == 2
    assert mutate("remove_class_base", CLASS, 0).splitlines()[1] == (
        "class Point(object, Mixin, metaclass=Meta):")
    assert mutate("remove_class_base", CLASS, 1).splitlines()[1] == (
        "class Point(Base, object, metaclass=Meta):")
    only = "class A(B):\n    x = 1\n"
    assert mutate("remove_class_base", only) == "class A:\n    x = 1\n"


def test_remove_method_and_shuffle_methods() -> None:
    assert count("remove_method", CLASS) == 3
    out = mutate("remove_method", CLASS, 1)
    assert "def norm" not in out and "def twice" in out and "def __init__" in out
    assert count("shuffle_methods", CLASS) == 1
    shuffled = mutate("shuffle_methods", CLASS, 0, seed=2)
    defs = [ln.strip() for ln in shuffled.splitlines() if ln.strip().startswith("def ")]
    order = [ln.split("(")[0] for ln in defs]
    assert sorted(order) == ["def __init__", "def norm", "def twice"]
    assert order != ["def __init__", "def norm", "def twice"]
    lone = "class A:\n    def f(self):\n        pass\n"
    assert count("shuffle_methods", lone) == 0
    assert mutate("remove_method", lone) == "class A:\n    pass\n"


def test_asking_for_a_missing_site_is_an_error() -> None:
    with pytest.raises(SynthesisError, match="no site 5"):
        mutate("remove_loop", "def f():\n    return 1\n", 5)
