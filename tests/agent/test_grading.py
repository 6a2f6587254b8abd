"""The pure parts of grading: the grade from a judged report, restoring tests, lint, admission."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from swemill.agent.actions import number_lines
from swemill.agent.admission import admit
from swemill.agent.grading import RewardWeights, grade_run
from swemill.agent.lint import lint_introduced, ruff_path
from swemill.agent.tree import is_graded_path, restore_tests, tree_changes
from swemill.core.records import Outcome, Task, TestResult, Trajectory
from swemill.policies.scripted import strip_line_numbers
from swemill.testing.report import TestRunReport

TASK = Task(instance_id="t1", repo="r", base_commit="c", problem_statement="p",
            FAIL_TO_PASS=["t.py::a", "t.py::b"], PASS_TO_PASS=["t.py::c"], test_cmd="pytest",
            strategy="procedural", license_tier="redistributable", env_recipe="e", snapshot="s")


def _report(outcomes: dict[str, str], exit_code: int = 1, trusted: bool = True) -> TestRunReport:
    results = {k: TestResult(nodeid=k, outcome=v) for k, v in outcomes.items()}  # type: ignore[arg-type]
    return TestRunReport(results=results, exit_code=exit_code, trustworthy=trusted,
                         problem="" if trusted else "pytest never finished its session")


def test_grade_is_the_masked_fraction_of_fail_to_pass() -> None:
    out = grade_run(TASK, _report({"t.py::a": "passed", "t.py::b": "failed",
                                   "t.py::c": "passed"}), restored=[])
    assert out.grade == 0.5 and not out.resolved and not out.regression
    assert out.fail_to_pass == {"t.py::a": "passed", "t.py::b": "failed"}
    assert "FAILED   t.py::b" in out.log and "restored from the pristine snapshot: nothing" \
        in out.log


def test_a_regression_zeroes_the_grade_unless_the_policy_keeps_it() -> None:
    report = _report({"t.py::a": "passed", "t.py::b": "passed", "t.py::c": "failed"})
    zero = grade_run(TASK, report, restored=["tests/t.py"])
    assert zero.grade == 0.0 and zero.regression and not zero.resolved
    assert zero.signals["f2p_fraction"] == 1.0
    keep = grade_run(TASK, report, restored=[], regression="keep")
    assert keep.grade == 1.0 and keep.regression and not keep.resolved


def test_an_untrustworthy_run_earns_nothing_whatever_it_claims() -> None:
    report = _report({"t.py::a": "passed", "t.py::b": "passed", "t.py::c": "passed"},
                     exit_code=0, trusted=False)
    out = grade_run(TASK, report, restored=[])
    assert out.grade == 0.0 and not out.resolved
    assert set(out.fail_to_pass.values()) == {"error"}  # nothing from an untrusted report


def test_composite_reward_uses_the_weights_and_leaves_the_grade_alone() -> None:
    report = _report({"t.py::a": "passed", "t.py::b": "passed", "t.py::c": "passed"}, 0)
    w = RewardWeights(diff=0.1, turns=0.01, tokens=0.001, lint=0.05)
    out = grade_run(TASK, report, restored=[], weights=w,
                    signals={"diff_lines": 200, "turns": 10, "tokens": 5000, "lint_new": 2})
    assert out.grade == 1.0
    assert out.signals["reward"] == pytest.approx(1.0 - 0.2 - 0.1 - 0.005 - 0.1)


def _traj(outcome: Outcome | None, flags: list[str] | None = None) -> Trajectory:
    return Trajectory(trajectory_id="x", source="rollout", policy="p", outcome=outcome,
                      flags=flags or [])


def test_admission() -> None:
    full = Outcome(grade=1.0, resolved=True, signals={"f2p_fraction": 1.0})
    part = Outcome(grade=0.5, resolved=False, signals={"f2p_fraction": 0.5})
    near = Outcome(grade=0.0, resolved=False, regression=True, signals={"f2p_fraction": 1.0})
    none = Outcome(grade=0.0, resolved=False, signals={"f2p_fraction": 0.0})
    assert admit(_traj(full)) == "sft"
    assert admit(_traj(full, ["edit_tests"])) == "withheld"
    assert admit(_traj(part)) == "preference" and admit(_traj(near)) == "preference"
    assert admit(_traj(none)) == "withheld" and admit(_traj(None)) == "withheld"


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_restore_tests_undoes_every_test_change_and_keeps_the_fix(tmp_path: Path) -> None:
    pristine, ws = tmp_path / "pristine", tmp_path / "ws"
    base = {"pkg/mod.py": "x = 1\n", "tests/test_mod.py": "assert x == 2\n",
            "tests/conftest.py": "", "pyproject.toml": "[tool.pytest.ini_options]\n"}
    _write(pristine, base)
    _write(ws, {**base, "pkg/mod.py": "x = 2\n", "tests/test_mod.py": "assert True\n",
                "conftest.py": "force = 1\n", "pkg/evil.pth": "import os\n",
                "sitecustomize.py": "", "pyproject.toml": "[tool.pytest.ini_options]\nx=1\n"})
    (ws / "tests/conftest.py").unlink()
    touched = restore_tests(ws, pristine)
    assert touched == ["conftest.py", "pkg/evil.pth", "pyproject.toml", "sitecustomize.py",
                       "tests/conftest.py", "tests/test_mod.py"]
    assert tree_changes(pristine, ws).paths == ["pkg/mod.py"]  # only the fix is left


def test_restore_never_writes_through_a_planted_link(tmp_path: Path) -> None:
    pristine, ws, outside = tmp_path / "pristine", tmp_path / "ws", tmp_path / "outside"
    _write(pristine, {"tests/test_a.py": "real\n"})
    _write(outside, {"test_a.py": "host file\n", "conftest.py": "host conftest\n"})
    ws.mkdir()
    os.symlink(outside, ws / "tests")  # the policy replaced tests/ by a link to the host
    restore_tests(ws, pristine)
    assert (outside / "test_a.py").read_text() == "host file\n"
    assert (outside / "conftest.py").exists()
    assert not (ws / "tests").is_symlink() and (ws / "tests/test_a.py").read_text() == "real\n"


def test_graded_paths() -> None:
    assert is_graded_path("tests/data/input.json") and is_graded_path("pkg/test_x.py")
    assert is_graded_path("setup.cfg") and is_graded_path("a/b/x.pth")
    assert not is_graded_path("pkg/testing/helpers.py") and not is_graded_path("pkg/core.py")


def test_tree_changes_counts_lines_and_reads_links_not_their_targets(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _write(a, {"m.py": "one\ntwo\n"})
    _write(b, {"m.py": "one\nthree\nfour\n", "new.txt": "n\n"})
    os.symlink("/etc", b / "etc")
    ch = tree_changes(a, b)
    assert ch.paths == ["etc", "m.py", "new.txt"]
    assert (ch.lines_added, ch.lines_removed) == (3, 1)
    assert ch.added["m.py"] == "three\nfour\n" and "+++ b/m.py" in ch.diff


@pytest.mark.skipif(ruff_path() is None, reason="ruff is not installed")
def test_lint_counts_only_findings_the_change_introduced(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _write(a, {"m.py": "import os\n\n\ndef f():\n    return 1\n"})
    _write(b, {"m.py": "import os\nimport sys\n\n\ndef f():\n    x = 2\n    return 1\n"})
    assert lint_introduced(a, b, ["m.py"]) == 2  # sys unused, x unused; os was there before
    assert lint_introduced(a, a, ["m.py"]) == 0


@given(st.text(alphabet=st.sampled_from("ab \t\n\r\x0c€"), max_size=60))
def test_numbered_reads_round_trip(text: str) -> None:
    assert strip_line_numbers(number_lines(text)) == text
