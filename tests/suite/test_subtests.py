"""A test whose subtest fails is failed, in the reporter of cold runs as in the warm server.

Regression class: zipp 3.20.2 in the zoo runs its ``unittest`` tests in ``subTest``
blocks. pytest 9 reports a failed subtest for the test's call phase, then the test's own call
report passes; the reporter kept the last report, so cold whole-suite runs (the baseline,
the audit) said "passed" where the warm server said "failed": the audit removed all 3 tasks
the run wrote ("false FAIL_TO_PASS tests/test_path.py::TestPath::test_stem").
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from swemill.suite.verdict import parse_report

pytestmark = pytest.mark.slow  # a real pytest subprocess

SUITE = '''
import unittest


class TestSub(unittest.TestCase):
    def test_sub_fails(self):
        for x in (1, 2):
            with self.subTest(x=x):
                assert x == 1

    def test_sub_passes(self):
        with self.subTest(x=1):
            assert True


def test_subtests_fixture(subtests):
    for x in (1, 2):
        with subtests.test(x=x):
            assert x == 1


def test_plain():
    pass
'''


def test_a_failed_subtest_fails_its_test(tmp_path: Path) -> None:
    pytest.importorskip("_pytest.subtests")  # pytest >= 9
    (tmp_path / "test_sub.py").write_text(SUITE)
    report = tmp_path / "report.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "swemill.suite.pytest_plugin", "-p",
         "no:cacheprovider", "-o", "addopts=", f"--rootdir={tmp_path}", "-q"],
        cwd=tmp_path, env={"SWEMILL_REPORT": str(report), "SWEMILL_NONCE": "n",
                           "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True, text=True, timeout=120)
    r = parse_report(report.read_text(), proc.returncode, nonce="n")
    assert proc.returncode == 1 and r.trustworthy, r.problem
    assert {n.split("::", 1)[1]: res.outcome for n, res in r.results.items()} == {
        "TestSub::test_sub_fails": "failed", "TestSub::test_sub_passes": "passed",
        "test_subtests_fixture": "failed", "test_plain": "passed"}
