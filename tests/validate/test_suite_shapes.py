"""Suites with unusual pytest configurations run unchanged (issue 14, harness robustness).

Regression classes, all in one small project (:mod:`.shapes`):

- ``filterwarnings = error`` turned pytest's "already imported so cannot be rewritten"
  warning about a plugin the warm server had imported (swemill's reporter, the project's own
  ``pytest11`` plugin) into exit 4: every candidate "crashed";
- ``-p tests.helpers.plugin`` in ``addopts`` was dropped, and the warm server did not put the
  working directory on ``sys.path`` as ``python -m pytest`` does: the plugin's ini option
  failed ``--strict-config`` and its fixture was missing;
- a module that failed to collect at baseline (an optional test dependency not installed)
  made every full-suite candidate ``import_failed``;
- an edit to a module the warm server imported before forking (through the project's own
  ``pytest11`` entry point, in this project until such projects were refused; pluggy through
  pytest itself) was invisible to every fork: such a tree now runs in a fresh interpreter.

Every task written is re-checked by a cold full-suite run (:func:`.conftest.independent_audit`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from swemill.core.records import Golden, Task
from swemill.repo.envbuild import build_env
from swemill.repo.sources import resolve_source
from swemill.store import Store
from swemill.suite.baseline import load_baseline
from swemill.validate.tasks_config import TasksConfig
from swemill.validate.validator import run_tasks

from .conftest import independent_audit
from .shapes import make_shapes_repo

pytestmark = [pytest.mark.slow, pytest.mark.network]

PASSING = {
    "tests/test_geometry.py::test_square", "tests/test_geometry.py::test_rectangle",
    "tests/test_geometry.py::test_perimeter",
    "tests/test_circle_unit.py::CircleTest::test_area",
    "tests/test_circle_unit.py::CircleTest::test_diameter",
    "src/shapes/geometry.py::shapes.geometry.square_area",
    "src/shapes/geometry.py::shapes.geometry.perimeter",
    "src/shapes/circle.py::shapes.circle.diameter",
}


def test_an_unusually_configured_suite_yields_true_tasks(tmp_path: Path) -> None:
    repo = tmp_path / "shapes"
    make_shapes_repo(repo)
    store = Store(str(tmp_path / "out"))
    cfg = TasksConfig(strategies=["procedural"], max_tasks=5, workers=1)
    result = run_tasks(str(repo), store, "s", cfg)

    env = build_env(resolve_source(str(repo)))
    baseline = load_baseline(env)
    assert baseline is not None
    # unittest, doctests, the -p plugin's fixtures and ini option
    assert baseline.passing() == PASSING
    assert sorted(baseline.collect_errors) == ["tests/extra", "tests/test_optional.py"]
    assert "shapes_optional_dependency" in baseline.collect_errors["tests/test_optional.py"]
    assert not any(t.startswith(("tests/extra", "tests/test_optional")) for t in
                   baseline.outcomes)

    y = result.yields["procedural"]
    assert not {"crashed", "import_failed", "untrusted_log"} & set(y.drops), y.drops
    assert result.tasks >= 4, (y.drops, result.head_image)
    # the image served body edits; the -p plugin (and geometry.py, which it imports) is not
    # preloaded by the warm server, so its edits need no fresh interpreter
    assert result.head_image["served"], result.head_image

    tasks = store.read_records("tasks", "s", Task)
    goldens = {g.instance_id: g for g in store.read_records("golden", "s", Golden)}
    edited = {p.split(" b/")[-1] for g in goldens.values()
              for p in g.golden_patch.splitlines() if p.startswith("diff --git")}
    assert "src/shapes/geometry.py" in edited and "src/shapes/circle.py" in edited
    for task in tasks:
        assert set(task.FAIL_TO_PASS) | set(task.PASS_TO_PASS) <= PASSING
        assert independent_audit(store, task, goldens[task.instance_id], env) == ([], [])
