"""Bad input: each case is a counted drop with its reason or one clear error; nothing crashes
the run and nothing half-written stays.

Regression classes: a candidate whose tests hang must end at its adaptive timeout; one that
kills the interpreter (``os._exit``, a segfault) must be a ``crashed`` drop and must not take
the worker down for the next candidate; a patch that no longer applies is counted; a shallow
clone gives pr-mirror nothing, and it says why.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from swemill.core.errors import EnvBuildError, GateRefused, SwemillError
from swemill.core.records import CandidateRecord, Golden, Task
from swemill.repo.envbuild import build_env
from swemill.repo.sources import resolve_source
from swemill.store import Store
from swemill.synth.patches import file_diff
from swemill.validate.tasks_config import TasksConfig
from swemill.validate.validator import run_tasks

from .conftest import (
    CALC,
    PYPROJECT,
    TESTS,
    bug_row,
    commit_tree,
    independent_audit,
    make_calc_repo,
    run_git,
)

pytestmark = [pytest.mark.slow, pytest.mark.network]

HOSTILE = {
    "good": "    return a - b",
    "hang": "    while True:\n        pass",
    "exit": "    import os\n    os._exit(3)",
    "segv": "    import ctypes\n    return ctypes.string_at(0)",
}


def test_hostile_candidates_are_counted_drops(tmp_path: Path) -> None:
    repo = tmp_path / "calc"
    make_calc_repo(repo)
    rows = [bug_row(name, body) for name, body in HOSTILE.items()]
    missing = bug_row("import", "    return a + b")  # a module-level import of nothing
    missing["patch"] = file_diff("calcpkg/calc.py", CALC, "import swemill_absent_dep\n" + CALC)
    rows.append(missing)
    stale = bug_row("stale", "    return b")
    stale["patch"] = str(stale["patch"]).replace(" def add(a, b):", " def add(x, y):")
    rows.append(stale)
    rows_file = tmp_path / "rows.jsonl"
    rows_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = Store(str(tmp_path / "out"))
    cfg = TasksConfig(strategies=["rows"], rows=rows_file, max_tasks=4, workers=2)
    result = run_tasks(str(repo), store, "h", cfg)

    y = result.yields["rows"]
    assert y.candidates == 5 and y.valid == 1 and result.tasks == 1
    assert y.drops == {"timeout": 1, "crashed": 2, "import_failed": 1}
    assert y.skipped == {"bug_patch_does_not_apply": 1}
    # every candidate is a row of candidates/, its drop explained in one line
    names = [*HOSTILE, "import"]  # the rows' order is the candidates' order
    by_name = {names[r.position]: r
               for r in store.read_records("candidates", "h", CandidateRecord)}
    assert {n: (r.verdict, r.reason) for n, r in by_name.items()} == {
        "good": ("written", "accepted"), "hang": ("dropped", "timeout"),
        "exit": ("dropped", "crashed"), "segv": ("dropped", "crashed"),
        "import": ("dropped", "import_failed")}
    assert by_name["import"].detail == ("tests/test_calc.py: ModuleNotFoundError: No module "
                                        "named 'swemill_absent_dep'")
    assert by_name["segv"].detail.startswith("killed by SIGSEGV")
    assert by_name["exit"].detail.startswith("exit 3 before pytest reported any test")
    assert "tests/test_calc.py::test_add" in by_name["hang"].detail
    assert all("\n" not in r.detail for r in by_name.values())
    assert result.drop_summary is not None and result.drop_summary.dropped == 4
    counts = store.read_manifest("h").counts["tasks.rows"]
    assert counts["dropped_crashed"] == 2 and counts["dropped_timeout"] == 1
    assert counts["skipped_bug_patch_does_not_apply"] == 1
    # the one good row survived the hostile ones on the same workers, and is real
    [task] = store.read_records("tasks", "h", Task)
    [golden] = store.read_records("golden", "h", Golden)
    assert task.FAIL_TO_PASS == ["tests/test_calc.py::test_add"]
    assert task.PASS_TO_PASS == ["tests/test_calc.py::test_mul"]
    env = build_env(resolve_source(str(repo)))
    assert independent_audit(store, task, golden, env) == ([], [])


def test_shallow_clone_gives_pr_mirror_nothing_and_says_so(tmp_path: Path) -> None:
    origin = tmp_path / "origin"
    make_calc_repo(origin)
    (origin / "calcpkg" / "calc.py").write_text("def add(a, b):\n    return a + b + 0\n\n\n"
                                                "def mul(a, b):\n    return a * b\n")
    run_git(origin, "commit", "-q", "-am", "second")
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{origin}", str(shallow)],
                   check=True, capture_output=True)
    store = Store(str(tmp_path / "out"))
    result = run_tasks(str(shallow), store, "p", TasksConfig(strategies=["pr-mirror"],
                                                             max_tasks=2, workers=1))
    assert result.tasks == 0 and result.candidates == 0
    assert "shallow clone" in (result.yields["pr-mirror"].note or "")
    assert not store.exists("tasks/run_id=p")  # nothing half-written that looks like tasks
    assert store.read_manifest("p").counts["tasks"]["out"] == 0


def test_no_tests_is_one_clear_error(tmp_path: Path) -> None:
    repo = tmp_path / "notests"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "__init__.py").write_text("def f():\n    return 1\n")
    with pytest.raises(EnvBuildError, match="no tests found"):
        run_tasks(str(repo), Store(str(tmp_path / "out")), "n", TasksConfig())


def test_a_repository_of_the_test_runner_is_refused_in_one_line(tmp_path: Path) -> None:
    # pluggy (or pytest itself): the grader would run the copy a policy edits
    repo = tmp_path / "pluggy"
    make_calc_repo(repo)
    (repo / "src" / "pluggy").mkdir(parents=True)
    (repo / "src" / "pluggy" / "__init__.py").write_text("def hookimpl():\n    pass\n")
    with pytest.raises(EnvBuildError) as info:
        run_tasks(str(repo), Store(str(tmp_path / "out")), "r", TasksConfig())
    assert len(str(info.value).splitlines()) == 1
    assert "the test runner's own code (src/pluggy)" in str(info.value)
    assert not any((tmp_path / "out").rglob("*.parquet"))


def test_a_repository_that_ships_a_pytest_plugin_is_refused_in_one_line(
        tmp_path: Path) -> None:
    # every run loads the plugin, and its hooks get pytest's config, items and reports: an
    # edit inside one registered a report-rewriting hook on pytest-mock 3.14.0, unflagged
    repo = tmp_path / "calcplug"
    commit_tree(repo, {
        "pyproject.toml": PYPROJECT.replace('packages = ["calcpkg"]\n', 'packages = ["calcpkg"]\n'
                                            '[project.entry-points.pytest11]\n'
                                            'calcplug = "calcpkg.plugin"\n'),
        "calcpkg/__init__.py": "", "calcpkg/calc.py": CALC,
        "calcpkg/plugin.py": "def pytest_configure(config):\n    pass\n",
        "tests/test_calc.py": TESTS}, "plugin")
    with pytest.raises(EnvBuildError) as info:
        run_tasks(str(repo), Store(str(tmp_path / "out")), "p", TasksConfig())
    assert len(str(info.value).splitlines()) == 1
    assert "ships a pytest plugin that every test run loads (calcplug (calcpkg/plugin.py))" \
        in str(info.value)
    assert not any((tmp_path / "out").rglob("*.parquet"))


def test_a_bug_in_a_module_the_conftest_loads_as_a_plugin_is_a_counted_drop(
        tmp_path: Path) -> None:
    # the grader never takes a change to such a module (its hooks run in every grading), so a
    # task whose fix is there could never be solved
    repo = tmp_path / "calcplugins"
    commit_tree(repo, {"pyproject.toml": PYPROJECT, "calcpkg/__init__.py": "",
                       "calcpkg/calc.py": CALC, "tests/test_calc.py": TESTS,
                       "conftest.py": "pytest_plugins = ['calcpkg.calc']\n"}, "plugins")
    store = Store(str(tmp_path / "out"))
    result = run_tasks(str(repo), store, "pl", TasksConfig(strategies=["procedural"],
                                                           max_tasks=2, workers=1, audit=0))
    drops = result.yields["procedural"].drops
    assert result.tasks == 0 and drops.get("runner_plugin", 0) == result.candidates > 0, drops
    rows = store.read_records("candidates", "pl", CandidateRecord)
    assert rows and all(r.reason == "runner_plugin" and r.detail.startswith("calcpkg/calc.py")
                        for r in rows)


def test_a_suite_the_grader_cannot_trust_leaves_no_task(tmp_path: Path) -> None:
    # test_mul is made in the test file from code another file defined: the grader's guard
    # cannot tell that from a swap, so no policy could be rewarded on these tasks; validation
    # runs are not guarded, and the audit's grading run of the fixed tree removes them
    repo = tmp_path / "calcmade"
    commit_tree(repo, {
        "pyproject.toml": PYPROJECT, "calcpkg/__init__.py": "", "calcpkg/calc.py": CALC,
        "tests/shared.py": "def check_mul():\n    assert mul(2, 3) == 6\n",
        "tests/test_calc.py": (
            "import types\n\nimport shared\nfrom calcpkg.calc import add, mul\n\n\n"
            "def test_add():\n    assert add(1, 2) == 3\n\n\n"
            "test_mul = types.FunctionType(shared.check_mul.__code__, globals(), 'test_mul')\n")},
        "made")
    store = Store(str(tmp_path / "out"))
    result = run_tasks(str(repo), store, "m", TasksConfig(strategies=["procedural"],
                                                          max_tasks=2, workers=1))
    assert result.audited >= 1 and result.tasks == 0, result.audit_rejected
    assert all("graded fixed run cannot be trusted" in why and "runs code its file did not "
               "define" in why for why in result.audit_rejected.values()), result.audit_rejected


def test_no_python_code_is_one_clear_error(tmp_path: Path) -> None:
    repo = tmp_path / "docs-only"
    repo.mkdir()
    (repo / "README.md").write_text("just words\n")
    with pytest.raises(SwemillError) as info:
        run_tasks(str(repo), Store(str(tmp_path / "out")), "n", TasksConfig())
    assert len(str(info.value).splitlines()[0]) > 10
    assert not (tmp_path / "out" / "tasks").exists()


def test_contaminated_source_is_refused_before_anything_runs(tmp_path: Path) -> None:
    repo = tmp_path / "flask"
    make_calc_repo(repo)
    run_git(repo, "remote", "add", "origin", "https://github.com/pallets/flask.git")
    with pytest.raises(GateRefused, match="refused"):
        run_tasks(str(repo), Store(str(tmp_path / "out")), "c", TasksConfig())
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.parquet"))
