"""Executors: where a stage's items run (``local`` process pool, ``ray``, ``aws-batch``).

Backends are imported by name only when chosen, so Ray and boto3 stay optional.
"""

from __future__ import annotations

import importlib
from typing import Any

from swemill.core.errors import ConfigError
from swemill.executors.base import (
    Executor,
    ItemResult,
    TransientError,
    WorkerLost,
    is_transient,
    shard_bounds,
    shard_items,
)

__all__ = [
    "EXECUTORS",
    "Executor",
    "ItemResult",
    "TransientError",
    "WorkerLost",
    "get_executor",
    "is_transient",
    "shard_bounds",
    "shard_items",
]

EXECUTORS = {
    "local": "swemill.executors.local:LocalExecutor",
    "ray": "swemill.executors.ray_tasks:RayExecutor",
    "aws-batch": "swemill.executors.aws_batch:AwsBatchExecutor",
}


def get_executor(name: str, **options: Any) -> Executor:
    """The executor called ``name``, built with ``options`` (e.g. ``workers=4``)."""
    if name not in EXECUTORS:
        raise ConfigError(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}")
    module, _, cls = EXECUTORS[name].partition(":")
    executor: Executor = getattr(importlib.import_module(module), cls)(**options)
    return executor
