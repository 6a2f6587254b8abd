"""The Ray executor on a local Ray instance with 2 CPUs (one instance for the module)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from swemill.executors.process_pool import LocalExecutor
from swemill_testkit.executors import crash_always, crash_once, fail_if_negative, transient_once

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def executor() -> Iterator[object]:
    from swemill.executors.ray_tasks import RayExecutor

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield RayExecutor()
    finally:
        ray.shutdown()


def test_same_results_as_local(executor: object) -> None:
    items = list(range(-2, 6))
    on_ray = executor.map(fail_if_negative, items)  # type: ignore[attr-defined]
    local = LocalExecutor(workers=2).map(fail_if_negative, items)
    assert [(r.index, r.ok, r.value, r.error) for r in on_ray] == [
        (r.index, r.ok, r.value, r.error) for r in local
    ]
    assert on_ray[0].error == "ValueError: negative input -2"


def test_transient_error_retried(executor: object, tmp_path: Path) -> None:
    items = [{"marker": str(tmp_path / f"t{i}"), "value": i} for i in range(2)]
    out = executor.map(transient_once, items, retries=1)  # type: ignore[attr-defined]
    assert [(r.ok, r.value, r.attempts) for r in out] == [(True, 0, 2), (True, 1, 2)]


def test_worker_killed_mid_task_is_retried(executor: object, tmp_path: Path) -> None:
    items = [{"marker": str(tmp_path / "crash"), "value": "survived"}]
    out = executor.map(crash_once, items, retries=1)  # type: ignore[attr-defined]
    assert out[0].ok and out[0].value == "survived"
    assert (tmp_path / "crash").exists()  # the first attempt really ran and died


def test_worker_killed_without_retries_is_recorded(executor: object) -> None:
    out = executor.map(crash_always, [{"value": 1}], retries=0)  # type: ignore[attr-defined]
    assert not out[0].ok
    assert out[0].error and out[0].error.startswith("WorkerLost")
