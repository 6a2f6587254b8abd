"""Executors: where a stage's items run (``local`` process pool, ``ray``, ``aws-batch``).

Backends are imported by name only when chosen, so Ray and boto3 stay optional. Executors
know nothing of the stages: a stage hands them a picklable work function and its items
(:mod:`swemill.validate.chunks`, :mod:`swemill.agent.shards`), so they sit below the stages.
"""

from __future__ import annotations

import importlib
from typing import Any

from swemill.core.errors import ConfigError
from swemill.executors.executor import (
    Executor,
    ItemResult,
    TransientError,
    WorkerLost,
    is_transient,
    shard_bounds,
    shard_items,
)
from swemill.store import Store

__all__ = [
    "EXECUTORS",
    "Executor",
    "ItemResult",
    "TransientError",
    "WorkerLost",
    "get_executor",
    "stage_executor",
    "is_transient",
    "shard_bounds",
    "shard_items",
]

EXECUTORS = {
    "local": "swemill.executors.process_pool:LocalExecutor",
    "ray": "swemill.executors.ray_tasks:RayExecutor",
    "aws-batch": "swemill.executors.aws_batch:AwsBatchExecutor",
}


def _backend(name: str, what: str = "") -> Any:
    if name not in EXECUTORS:
        raise ConfigError(f"{what}unknown executor {name!r}; choose one of "
                          f"{', '.join(EXECUTORS)}")
    module, _, cls = EXECUTORS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def get_executor(name: str, **options: Any) -> Executor:
    """The executor called ``name``, built with ``options`` (e.g. ``workers=4``)."""
    executor: Executor = _backend(name)(**options)
    return executor


def stage_executor(name: str, *, workers: int, store: Store, job_name: str,
                   what: str = "") -> Executor:
    """The executor a stage's ``--executor NAME`` runs on: ``workers`` local processes or Ray
    CPUs, or the AWS Batch queue of the environment writing job folders under ``store``.
    ``what`` prefixes the error for an unknown name (``"tasks: "``)."""
    executor: Executor = _backend(name, what).for_stage(workers=workers, store=store,
                                                        job_name=job_name)
    return executor
