"""A bug that stops one test module from collecting, while the rest of the suite runs, is a
task: the module's tests are FAIL_TO_PASS (they do not pass on the broken tree, and a grader
sees them not pass), not a reason to drop the candidate as a tree that does not import.

Regression class: attrs 24.2.0's ``_determine_attrs_eq_order`` under a changed constant makes
``tests/test_dunders.py`` fail at import (it builds ordered classes there); every such
candidate was dropped as ``import_failed``, and a validator without that rule accepted it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swemill.core.records import CandidateRecord, Golden, Task
from swemill.repo.envbuild import build_env
from swemill.repo.sources import resolve_source
from swemill.store import Store
from swemill.validate.tasks_config import TasksConfig
from swemill.validate.validator import run_tasks

from .conftest import CALC, PYPROJECT, TESTS, bug_row, commit_tree, independent_audit

pytestmark = [pytest.mark.slow, pytest.mark.network]

TABLE_TESTS = '''\
from calcpkg.calc import add

TABLE = [add(1, 1), add(2, 3)]  # built at import: a broken add() stops the module here


def test_table():
    assert TABLE == [2, 5]


class TestZero:
    def test_zero(self):
        assert add(0, 0) == 0
'''


def test_a_module_that_stops_collecting_under_the_bug_is_fail_to_pass(tmp_path: Path) -> None:
    repo = tmp_path / "calc"
    commit_tree(repo, {"pyproject.toml": PYPROJECT, "calcpkg/__init__.py": "",
                       "calcpkg/calc.py": CALC, "tests/test_calc.py": TESTS,
                       "tests/test_table.py": TABLE_TESTS}, "calc")
    rows = [bug_row("raise", "    raise ValueError('add is out of order')"),
            bug_row("absent", "    import swemill_absent_dep\n    return a + b")]
    rows_file = tmp_path / "rows.jsonl"
    rows_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = Store(str(tmp_path / "out"))
    result = run_tasks(str(repo), store, "c", TasksConfig(strategies=["rows"], rows=rows_file,
                                                          max_tasks=2, workers=1))
    rows_of = {r.position: r for r in store.read_records("candidates", "c", CandidateRecord)}
    assert result.tasks == 2, {k: (r.reason, r.detail) for k, r in rows_of.items()}
    tasks = {t.instance_id: t for t in store.read_records("tasks", "c", Task)}
    goldens = {g.instance_id: g for g in store.read_records("golden", "c", Golden)}
    failing = ["tests/test_calc.py::test_add", "tests/test_table.py::TestZero::test_zero",
               "tests/test_table.py::test_table"]
    raised, absent = (tasks[rows_of[i].instance_id] for i in (0, 1))  # the rows' order
    assert failing == raised.FAIL_TO_PASS
    assert raised.PASS_TO_PASS == ["tests/test_calc.py::test_mul"]
    # the import inside add() fails only when add() runs: at the table's import, and in test_add
    assert absent.FAIL_TO_PASS == raised.FAIL_TO_PASS
    # what the problem statement quotes for a module's tests is what the module said
    assert "add is out of order" in raised.problem_statement
    env = build_env(resolve_source(str(repo)))
    for task in tasks.values():  # a cold whole-suite run by hand agrees with both lists
        assert independent_audit(store, task, goldens[task.instance_id], env) == ([], [])
