"""A selection's whole-suite run of the broken tree is one of its ``repeat`` runs.

``runspkg`` counts, in files in the workspace, how often each test ran on a broken tree.
``third`` is covered by two tests, ``other`` by one; a mutant of ``third`` runs its two tests
(the selection), and then the whole suite once. ``test_third`` fails on the broken tree in
its first two runs and passes from the third on; ``test_third_steady`` fails in every one.
With ``repeat`` 3 the broken tree runs each newly failing test exactly three times, the
whole-suite run being the third: ``test_third`` is held flaky (it passed there),
``test_third_steady`` is FAIL_TO_PASS, and ``test_other`` enters PASS_TO_PASS from that run,
the only one that ran it on the broken tree.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from swemill.core.records import Candidate, ChangedSymbol
from swemill.repo.envbuild import build_env
from swemill.repo.sources import resolve_source
from swemill.sandbox import Limits
from swemill.suite.baseline import run_baseline
from swemill.synth.patches import file_diff
from swemill.validate.check import CheckContext, check_candidate, select_tests
from swemill.validate.worker import Worker, open_base

from .conftest import PYPROJECT, commit_tree

pytestmark = pytest.mark.slow

COUNTER = '''\
def _broken_run(name):
    """How many broken-tree runs of this test came before this one (counted in a file)."""
    n = int(open(name).read()) if os.path.exists(name) else 0
    with open(name, "w") as fh:
        fh.write(str(n + 1))
    return n
'''

CORE = '''\
def third(x):
    return x


def other(x):
    return x + 1
'''

TESTS = '''\
import os
import time

from runspkg.core import other, third

SLOW_OTHER = 0.0
SLOW_STEADY = 0.0


''' + COUNTER + '''

def test_third():
    if third(1) != 1:
        assert _broken_run("third-runs.txt") >= 2


def test_third_steady():
    time.sleep(SLOW_STEADY)
    if third(2) != 2:
        _broken_run("steady-runs.txt")
        assert False


def test_other():
    if os.path.exists("steady-runs.txt"):  # a broken tree: the steady test's runs so far
        with open("other-saw.txt", "w") as fh:
            fh.write(open("steady-runs.txt").read())
    time.sleep(SLOW_OTHER)
    assert other(1) == 2
'''

T = "tests/test_core.py::"


def _project(root: Path, slow: str) -> Path:
    tests = TESTS.replace(f"SLOW_{slow.upper()} = 0.0", f"SLOW_{slow.upper()} = 0.3")
    files = {"pyproject.toml": PYPROJECT.replace("calcpkg", "runspkg"), "runspkg/__init__.py": "",
             "runspkg/core.py": CORE, "tests/test_core.py": tests}
    commit_tree(root, files, "runs")
    return root


@pytest.mark.parametrize("slow", ["other", "steady"])
def test_the_whole_suite_run_is_one_of_the_k_broken_runs(
        shared_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        slow: str) -> None:
    """With ``test_other`` slow, the selection is under half the suite's time: it runs, then
    a repeat, then the whole suite (the third broken run). With a selected test slow, the
    selection is most of it, and the whole suite is the first broken run, two repeats after."""
    monkeypatch.setenv("SWEMILL_CACHE", str(shared_cache))
    env = build_env(resolve_source(str(_project(tmp_path / "runspkg", slow))))
    baseline = run_baseline(env)
    cand = Candidate(candidate_id="third", repo="runspkg", strategy="procedural",
                     bug_patch=file_diff("runspkg/core.py", CORE,
                                         CORE.replace("return x\n", "return x + 1\n", 1)),
                     changed=[ChangedSymbol(file="runspkg/core.py", qualname="third")])
    assert sorted(select_tests(cand, baseline) or []) == [T + "test_third",
                                                          T + "test_third_steady"]
    base = open_base(env, backend="auto", limits=Limits(timeout_s=120))
    worker = Worker(env, base, baseline.commit, prewarm_s=60)
    try:
        checked = check_candidate(CheckContext(baseline, baseline.commit, repeat=3), worker,
                                  cand)
        runs = {name: int((worker.root / name).read_text())
                for name in ("third-runs.txt", "steady-runs.txt", "other-saw.txt")}
    finally:
        worker.close()
        base.close()
    verdict = checked.verdict
    assert verdict.accepted, verdict
    assert checked.selected
    assert runs["third-runs.txt"] == runs["steady-runs.txt"] == 3  # k runs, the whole suite's
    assert runs["other-saw.txt"] == (3 if slow == "other" else 1)  # the whole suite's turn
    assert verdict.fail_to_pass == [T + "test_third_steady"]
    assert verdict.flaky == [T + "test_third"]  # it passed in the whole-suite run
    assert verdict.pass_to_pass == [T + "test_other"]  # run on the broken tree there only


LUCKY_TESTS = '''\
import os

from runspkg.core import other, third


''' + COUNTER + '''

def test_third():
    if third(1) != 1:
        assert _broken_run("third-runs.txt") >= 1


def test_third_steady():
    if third(2) != 2:
        assert False


def test_third_lucky():
    if third(3) != 3:
        assert _broken_run("lucky-runs.txt") < 2


def test_other():
    import time

    time.sleep(0.3)
    assert other(1) == 2
'''


def test_a_test_that_passed_by_luck_under_a_bug_that_makes_outcomes_random_is_not_p2p(
        shared_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``test_third`` fails in its first broken run only: the bug makes outcomes random.
    ``test_third_lucky`` runs the same code and passes its first two broken runs (the
    selection's and the whole suite's), failing from the third on: two passes were luck. Once
    one test is seen changing outcome, the passing tests that run the changed code run
    ``steady_runs`` more times, and the lucky one leaves PASS_TO_PASS (pyparsing 3.1.4: a
    test drawing random characters passed the two broken runs that ran it, and the cold
    audit failed it)."""
    monkeypatch.setenv("SWEMILL_CACHE", str(shared_cache))
    files = {"pyproject.toml": PYPROJECT.replace("calcpkg", "runspkg"), "runspkg/__init__.py": "",
             "runspkg/core.py": CORE, "tests/test_core.py": LUCKY_TESTS}
    commit_tree(tmp_path / "runspkg", files, "lucky")
    env = build_env(resolve_source(str(tmp_path / "runspkg")))
    baseline = run_baseline(env)
    cand = Candidate(candidate_id="lucky", repo="runspkg", strategy="procedural",
                     bug_patch=file_diff("runspkg/core.py", CORE,
                                         CORE.replace("return x\n", "return x + 1\n", 1)),
                     changed=[ChangedSymbol(file="runspkg/core.py", qualname="third")])
    assert sorted(select_tests(cand, baseline) or []) == [
        T + "test_third", T + "test_third_lucky", T + "test_third_steady"]
    base = open_base(env, backend="auto", limits=Limits(timeout_s=120))
    worker = Worker(env, base, baseline.commit, prewarm_s=60)
    ctx = CheckContext(baseline, baseline.commit, repeat=3)
    try:
        checked = check_candidate(ctx, worker, cand)
        lucky_runs = int((worker.root / "lucky-runs.txt").read_text())
    finally:
        worker.close()
        base.close()
    verdict = checked.verdict
    assert verdict.accepted, verdict
    assert verdict.fail_to_pass == [T + "test_third_steady"]
    assert verdict.flaky == [T + "test_third", T + "test_third_lucky"]
    assert verdict.pass_to_pass == [T + "test_other"]
    assert lucky_runs == 2 + ctx.steady_runs  # the selection, the whole suite, the steady runs
