"""The drop summary names the cause and the fix in one line, for each way a real project is
broken for swemill: a test module needing a package the environment lacks, and a
``filterwarnings = error`` configuration turning a start-up warning into pytest exit 4.

The evidence is real: pytest runs in a subprocess on a tiny project, its collection reports
recorded by the warm server's own collector (what a worker hands the gates) or, for a start-up
failure, its output taken the way the warm server's child logs it. Only the candidates around
that evidence are built here (48 of them, as a run would have them), since which candidates
hit the failure is not what is being tested.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from swemill.core.records import CandidateRecord
from swemill.validate.drops import summarize
from swemill.validate.explain import exit_meaning, first_error, refusal_detail

_COLLECT = """
import json, sys, pytest
from swemill.validate.inside.forkrun import Collector
c = Collector()
code = pytest.main(["-q", "--tb=short", "-p", "no:cacheprovider",
                    "--continue-on-collection-errors"], plugins=[c])
print(json.dumps({"exit_code": int(code), "outcomes": c.outcomes, "messages": c.messages}))
"""

# What the warm server's child does: swemill's reporter is imported before pytest starts,
# and an exception escaping pytest.main is printed to the run's log, the exit code is 4.
_START = """
import traceback, sys
import early_plugin
import pytest
try:
    code = pytest.main(["-q", "-p", "early_plugin"])
except BaseException:
    traceback.print_exc()
    code = 4
sys.exit(int(code))
"""


def _project(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _python(root: Path, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(root),
                                                       "PATH": "/usr/bin:/bin"})


def _rows(detail: str, reason: str, dropped: int, total: int) -> list[CandidateRecord]:
    return [CandidateRecord(
        candidate_id=f"procedural-{i:04d}", instance_id=f"x.procedural-{i:04d}", repo="o/x",
        strategy="procedural", position=i, file="x/core.py", symbol=f"f{i}", base_commit="c",
        verdict="dropped" if i < dropped else "written",
        reason=reason if i < dropped else "accepted", detail=detail if i < dropped else "")
        for i in range(total)]


def test_a_missing_test_dependency_is_named_with_its_module(tmp_path: Path) -> None:
    root = _project(tmp_path, {
        "tests/test_core.py": "def test_ok():\n    assert True\n",
        "tests/extra/test_x.py": "import hypothesis_not_installed_here\n\n\n"
                                 "def test_prop():\n    assert True\n"})
    proc = _python(root, _COLLECT)
    run = json.loads(proc.stdout.strip().splitlines()[-1])
    assert run["outcomes"]["tests/extra/test_x.py"] == "error"
    detail = refusal_detail("import_failed", exit_code=run["exit_code"],
                            outcomes=run["outcomes"], messages=run["messages"], log="")
    assert detail == ("tests/extra/test_x.py: ModuleNotFoundError: No module named "
                      "'hypothesis_not_installed_here'")
    summary = summarize(_rows(detail, "import_failed", 42, 48))
    assert summary.top == [("import_failed", 42, detail)]
    assert summary.advice is not None
    assert summary.advice.startswith("42 of 48 candidates failed to import: "
                                     "tests/extra/test_x.py needs `hypothesis_not_installed_here`")
    assert "--recipe" in summary.advice
    assert summary.lines()[0] == ("top drop reasons (42 of 48 candidates dropped): "
                                  "import_failed 42")


def test_filterwarnings_error_at_start_up_is_explained_by_exit_code_and_warning(
        tmp_path: Path) -> None:
    root = _project(tmp_path, {
        "pytest.ini": "[pytest]\nfilterwarnings =\n    error\n",
        "early_plugin.py": "X = 1\n",
        "tests/test_core.py": "def test_ok():\n    assert True\n"})
    proc = _python(root, _START)
    assert proc.returncode == 4, proc.stderr[-2000:]
    detail = refusal_detail("crashed", exit_code=proc.returncode, outcomes={}, messages={},
                            log=proc.stdout + proc.stderr)
    assert detail.startswith("pytest exit 4 (usage error: the command line or the test "
                             "configuration): ")
    assert "PytestAssertRewriteWarning" in detail and "early_plugin" in detail
    summary = summarize(_rows(detail, "crashed", 47, 48))
    assert summary.advice is not None and summary.advice.startswith("47 of 48 candidates crashed")
    assert "filterwarnings = error" in summary.advice
    assert "`-W ignore::pytest.PytestAssertRewriteWarning`" in summary.advice


def test_no_tests_collected_is_exit_5(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 5
    detail = refusal_detail("crashed", exit_code=5, outcomes={}, messages={}, log=proc.stdout)
    assert detail.startswith("pytest exit 5 (no tests collected)")
    assert not any(ch.isdigit() for ch in detail.removeprefix("pytest exit 5"))  # no clock
    advice = summarize(_rows(detail, "crashed", 3, 4)).advice
    assert advice is not None and "collected no tests" in advice


def test_lines_and_exit_codes() -> None:
    assert exit_meaning(-9).startswith("killed by SIGKILL (the sandbox's memory limit")
    assert exit_meaning(3) == "pytest exit 3 (internal error)"
    assert exit_meaning(42).startswith("exit 42 (not a pytest exit code")
    assert first_error("x\nE   assert 1 == 2\nE    + where\n") == "assert 1 == 2"
    assert first_error("") == ""
    internal = ("INTERNALERROR> Traceback (most recent call last):\n"
                "INTERNALERROR>   File \"runner.py\", line 422, in make_collect_report\n"
                "INTERNALERROR> AssertionError: 'Skipped: numpy is not available'\n1 error\n")
    assert first_error(internal) == "AssertionError: 'Skipped: numpy is not available'"
    # a reason under half the candidates gets no advice, only the top reasons
    few = summarize(_rows("no test failed", "no_fail_to_pass", 2, 6))
    assert few.advice is None and few.lines() == [
        "top drop reasons (2 of 6 candidates dropped): no_fail_to_pass 2",
        "  no_fail_to_pass: no test failed"]
    assert summarize([]).lines() == ["no candidate was validated"]
