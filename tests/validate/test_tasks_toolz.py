"""Acceptance on a real PyPI sdist (toolz 1.0.0): procedural and combine yield tasks, pr-mirror
says why it cannot (an sdist has one commit) and procedural takes its share, and an
independent cold full-suite audit of every task finds no false FAIL_TO_PASS / PASS_TO_PASS
claim."""

from __future__ import annotations

from pathlib import Path

import pytest

from swemill.core.records import Golden, Task
from swemill.repo.envbuild import build_env
from swemill.repo.sources import resolve_source
from swemill.store import Store
from swemill.validate.tasks_config import TasksConfig
from swemill.validate.validator import run_tasks

from .conftest import independent_audit

pytestmark = [pytest.mark.slow, pytest.mark.network]


def test_toolz_tasks_survive_an_independent_audit(shared_cache: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEMILL_CACHE", str(shared_cache))
    store = Store(str(tmp_path / "out"))
    cfg = TasksConfig(max_tasks=4, workers=2, seed=0, combine_feed=8, audit=0)
    result = run_tasks("pypi:toolz==1.0.0", store, "t", cfg)
    assert result.yields["pr-mirror"].tasks == 0
    assert "single-commit" in (result.yields["pr-mirror"].note or "")
    # pr-mirror's share (1 of 4) goes to procedural: the run still writes the 4 asked for
    assert result.yields["procedural"].tasks == 3
    assert result.yields["combine"].tasks >= 1
    assert result.tasks == 4
    assert result.license_tier == "redistributable"
    env = build_env(resolve_source("pypi:toolz==1.0.0"))
    goldens = {g.instance_id: g for g in store.read_records("golden", "t", Golden)}
    tasks = store.read_records("tasks", "t", Task)
    assert len(tasks) == result.tasks
    for task in tasks:
        assert independent_audit(store, task, goldens[task.instance_id], env) == ([], [])
