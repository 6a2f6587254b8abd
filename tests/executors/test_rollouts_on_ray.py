"""``swemill rollout --executor ray`` (one Ray task per shard) writes the rollouts the local
worker threads write: the same trajectories (ids, outcomes, grades, tool calls), the same
preference pairs and the same counts. Scripted policies, so no model and no key."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from swemill.agent.rollout import run_rollouts
from swemill.agent.rollout_config import RolloutConfig
from swemill.core.errors import ConfigError
from swemill.store import Store
from swemill.validate.tasks_config import TasksConfig
from swemill.validate.validator import run_tasks

pytest.importorskip("ray")
pytestmark = [pytest.mark.slow, pytest.mark.network]


def test_ray_rollouts_equal_local(tmp_path: Path, shared_cache: Path,
                                  monkeypatch: pytest.MonkeyPatch,
                                  same_rollouts: Any) -> None:
    monkeypatch.setenv("SWEMILL_CACHE", str(shared_cache))
    local = Store(str(tmp_path / "local"))
    run_tasks("sample", local, "t1", TasksConfig(max_tasks=2, workers=2, seed=0,
                                                 strategies=["procedural"], audit=0))
    shutil.copytree(tmp_path / "local", tmp_path / "ray")
    on_ray = Store(str(tmp_path / "ray"))
    config = RolloutConfig(policy="oracle,noisy-oracle:0.5", samples=2, workers=2)
    want = run_rollouts(local, "t1", config, run_id="ro")
    got = run_rollouts(on_ray, "t1", config.model_copy(update={"executor": "ray"}),
                       run_id="ro")
    same_rollouts(local, want, on_ray, got, "ro")


def test_unknown_executor_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match="rollouts cannot run on executor 'k8s'"):
        RolloutConfig(policy="oracle", executor="k8s").check()
