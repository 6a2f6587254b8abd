"""Rollout shards on an executor: one work item = one shard (``tasks_per_shard`` tasks).

Each item rebuilds the rollout stage's state on its worker (store, policies, environment
resolver, goldens for the oracles) and calls the same shard function the local thread pool
calls, so it writes the same trajectory and pair shards and the same completion record.
An item is a pydantic model, so it also travels as JSON to an AWS Batch child; there the
environment resolver builds each task's environment from its source spec in the worker's
own cache, so on ``aws-batch`` every task must come from a source the worker can fetch.

One thing cannot travel: the run's shared :class:`~swemill.policies.budget.Budget`. With
``max_usd`` set, every shard gets an equal share of it, so the run's total is still never
exceeded (a shard that runs out is left unwritten and counts as stopped, as locally); with
no ceiling nothing changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from swemill.agent.rollout_config import RolloutConfig
from swemill.core.errors import ConfigError
from swemill.core.records import Task
from swemill.executors import Executor, stage_executor
from swemill.executors.executor import ItemFailed
from swemill.repo.sources import require_portable
from swemill.store import Store

__all__ = ["RolloutShard", "ShardSummary", "rollout_shard", "run_shards",
           "executor_for_rollouts"]


class RolloutShard(BaseModel):
    """One shard's work: where the run lives, its settings and its tasks (JSON-able)."""

    model_config = ConfigDict(frozen=True)

    root: str
    storage_options: dict[str, Any]
    tasks_run_id: str
    run_id: str
    config: RolloutConfig
    shard: str
    tasks: tuple[Task, ...]


class ShardSummary(BaseModel):
    """What a shard wrote (its completion record); ``summary`` None: its budget share ran out."""

    summary: dict[str, Any] | None


def rollout_shard(item: RolloutShard) -> ShardSummary:
    """Run and write one shard on this worker (the local path's own shard code)."""
    # rollout imports this module (run_shards); the worker side imports it back only here
    from swemill.agent.rollout import RolloutStage, run_shard

    store = Store(item.root, storage_options=item.storage_options)
    stage = RolloutStage(store, item.tasks_run_id, item.run_id, item.config, None)
    return ShardSummary(summary=run_shard(stage, item.shard, list(item.tasks)))


def executor_for_rollouts(name: str, workers: int, store: Store,
                          tasks: Sequence[Task] = ()) -> Executor:
    """The executor ``swemill rollouts --executor NAME`` runs shards on."""
    if name == "local":
        raise ConfigError("rollouts: the local executor runs shards on the stage's own threads")
    if name == "aws-batch":
        for source in sorted({str(t.metadata.get("source") or "") for t in tasks}):
            require_portable(source, "rollouts (the tasks' source)")
    return stage_executor(name, workers=workers, store=store, job_name="swemill-rollouts",
                          what="rollouts: ")


def run_shards(store: Store, tasks_run_id: str, run_id: str, config: RolloutConfig,
               todo: Sequence[tuple[str, list[Task]]], executor: Executor | None = None
               ) -> list[dict[str, Any] | None]:
    """The shards' completion summaries (None: stopped by the budget), in ``todo`` order.

    A shard that fails outright (its worker died past the retries, a bug) is an
    :class:`ItemFailed`, as an exception in a local worker thread stops the local run."""
    if not todo:
        return []
    executor = executor or executor_for_rollouts(
        config.executor, config.workers, store, [t for _, ts in todo for t in ts])
    share, options = config, dict(store.storage_options)
    if config.max_usd is not None:
        share = config.model_copy(update={"max_usd": config.max_usd / len(todo)})
    if executor.name == "aws-batch":
        # a container has its own cache and its own credentials (its job role): neither this
        # machine's cache path nor any key in the storage options goes into the manifest
        share, options = share.model_copy(update={"cache": None}), {}
    items = [RolloutShard(root=store.url, storage_options=options, tasks_run_id=tasks_run_id,
                          run_id=run_id, config=share, shard=name, tasks=tuple(tasks))
             for name, tasks in todo]
    out = executor.map(rollout_shard, items, retries=1)
    failed = [r for r in out if not r.ok]
    if failed:
        raise ItemFailed(f"{len(failed)} rollout shard(s) failed on {executor.name}; first "
                         f"({todo[failed[0].index][0]}): {failed[0].error}")
    return [r.value.summary if r.value is not None else None for r in out]
