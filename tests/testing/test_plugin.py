"""The reporter plugin, run by a real pytest in a subprocess, reports every outcome kind.

Regression class: JUnit XML cannot tell xfail from skip; a teardown error after a passing call
must not read as a pass; a selection must run exactly the named tests.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from swemill.testing.report import parse_report

pytestmark = pytest.mark.slow  # two real pytest subprocesses

SUITE = '''
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("setup exploded")

@pytest.fixture
def bad_teardown():
    yield
    raise RuntimeError("teardown exploded")

def test_pass(): pass
def test_fail(): assert 1 == 2, "one is not two"
def test_setup_error(broken): pass
def test_teardown_error(bad_teardown): pass
@pytest.mark.skip(reason="not today")
def test_skip(): pass
@pytest.mark.xfail(reason="known bug")
def test_xfail(): assert False
@pytest.mark.xfail(reason="fixed now")
def test_xpass(): pass
@pytest.mark.xfail(reason="strict", strict=True)
def test_xpass_strict(): pass
@pytest.mark.parametrize("x", [1, 2])
def test_param(x): assert x == 1
'''


def run(tmp_path: Path, select: list[str] | None = None) -> tuple[str, int]:
    (tmp_path / "test_mod.py").write_text(textwrap.dedent(SUITE))
    (tmp_path / "test_broken_import.py").write_text("import no_such_module_here\n")
    report = tmp_path / "report.jsonl"
    env = {"SWEMILL_REPORT": str(report), "SWEMILL_NONCE": "abc", "PATH": "/usr/bin:/bin",
           "PYTHONDONTWRITEBYTECODE": "1"}
    args = ["--continue-on-collection-errors"]
    if select is not None:
        (tmp_path / "select.txt").write_text("\n".join(select) + "\n")
        env["SWEMILL_SELECT"] = str(tmp_path / "select.txt")
        args += sorted({s.split("::")[0] for s in select})
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "swemill.testing.pytest_plugin", "-p",
         "no:cacheprovider", "-o", "addopts=", f"--rootdir={tmp_path}", "-q", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    return report.read_text(), proc.returncode


def test_every_outcome_kind_is_reported(tmp_path: Path) -> None:
    text, code = run(tmp_path)
    r = parse_report(text, code, nonce="abc")
    assert code == 1 and r.trustworthy, r.problem
    got = {n.split("::")[1]: res.outcome for n, res in r.results.items()}
    assert got == {
        "test_pass": "passed", "test_fail": "failed", "test_setup_error": "error",
        "test_teardown_error": "error", "test_skip": "skipped", "test_xfail": "xfailed",
        "test_xpass": "xpassed", "test_xpass_strict": "failed",
        "test_param[1]": "passed", "test_param[2]": "failed",
    }
    assert "one is not two" in r.results["test_mod.py::test_fail"].message
    assert "setup exploded" in r.results["test_mod.py::test_setup_error"].message
    assert r.results["test_mod.py::test_skip"].message.endswith("not today")
    assert "test_broken_import.py" in r.collect_errors


def test_selection_runs_exactly_the_named_tests(tmp_path: Path) -> None:
    wanted = ["test_mod.py::test_pass", "test_mod.py::test_param[2]",
              "test_broken_import.py::test_x"]
    text, code = run(tmp_path, wanted)
    r = parse_report(text, code, nonce="abc", selected=wanted)
    assert r.trustworthy, r.problem
    assert set(r.results) == set(wanted)
    assert r.status("test_mod.py::test_pass") == "passed"
    assert r.status("test_mod.py::test_param[2]") == "failed"
    assert r.results["test_broken_import.py::test_x"].outcome == "error"
    assert "no_such_module_here" in r.results["test_broken_import.py::test_x"].message
