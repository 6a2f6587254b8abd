"""A test that does not pass on the unbroken tree in one candidate's golden run, or in the
audit's runs of a fixed tree that is the head's, is flaky for the whole run: out of that
candidate's lists (which still stand), and out of every task's PASS_TO_PASS, including the
tasks that passed it on their own broken trees.

``headpkg``'s ``test_fickle`` passes in the baseline's cold runs and on every broken tree, and
fails only when it runs the head tree in a warm validation run: as apscheduler 3.10.4's
``test_broken_pool`` (a 3 s wait for a process pool to restart) failed in one golden run of
the head tree and was kept in PASS_TO_PASS of four tasks, graded against correct fixes (in
another run it failed the audit's graded run of one task: that task was removed, and the four
others kept it).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from swemill.core.records import CandidateRecord, Task
from swemill.repo.envbuild import build_env
from swemill.repo.sources import resolve_source
from swemill.store import Store
from swemill.validate.tasks_config import TasksResult
from swemill.validate.validator import TasksConfig, run_tasks

from .conftest import PYPROJECT, commit_tree

pytestmark = pytest.mark.slow

CORE = '''\
def add(a, b):
    return a + b


def mul(a, b):
    return a * b


def neg(a):
    return -a
'''

PLAIN = '''\
import hashlib
import os
import sys

from headpkg import core


def test_add():
    assert core.add(2, 3) == 5


def test_mul():
    assert core.mul(2, 3) == 6


def test_neg():
    assert core.neg(2) == -2
'''

TESTS = PLAIN + '''

def test_fickle():
    assert core.add(1, 1) == 2
    with open(core.__file__, "rb") as fh:
        here = hashlib.sha256(fh.read()).hexdigest()
    # the head tree, in a fork of a warm validation server: never in the baseline's runs
    assert not (here == "HEAD" and "swemill_inside" in sys.modules)
'''

T = "tests/test_core.py::"


def _tasks(shared_cache: Path, tmp_path: Path, tests: str, run_id: str,
           config: TasksConfig) -> tuple[Store, TasksResult]:
    """``headpkg`` with ``tests`` (its ``"HEAD"`` the head's ``core.py`` digest), validated."""
    root = tmp_path / "headpkg"
    head = hashlib.sha256(CORE.encode()).hexdigest()
    commit_tree(root, {"pyproject.toml": PYPROJECT.replace("calcpkg", "headpkg"),
                       "headpkg/__init__.py": "", "headpkg/core.py": CORE,
                       "tests/test_core.py": tests.replace('"HEAD"', repr(head))}, "head")
    store = Store(str(tmp_path / "store"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SWEMILL_CACHE", str(shared_cache))
        build_env(resolve_source(str(root)))
        return store, run_tasks(str(root), store, run_id, config)


def test_a_test_that_fails_on_the_head_tree_leaves_every_list(
        shared_cache: Path, tmp_path: Path) -> None:
    store, result = _tasks(shared_cache, tmp_path, TESTS, "h", TasksConfig(
        strategies=["procedural"], max_tasks=6, workers=1, seed=0, audit=0))
    assert result.head_flaky == [T + "test_fickle"], result.to_dict()
    tasks = store.read_records("tasks", "h", Task)
    assert tasks
    for task in tasks:
        assert T + "test_fickle" not in task.FAIL_TO_PASS + task.PASS_TO_PASS, task
        assert task.n_pass_to_pass == len(task.PASS_TO_PASS)
    rows = store.read_records("candidates", "h", CandidateRecord)
    # a mutant of add() was accepted on test_add, test_fickle out of its lists ...
    assert any(r.symbol == "add" and r.verdict == "written" for r in rows), rows
    # ... and a mutant elsewhere, whose broken tree passed test_fickle, lost it from its
    # PASS_TO_PASS after the run
    others = [t for t in tasks if T + "test_add" in t.PASS_TO_PASS]
    assert others, [(t.FAIL_TO_PASS, t.PASS_TO_PASS) for t in tasks]


AUDITED = PLAIN + '''

def test_fickle():
    with open(core.__file__, "rb") as fh:
        here = hashlib.sha256(fh.read()).hexdigest()
    # the head tree, run as the grader runs it: only the audit's graded run of a fixed tree
    assert not (here == "HEAD" and os.environ.get("SWEMILL_GUARD"))
'''


def test_a_test_the_audit_saw_fail_on_the_head_tree_leaves_every_list_not_one_task(
        shared_cache: Path, tmp_path: Path) -> None:
    store, result = _tasks(shared_cache, tmp_path, AUDITED, "a", TasksConfig(
        strategies=["procedural"], max_tasks=4, workers=1, seed=0))
    assert result.audited >= 1 and result.audit_rejected == {}, result.to_dict()
    assert result.head_flaky == [T + "test_fickle"], result.to_dict()
    tasks = store.read_records("tasks", "a", Task)
    assert tasks and len(tasks) == result.tasks
    for task in tasks:
        assert T + "test_fickle" not in task.PASS_TO_PASS + task.FAIL_TO_PASS, task
        assert task.n_pass_to_pass == len(task.PASS_TO_PASS) > 0
