"""Validated tasks of the bundled sample repository, built once per session by the validator.

``run_tasks('sample', ...)`` is the real tasks stage: it builds the environment, runs the
baseline, synthesizes candidates (procedural, pr-mirror, combine), validates them with the
four gates and writes tasks, goldens and scrubbed snapshots into a store on disk. Tests copy
that store before writing rollouts into it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from swemill.agent.env import EnvConfig
from swemill.agent.rollout import RolloutConfig
from swemill.core.records import Golden, Task
from swemill.store import Store

RUN_ID = "agent-tasks"
N_TASKS = 3


@dataclass
class SampleTasks:
    root: Path
    run_id: str
    tasks: list[Task]
    goldens: dict[str, Golden]
    cache: Path

    @property
    def store(self) -> Store:
        return Store.open(str(self.root), check=False)

    def env_config(self, **kw: object) -> EnvConfig:
        return EnvConfig(cache=self.cache, **kw)  # type: ignore[arg-type]

    def config(self, policy: str, **kw: object) -> RolloutConfig:
        return RolloutConfig(policy=policy, cache=str(self.cache), **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def sample_tasks(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path) -> SampleTasks:
    from swemill.validate.tasks_config import TasksConfig
    from swemill.validate.validator import run_tasks

    root = tmp_path_factory.mktemp("agent-store")
    store = Store.open(str(root))
    old = os.environ.get("SWEMILL_CACHE")
    os.environ["SWEMILL_CACHE"] = str(shared_cache)  # run_tasks reads the cache from here
    try:
        run_tasks("sample", store, RUN_ID, TasksConfig(max_tasks=N_TASKS, workers=2, audit=0))
    finally:
        if old is None:
            os.environ.pop("SWEMILL_CACHE", None)
        else:
            os.environ["SWEMILL_CACHE"] = old
    tasks = sorted(store.read_records("tasks", RUN_ID, Task), key=lambda t: t.instance_id)
    goldens = {g.instance_id: g for g in store.read_records("golden", RUN_ID, Golden)}
    assert len(tasks) >= 3, "the validator should find several tasks in the sample"
    return SampleTasks(root, RUN_ID, tasks, goldens, shared_cache)


@pytest.fixture
def fresh_store(sample_tasks: SampleTasks, tmp_path: Path) -> Iterator[Store]:
    """A private copy of the task store that a test may write its rollouts into."""
    root = tmp_path / "store"
    shutil.copytree(sample_tasks.root, root)
    yield Store.open(str(root))


@pytest.fixture
def task(sample_tasks: SampleTasks) -> Task:
    """A task with a single-file golden patch (a procedural bug)."""
    return next(t for t in sample_tasks.tasks if t.strategy == "procedural")
