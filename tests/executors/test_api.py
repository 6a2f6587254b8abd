"""The executors' public names, pinned."""

from __future__ import annotations

import swemill.executors as executors


def test_public_api() -> None:
    assert sorted(executors.__all__) == sorted([
        "EXECUTORS", "Executor", "ItemResult", "TransientError", "WorkerLost", "get_executor",
        "stage_executor", "is_transient", "shard_bounds", "shard_items"])
    assert set(executors.EXECUTORS) == {"local", "ray", "aws-batch"}
    for name in executors.__all__:
        assert hasattr(executors, name), name
