"""Tests whose ids hold the clock time (marshmallow 3.22.0 parametrizes one by
``datetime.now()``): each run's id is new, so such an id is in no baseline run but the one that
made it. It must never enter FAIL_TO_PASS or PASS_TO_PASS (it cannot recur), and it must not make
a candidate flaky or crash it: the other tests of the project still give their tasks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from swemill.core.records import CandidateRecord, Task
from swemill.repo.envbuild import build_env
from swemill.repo.sources import resolve_source
from swemill.store import Store
from swemill.suite.baseline import run_baseline
from swemill.validate.shadow import Shadow
from swemill.validate.validator import TasksConfig, run_tasks
from swemill.validate.warm import WarmResult

from .conftest import PYPROJECT, commit_tree

pytestmark = pytest.mark.slow

CORE = '''\
def double(x):
    return x * 2


def shout(s):
    return s.upper() + "!"
'''

TESTS = '''\
import datetime

import pytest

from clockpkg.core import double, shout

NOW = datetime.datetime.now().strftime("%H:%M:%S.%f")


@pytest.mark.parametrize("stamp", [NOW])
def test_double_at(stamp):
    assert double(3) == 6


def test_double():
    assert double(2) == 4


def test_shout():
    assert shout("a") == "A!"
'''


CONFTEST = '''\
from clockpkg.core import shout

GREETING = shout("hi")  # run at import: a broken shout() may stop pytest before any test
'''


def _project(root: Path) -> Path:
    files = {"pyproject.toml": PYPROJECT.replace("calcpkg", "clockpkg"),
             "clockpkg/__init__.py": "", "clockpkg/core.py": CORE,
             "tests/conftest.py": CONFTEST, "tests/test_core.py": TESTS}
    commit_tree(root, files, "clock")
    return root


def test_clock_time_ids_are_in_no_list_and_drop_nothing(
        shared_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path / "clockpkg")
    store = Store(str(tmp_path / "store"))
    monkeypatch.setenv("SWEMILL_CACHE", str(shared_cache))
    env = build_env(resolve_source(str(root)))
    baseline = run_baseline(env)
    stamped = [t for t in baseline.outcomes if "test_double_at[" in t]
    assert stamped and not set(stamped) & baseline.passing()
    config = TasksConfig(strategies=["procedural"], max_tasks=12, workers=1, seed=0)
    result = run_tasks(str(root), store, "t", config)
    rows = store.read_records("candidates", "t", CandidateRecord)
    doubles = [r for r in rows if r.symbol == "double"]
    assert doubles
    bad = [(r.verdict, r.reason, r.detail) for r in doubles
           if r.reason in ("crashed", "flaky", "import_failed")]
    assert not bad, bad
    # a shout() that raises stops pytest at loading the conftest (exit 4, no test run): the
    # broken tree does not import, which is no crash of the harness
    shouts = [r for r in rows if r.symbol == "shout"]
    assert shouts and not [r.detail for r in shouts if r.reason == "crashed"]
    assert any(r.reason == "import_failed" for r in shouts), [(r.reason, r.detail) for r in shouts]
    tasks = store.read_records("tasks", "t", Task)
    assert any("test_double" in " ".join(t.FAIL_TO_PASS) for t in tasks), result.drops
    for task in tasks:
        assert not any("test_double_at[" in t for t in task.FAIL_TO_PASS + task.PASS_TO_PASS)
        assert task.flake_rate == 0.0, task.instance_id
    # the head image collected the stamped test at its start, an ordinary run at its own: the
    # shadow check saw two ids for one test, not a disagreement, and kept the image on
    assert result.shadow_checks >= 1
    assert result.shadow_mismatches == 0, result.shadow_details


def test_a_renamed_id_is_no_shadow_mismatch_but_a_lost_test_is() -> None:
    t = "tests/test_m.py::test_at"
    served = WarmResult(0, False, {f"{t}[09:57:23]": "passed", "tests/test_m.py::test_x": "passed"})
    same = WarmResult(0, False, {f"{t}[09:57:24]": "passed", "tests/test_m.py::test_x": "passed"})
    asked = [*served.outcomes, *same.outcomes]
    assert Shadow(every=1).compare(asked, served, same)
    failed = WarmResult(1, False, {f"{t}[09:57:24]": "failed", "tests/test_m.py::test_x": "passed"})
    assert not Shadow(every=1).compare([*served.outcomes, *failed.outcomes], served, failed)
    lost = WarmResult(0, False, {"tests/test_m.py::test_x": "passed"})
    assert not Shadow(every=1).compare([*served.outcomes], served, lost)
