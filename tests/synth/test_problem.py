"""Problem statements come from failing tests only: names and messages, never the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from swemill.core.errors import PolicyError
from swemill.core.records import TestResult
from swemill.policies.scripted import ScriptedPolicy
from swemill.synth.problem import (
    FailingTest,
    PolicyProblemWriter,
    Statement,
    evidence,
    write_problem_statement,
)
from swemill.synth.procedural import ProceduralStrategy
from swemill.synth.strategy import RepoView

from .conftest import mutant_failures

LONGREPR = """\
    def test_add():
>       assert add(1, 2) == 3
E       assert -1 == 3
E        +  where -1 = add(1, 2)

tests/test_calc.py:5: AssertionError
___________________ test_other ___________________
    def add(a, b):
>       return a - b
E       TypeError: unsupported operand
pkg/calc.py:2: TypeError
"""


def test_full_report_keeps_only_what_failed() -> None:
    ev = evidence(LONGREPR)
    assert ev == ["assert -1 == 3", "+  where -1 = add(1, 2)", "TypeError: unsupported operand"]
    crash = "AssertionError: totals differ\nassert 4 == 5\n +  where 4 = total([2, 2])"
    assert evidence(crash) == ["AssertionError: totals differ", "assert 4 == 5",
                               "+  where 4 = total([2, 2])"]
    assert evidence('  File "pkg/calc.py", line 2, in add\nValueError: no') == ["ValueError: no"]


def test_statement_lists_tests_and_messages_deterministically() -> None:
    failures = [
        TestResult(nodeid="tests/test_calc.py::test_b", outcome="failed", message="assert 1 == 2"),
        FailingTest("tests/test_calc.py::test_a", LONGREPR),
        "tests/test_calc.py::test_c",
    ]
    text = write_problem_statement(failures, "example/calc")
    assert text == write_problem_statement(list(reversed(failures)), "example/calc")
    for name in ("test_a", "test_b", "test_c"):
        assert f"- tests/test_calc.py::{name}" in text
    assert "assert -1 == 3" in text and "assert 1 == 2" in text
    assert "return a - b" not in text and "calc.py:2" not in text
    assert "3 tests" in text and "example/calc" in text


def test_many_failures_are_summarised() -> None:
    text = write_problem_statement([f"t.py::test_{i:02d}" for i in range(20)], "r", max_tests=5)
    assert "- t.py::test_04" in text and "test_05" not in text and "and 15 more" in text
    assert "broken" in write_problem_statement([], "r")


CALC = "def add(a, b):\n    total = a + b\n    return total\n"
TESTS = ("from pkg.calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
         "def test_add_zero():\n    assert add(0, 5) == 5\n")


@pytest.mark.slow
def test_real_failures_of_a_real_mutant_leak_nothing(git_repo, tmp_path: Path) -> None:
    root, commit = git_repo
    commit({"pkg/__init__.py": "", "pkg/calc.py": CALC, "tests/test_calc.py": TESTS}, "base")
    strat = ProceduralStrategy(kinds=["change_operator"])
    (cand,) = list(strat.candidates(RepoView(root=root, repo="example/calc", commit="HEAD")))
    failing = mutant_failures(root, cand.bug_patch, tmp_path)
    assert {r.nodeid for r in failing} == {"tests/test_calc.py::test_add",
                                           "tests/test_calc.py::test_add_zero"}
    text = write_problem_statement(failing, "example/calc")
    assert "tests/test_calc.py::test_add" in text and "assert -1 == 3" in text
    changed = [ln[1:].strip() for ln in cand.bug_patch.splitlines()
               if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    assert changed == ["total = a + b", "total = a - b"]
    for line in changed:
        assert line not in text
    assert "@@" not in text and "diff --git" not in text


def test_policy_writer_uses_the_model_and_falls_back() -> None:
    failures = [FailingTest("tests/t.py::test_x", "assert 1 == 2")]
    writer = PolicyProblemWriter(ScriptedPolicy(["Totals are off by one since the update."]))
    assert writer.write(failures, "r") == "Totals are off by one since the update.\n"
    prompt = writer.prompt(failures, "r")
    assert "tests/t.py::test_x" in prompt[-1].text and not writer.fallbacks
    assert writer.calls == 1
    silent = PolicyProblemWriter(ScriptedPolicy(["   "]))
    assert silent.write(failures, "r") == write_problem_statement(failures, "r")
    assert silent.fallbacks == {"empty": 1}
    exhausted = PolicyProblemWriter(ScriptedPolicy([]))
    with pytest.raises(PolicyError):
        ScriptedPolicy([]).act(writer.prompt(failures, "r"), [])
    said = exhausted.statement(failures, "r")
    assert said == Statement(write_problem_statement(failures, "r"), "template", "call_failed")
    assert exhausted.fallbacks == {"call_failed": 1}
