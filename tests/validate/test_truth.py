"""Truth of the lists on one small project built to mislead a shortcut-taking validator.

``truthpkg`` has a function whose result is cached in the test process (only the first test
that asks runs it: the coverage map cannot see that the second one depends on it, as with
jmespath's parse cache), a test that runs the package in a subprocess (coverage never sees that
code), a table computed at import (every test may use it), and a test that, on a broken tree,
fails only every other run. The tasks run with the default audit, which finds nothing to remove:
no PASS_TO_PASS entry is written that did not pass in a run of the broken tree, and what is
written survives an independent full-suite audit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from swemill.core.records import Candidate, CandidateRecord, Golden, Task
from swemill.repo.envbuild import build_env
from swemill.repo.sources import resolve_source
from swemill.sandbox import Limits
from swemill.store import Store
from swemill.suite.baseline import run_baseline
from swemill.synth.patches import file_diff
from swemill.validate.audit import audit_task
from swemill.validate.check import CheckContext, check_candidate
from swemill.validate.validator import TasksConfig, run_tasks
from swemill.validate.worker import Worker, open_base

from .conftest import PYPROJECT, commit_tree, independent_audit

pytestmark = pytest.mark.slow

CORE = '''\
_cache = {}


def compute(name):
    return name * 2


def get(name):
    if name not in _cache:
        _cache[name] = compute(name)
    return _cache[name]


def scale(x):
    return x * 2


def _build_table():
    return {"a": 1, "b": 2}


TABLE = _build_table()


def flip(x):
    return 0 - x
'''

MAIN = '''\
import sys

from truthpkg.core import scale

print(scale(int(sys.argv[1])))
'''

TESTS = '''\
import os
import subprocess
import sys

from truthpkg.core import TABLE, _build_table, flip, get, scale


def test_get_first():
    assert get("x") == "xx"


def test_get_again():
    assert get("x") == "xx"


def test_scale():
    assert scale(2) == 4


def test_scale_cli():
    out = subprocess.run([sys.executable, "-m", "truthpkg", "3"], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "6"


def test_table():
    assert _build_table()["b"] == 2


def test_table_at_import():
    assert TABLE["a"] == 1


def test_flip_every_other_run():
    n = int(open("flip-runs.txt").read()) if os.path.exists("flip-runs.txt") else 0
    with open("flip-runs.txt", "w") as fh:
        fh.write(str(n + 1))
    assert flip(1) == -1 or n % 2 == 1
'''

T = "tests/test_core.py::"


def _project(root: Path) -> Path:
    files = {"pyproject.toml": PYPROJECT.replace("calcpkg", "truthpkg"),
             "truthpkg/__init__.py": "", "truthpkg/core.py": CORE,
             "truthpkg/__main__.py": MAIN, "tests/test_core.py": TESTS}
    commit_tree(root, files, "truth")
    return root


@pytest.fixture(scope="module")
def truth_run(shared_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = _project(tmp_path_factory.mktemp("truth") / "truthpkg")
    store = Store(str(tmp_path_factory.mktemp("store")))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SWEMILL_CACHE", str(shared_cache))
        env = build_env(resolve_source(str(root)))
        baseline = run_baseline(env)
        config = TasksConfig(strategies=["procedural"], max_tasks=8, workers=2, seed=0)
        result = run_tasks(str(root), store, "t", config)
    return {"store": store, "env": env, "baseline": baseline, "result": result}


def test_baseline_knows_what_coverage_cannot_see(truth_run: dict[str, Any]) -> None:
    baseline = truth_run["baseline"]
    assert baseline.uncovered == [T + "test_scale_cli"]
    assert "truthpkg/core.py::_build_table" in baseline.shared
    assert baseline.coverage["truthpkg/core.py::compute"] == [T + "test_get_first"]


def test_a_test_the_map_missed_through_a_cache_is_seen_on_the_whole_suite(
        truth_run: dict[str, Any]) -> None:
    store, result, env = truth_run["store"], truth_run["result"], truth_run["env"]
    assert result.audit_rejected == {}
    tasks = {t.instance_id: t for t in store.read_records("tasks", "t", Task)}
    assert result.audited == len(tasks) == result.tasks
    manifest = json.loads(Path(store.path("manifests/run_id=t.json")).read_text())
    assert manifest["counts"]["tasks"].get("audit_rejected", 0) == 0
    rows = [r for r in store.read_records("candidates", "t", CandidateRecord)
            if r.symbol == "compute" and r.verdict == "written"]
    assert rows, "a mutant of compute() breaks test_get_again through the cache"
    for row in rows:  # the selection ran test_get_first only; the whole suite showed more
        task = tasks[row.instance_id]
        assert not row.selected_tests and not task.metadata["selected_tests"]
        assert row.detail.startswith("judged on the whole suite: ")
        assert "test_get_again" in row.detail
        assert {T + "test_get_first", T + "test_get_again"} <= set(task.FAIL_TO_PASS)
    # the lists a validator that inherits unselected tests wrote: the audit catches them
    task = tasks[rows[0].instance_id]
    golden = next(g for g in store.read_records("golden", "t", Golden)
                  if g.instance_id == task.instance_id)
    forged = task.model_copy(update={
        "FAIL_TO_PASS": [t for t in task.FAIL_TO_PASS if t != T + "test_get_again"],
        "PASS_TO_PASS": sorted([*task.PASS_TO_PASS, T + "test_get_again"])})
    finding = audit_task(store, forged, golden, env, truth_run["baseline"])
    assert (finding.false_f2p, finding.false_p2p) == ([], [T + "test_get_again"])


def test_what_is_left_is_true_and_carries_its_grading_quality(
        truth_run: dict[str, Any]) -> None:
    store, env = truth_run["store"], truth_run["env"]
    tasks = store.read_records("tasks", "t", Task)
    goldens = {g.instance_id: g for g in store.read_records("golden", "t", Golden)}
    assert tasks
    kinds = set()
    for task in tasks:
        assert independent_audit(store, task, goldens[task.instance_id], env) == ([], [])
        assert (task.n_fail_to_pass, task.n_pass_to_pass) == (len(task.FAIL_TO_PASS),
                                                              len(task.PASS_TO_PASS))
        assert (task.near_miss_caught is None) == (task.near_miss_tried == 0)
        lists = task.FAIL_TO_PASS + task.PASS_TO_PASS
        bug = goldens[task.instance_id].bug_patch
        if "0 - x" in bug:
            assert T + "test_flip_every_other_run" not in lists
        if "x * 2" in bug:
            kinds.add("scale")
            assert T + "test_scale_cli" in task.FAIL_TO_PASS  # run, though no map shows it
        if '"a": 1' in bug:
            kinds.add("table")
            assert not task.metadata["selected_tests"]  # the whole suite ran
            assert T + "test_table_at_import" in task.FAIL_TO_PASS
    assert kinds == {"scale", "table"}
    assert any(t.near_miss_tried for t in tasks)
    result = truth_run["result"]
    assert result.drops.get("flaky", 0) + sum(
        1 for t in tasks if t.flake_rate > 0) >= 1, result.drops


def test_near_misses_are_caught_by_either_list_and_an_equivalent_one_is_not(
        truth_run: dict[str, Any]) -> None:
    """One run per variant, FAIL_TO_PASS first, stopping at the first failure: a variant that
    only a PASS_TO_PASS test catches counts as caught, as does one FAIL_TO_PASS catches; a
    variant that behaves like the original does not."""
    env, baseline = truth_run["env"], truth_run["baseline"]

    def patch(old: str, new: str) -> str:
        return file_diff("truthpkg/core.py", CORE, CORE.replace(old, new))

    variants = [patch("return name * 2", "return name * 3"),  # get/compute: P2P only
                patch("return x * 2", "return x + x + 1"),  # scale: F2P
                patch("return x * 2", "return 2 * x")]  # the same function
    cand = Candidate(candidate_id="nm", repo="truthpkg", strategy="procedural",
                     bug_patch=patch("return x * 2", "return x * 3"), scope="module",
                     metadata={"near_miss": variants})
    ctx = CheckContext(baseline, baseline.commit, near_misses=3)
    base = open_base(env, backend="auto", limits=Limits(timeout_s=120))
    worker = Worker(env, base, baseline.commit, prewarm_s=60)
    try:
        checked = check_candidate(ctx, worker, cand)
    finally:
        worker.close()
        base.close()
    assert checked.verdict.accepted, checked.verdict
    assert T + "test_scale" in checked.verdict.fail_to_pass
    assert T + "test_get_first" in checked.verdict.pass_to_pass
    assert checked.near_miss == (3, 2)
