"""Shared fixtures. Tests use the package's shipped fakes, never patches of its own code."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory,
                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own swemill cache unless it asks for the shared session one."""
    if os.environ.get("SWEMILL_TEST_SHARED_CACHE"):
        return
    monkeypatch.setenv("SWEMILL_CACHE", str(tmp_path_factory.mktemp("swemill-cache")))


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache shared by the whole session (environments are slow to build)."""
    return tmp_path_factory.mktemp("swemill-shared-cache")


def _rollout_summary(store: Any, run_id: str) -> tuple[list[Any], list[Any]]:
    from swemill.core.records import PreferencePair, Trajectory

    trajs = sorted(
        (t.trajectory_id, t.outcome.resolved if t.outcome else None,
         t.outcome.grade if t.outcome else None, t.admission,
         [c.name for m in t.messages for c in m.tool_calls])
        for t in store.read_records("trajectories", run_id, Trajectory))
    pairs = sorted((p.pair_id, p.chosen_score, p.rejected_score)
                   for p in store.read_records("pairs", run_id, PreferencePair))
    return trajs, pairs


def _same_rollouts(local: Any, want: Any, other: Any, got: Any, run_id: str) -> None:
    assert want.trajectories == 4 and want.pairs >= 1
    assert (got.trajectories, got.pairs, got.shards_written) == (
        want.trajectories, want.pairs, want.shards_written)
    assert _rollout_summary(other, run_id) == _rollout_summary(local, run_id)
    assert other.read_manifest(run_id).counts["rollouts"] == \
        local.read_manifest(run_id).counts["rollouts"]


@pytest.fixture
def same_rollouts() -> Callable[[Any, Any, Any, Any, str], None]:
    """``(local store, its result, other store, its result, run_id)``: asserts the two runs
    wrote the same trajectories (id, resolved, grade, admission, tool names), pairs (id,
    scores), counts and manifest counts: what two executors must agree on."""
    return _same_rollouts
