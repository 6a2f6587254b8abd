"""Rollout shards on an executor: one work item = one shard (``tasks_per_shard`` tasks).

Each item rebuilds the rollout stage's state on its worker (store, policies, environment
resolver, goldens for the oracles) and calls the same shard function the local thread pool
calls, so it writes the same trajectory and pair shards and the same completion record.

One thing cannot travel: the run's shared :class:`~swemill.agent.budget.Budget`. With
``max_usd`` set, every shard gets an equal share of it, so the run's total is still never
exceeded (a shard that runs out is left unwritten and counts as stopped, as locally); with
no ceiling nothing changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from swemill.agent.rollout_config import RolloutConfig
from swemill.core.errors import ConfigError
from swemill.core.records import Task
from swemill.executors.base import Executor, ItemFailed
from swemill.store import Store

__all__ = ["RolloutShard", "rollout_shard", "run_shards", "executor_for_rollouts"]


@dataclass(frozen=True, slots=True)
class RolloutShard:
    root: str
    storage_options: dict[str, Any]
    tasks_run_id: str
    run_id: str
    config: RolloutConfig
    shard: str
    tasks: tuple[Task, ...]


def rollout_shard(item: RolloutShard) -> dict[str, Any] | None:
    """Run and write one shard on this worker; None when its budget share ran out."""
    from swemill.agent.rollout import _run_shard, _Stage  # the local path's own shard code

    store = Store(item.root, storage_options=item.storage_options)
    stage = _Stage(store, item.tasks_run_id, item.run_id, item.config, None)
    return _run_shard(stage, item.shard, list(item.tasks))


def executor_for_rollouts(name: str, workers: int) -> Executor:
    if name == "ray":
        from swemill.executors.ray_tasks import RayExecutor

        return RayExecutor(init_cpus=workers)
    raise ConfigError(f"rollouts cannot run on executor {name!r}: local or ray")


def run_shards(store: Store, tasks_run_id: str, run_id: str, config: RolloutConfig,
               todo: Sequence[tuple[str, list[Task]]]) -> list[dict[str, Any] | None]:
    """The shards' completion summaries (None: stopped by the budget), in ``todo`` order.

    A shard that fails outright (its worker died past the retries, a bug) is an
    :class:`ItemFailed`, as an exception in a local worker thread stops the local run."""
    if not todo:
        return []
    share = config
    if config.max_usd is not None:
        share = config.model_copy(update={"max_usd": config.max_usd / len(todo)})
    items = [RolloutShard(store.url, dict(store.storage_options), tasks_run_id, run_id, share,
                          name, tuple(tasks)) for name, tasks in todo]
    executor = executor_for_rollouts(config.executor, config.workers)
    out = executor.map(rollout_shard, items, retries=1)
    failed = [r for r in out if not r.ok]
    if failed:
        raise ItemFailed(f"{len(failed)} rollout shard(s) failed on {executor.name}; first "
                         f"({todo[failed[0].index][0]}): {failed[0].error}")
    return [r.value for r in out]
