"""Ray tasks: one task per item on any Ray cluster (local, KubeRay, EKS, Anyscale).

Ray retries a task whose worker died (``max_retries``: a killed process, a lost node) on its
own; a transient exception inside the work (a policy's rate limit) is retried here with the
same budget, because Ray's ``retry_exceptions`` would also retry bugs. The caller's
``ray.init`` wins: when Ray is not initialised yet, ``address`` (or ``RAY_ADDRESS``) is used,
and without one a local instance is started with ``num_cpus``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from swemill.core.errors import MissingDependency
from swemill.core.logs import worker_logging
from swemill.executors.executor import (
    ItemResult,
    WorkerLost,
    check_retries,
    describe,
    log_map,
    run_one,
)

__all__ = ["RayExecutor"]


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise MissingDependency("the ray executor needs Ray: install 'swemill[ray]'") from exc
    return ray


def _run_on_ray(fn: Callable[[Any], Any], item: Any, index: int, attempt: int
                ) -> ItemResult[Any]:
    """A Ray task: plain log lines in the worker's log, then the item (see ``run_one``)."""
    worker_logging()
    return run_one(fn, item, index, attempt)


class RayExecutor:
    """Items as Ray tasks, each with ``num_cpus`` CPUs reserved (one sandbox per task)."""

    name = "ray"

    def __init__(self, address: str | None = None, *, num_cpus: float = 1.0,
                 init_cpus: int | None = None) -> None:
        self.ray = _ray()
        self.address = address
        self.task_cpus = num_cpus
        self.init_cpus = init_cpus

    @classmethod
    def for_stage(cls, *, workers: int, store: Any, job_name: str) -> RayExecutor:
        """A local Ray started with ``workers`` CPUs, or the cluster ``RAY_ADDRESS`` names."""
        return cls(init_cpus=workers)

    def _ensure_init(self) -> None:
        if not self.ray.is_initialized():
            # Quiet: a CLI run shows swemill's progress, not Ray's start-up notices.
            self.ray.init(address=self.address, num_cpus=self.init_cpus,
                          include_dashboard=False, log_to_driver=False,
                          logging_level=logging.ERROR)

    def map(
        self, fn: Callable[[Any], Any], items: Sequence[Any], *, retries: int = 2
    ) -> list[ItemResult[Any]]:
        check_retries(retries)
        self._ensure_init()
        ray = self.ray
        start = time.monotonic()
        remote = ray.remote(num_cpus=self.task_cpus, max_retries=retries)(_run_on_ray)
        fn_ref = ray.put(fn)
        attempts = [1] * len(items)
        refs = {i: remote.remote(fn_ref, item, i, 1) for i, item in enumerate(items)}
        results: dict[int, ItemResult[Any]] = {}
        while refs:
            again = {}
            for i, ref in refs.items():
                res = self._get(ref, i, attempts[i])
                if not res.ok and res.transient and attempts[i] <= retries:
                    attempts[i] += 1
                    again[i] = remote.remote(fn_ref, items[i], i, attempts[i])
                results[i] = res
            refs = again
        out = [results[i] for i in range(len(items))]
        log_map(self.name, fn, out, time.monotonic() - start)
        return out

    def _get(self, ref: Any, index: int, attempt: int) -> ItemResult[Any]:
        exc_types = self.ray.exceptions
        try:
            res: ItemResult[Any] = self.ray.get(ref)
        except (exc_types.WorkerCrashedError, exc_types.NodeDiedError,
                exc_types.ObjectLostError) as exc:
            # Ray already spent its max_retries on this system failure; do not retry again.
            lost = WorkerLost(f"the Ray worker died and Ray's retries ran out ({describe(exc)})")
            return ItemResult(index, False, None, describe(lost), False, attempt)
        except exc_types.RayError as exc:
            return ItemResult(index, False, None, describe(exc), False, attempt)
        return res
