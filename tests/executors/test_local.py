"""The local executor (process pool): order, per-item failures, retries, dead workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from swemill.core.errors import ConfigError
from swemill.executors import get_executor, shard_bounds, shard_items
from swemill.executors.process_pool import LocalExecutor
from swemill_testkit.executors import (
    crash_always,
    crash_once,
    fail_if_negative,
    square,
    transient_once,
)


def test_results_in_item_order_with_values() -> None:
    out = LocalExecutor(workers=2).map(square, list(range(7)))
    assert [r.index for r in out] == list(range(7))
    assert [r.value for r in out] == [i * i for i in range(7)]
    assert all(r.ok and r.attempts == 1 for r in out)


def test_bad_item_is_recorded_and_not_retried() -> None:
    out = LocalExecutor(workers=2).map(fail_if_negative, [2, -1, 3], retries=3)
    assert [r.ok for r in out] == [True, False, True]
    assert out[1].error == "ValueError: negative input -1"
    assert out[1].attempts == 1 and not out[1].transient


def test_transient_failure_is_retried(tmp_path: Path) -> None:
    items = [{"marker": str(tmp_path / f"m{i}"), "value": i} for i in range(3)]
    out = LocalExecutor(workers=2).map(transient_once, items, retries=1)
    assert [r.value for r in out] == [0, 1, 2]
    assert [r.attempts for r in out] == [2, 2, 2]


def test_transient_failure_without_retries_is_recorded(tmp_path: Path) -> None:
    out = LocalExecutor(workers=0).map(transient_once, [{"marker": str(tmp_path / "m"),
                                                         "value": 1}], retries=0)
    assert not out[0].ok and out[0].transient
    assert out[0].error and out[0].error.startswith("TransientError")


def test_killed_worker_is_retried_in_a_fresh_pool(tmp_path: Path) -> None:
    items = [{"marker": str(tmp_path / "crash"), "value": "after"}]
    out = LocalExecutor(workers=1).map(crash_once, items, retries=1)
    assert out[0].ok and out[0].value == "after" and out[0].attempts == 2


def test_worker_that_always_dies_is_a_recorded_failure() -> None:
    out = LocalExecutor(workers=1).map(crash_always, [{"value": 1}], retries=1)
    assert not out[0].ok and out[0].attempts == 2
    assert out[0].error and out[0].error.startswith("WorkerLost")


def test_inline_matches_pool() -> None:
    items = list(range(-2, 5))
    inline = LocalExecutor(workers=0).map(fail_if_negative, items)
    pooled = LocalExecutor(workers=2).map(fail_if_negative, items)
    assert [(r.ok, r.value, r.error) for r in inline] == [(r.ok, r.value, r.error) for r in pooled]


def test_shards_partition_items_the_same_way_everywhere() -> None:
    items = list(range(10))
    shards = [shard_items(items, k, 3) for k in range(3)]
    assert shards == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert shard_bounds(2, 2, 3) == (2, 2)  # more shards than items: empty tail shards
    with pytest.raises(ConfigError):
        shard_bounds(10, 3, 3)


def test_registry() -> None:
    assert get_executor("local", workers=1).name == "local"
    with pytest.raises(ConfigError, match="unknown executor 'slurm'"):
        get_executor("slurm")
    with pytest.raises(ConfigError):
        LocalExecutor(workers=1).map(square, [1], retries=-1)
