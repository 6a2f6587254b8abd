"""A doctest has the same outcome whether its module is named on pytest's command line or not.

Regression class: zipp 3.20.2 in the zoo. pytest assertion-rewrites a module named on its
command line, so ``zipp/glob.py::zipp.glob.Translator``, a doctest expecting an ``assert``'s
plain message (``AssertionError: Invalid separators``), passed in the baseline's whole-suite
run and failed in every run by id: the warm server's runs, the cold runner's (which names the
test's file) and the exported ``test_cmd`` followed by the task's ids. 33 of 43 candidates were
dropped ``not_solvable``, and tasks were written with that doctest in PASS_TO_PASS which their
exported command failed at the fixed tree. The reporter now rewrites the workspace's modules
under ``--doctest-modules`` in every run, as naming them would.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from swemill.suite.verdict import parse_report

pytestmark = pytest.mark.slow  # real pytest subprocesses

MODULE = '''
class Translator:
    """
    >>> Translator('xyz')
    Traceback (most recent call last):
    ...
    AssertionError: Invalid separators
    """

    def __init__(self, seps="/"):
        assert seps and set(seps) <= set("/"), "Invalid separators"
        self.seps = seps


def double(x):
    """
    >>> double(2)
    4
    """
    return 2 * x
'''
TEST = '''
from pkg.glob import Translator, double

def test_double():
    assert double(3) == 6

def test_translator():
    assert Translator().seps == "/"
'''
IDS = ["pkg/glob.py::pkg.glob.Translator", "pkg/glob.py::pkg.glob.double",
       "tests/test_glob.py::test_double", "tests/test_glob.py::test_translator"]


def run(root: Path, args: list[str], plugin: bool = True) -> dict[str, str]:
    report = root / "report.jsonl"
    report.unlink(missing_ok=True)
    env = {"SWEMILL_REPORT": str(report), "SWEMILL_NONCE": "n", "PATH": "/usr/bin:/bin",
           "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *(["-p", "swemill.suite.pytest_plugin"] if plugin
                                           else []),
         "-p", "no:cacheprovider", "-o", "addopts=", "--doctest-modules", f"--rootdir={root}",
         "-q", "-rA", *args], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    if plugin:
        r = parse_report(report.read_text(), proc.returncode, nonce="n")
        assert r.trustworthy, r.problem
        return {n: res.outcome for n, res in r.results.items()}
    return {line.split()[1]: line.split()[0].lower() for line in proc.stdout.splitlines()
            if line.startswith(("PASSED ", "FAILED "))}


def test_a_doctest_judges_the_same_in_the_whole_suite_and_by_id(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/__init__.py").write_text("")
    (tmp_path / "pkg/glob.py").write_text(textwrap.dedent(MODULE))
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_glob.py").write_text(textwrap.dedent(TEST))
    # plain pytest: the outcome depends on whether the module is named (what the zoo hit)
    assert run(tmp_path, [], plugin=False)[IDS[0]] == "passed"
    assert run(tmp_path, IDS, plugin=False)[IDS[0]] == "failed"
    # swemill's runs: the whole suite (the baseline), by id (warm server, export), by file
    whole, by_id, by_file = (run(tmp_path, []), run(tmp_path, IDS),
                             run(tmp_path, ["pkg/glob.py", "tests/test_glob.py"]))
    assert whole == by_id == by_file
    assert whole == {IDS[0]: "failed", IDS[1]: "passed", IDS[2]: "passed", IDS[3]: "passed"}
    assert run(tmp_path, IDS, plugin=False) == whole  # and as the exported command judges
