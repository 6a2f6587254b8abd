"""The default executor: a process pool on this machine.

Work functions and items must pickle (module-level functions, records). A worker that dies
breaks the whole pool in ``concurrent.futures``; the items that were in flight are recorded
as :class:`~swemill.executors.executor.WorkerLost` attempts, a fresh pool is started, and they
run again while retries remain.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from swemill.core.errors import ConfigError
from swemill.executors.executor import (
    ItemResult,
    WorkerLost,
    check_retries,
    describe,
    log_map,
    run_one,
)

__all__ = ["LocalExecutor"]


class LocalExecutor:
    """``workers`` processes (default: the CPU count); ``workers=0`` runs in this process."""

    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        if workers is not None and workers < 0:
            raise ConfigError(f"workers must be 0 or more, not {workers}")
        self.workers = (os.cpu_count() or 1) if workers is None else workers

    @classmethod
    def for_stage(cls, *, workers: int, store: Any, job_name: str) -> LocalExecutor:
        """``workers`` processes (see :func:`swemill.executors.stage_executor`)."""
        return cls(workers)

    def map(
        self, fn: Callable[[Any], Any], items: Sequence[Any], *, retries: int = 2
    ) -> list[ItemResult[Any]]:
        check_retries(retries)
        start = time.monotonic()
        if self.workers == 0:
            out = [_inline(fn, item, i, retries) for i, item in enumerate(items)]
        else:
            results: dict[int, ItemResult[Any]] = {}
            attempts = dict.fromkeys(range(len(items)), 0)
            pending = list(range(len(items)))
            while pending:
                pending = self._round(fn, items, pending, attempts, results, retries)
            out = [results[i] for i in range(len(items))]
        log_map(self.name, fn, out, time.monotonic() - start)
        return out

    def _round(self, fn: Callable[[Any], Any], items: Sequence[Any], todo: list[int],
               attempts: dict[int, int], results: dict[int, ItemResult[Any]],
               retries: int) -> list[int]:
        """One pool's life: run ``todo``; return the items to run again in a new pool."""
        again: list[int] = []
        # fork would copy the caller's threads' locks; spawn starts clean workers.
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(self.workers, len(todo)), mp_context=ctx) as pool:
            futures: dict[Future[ItemResult[Any]], int] = {}
            for i in todo:
                attempts[i] += 1
                futures[pool.submit(run_one, fn, items[i], i, attempts[i])] = i
            for fut, i in futures.items():
                try:
                    res = fut.result()
                except BrokenProcessPool as exc:
                    lost = WorkerLost(f"the worker process died ({describe(exc)})")
                    res = ItemResult(i, False, None, describe(lost), True, attempts[i])
                if not res.ok and res.transient and attempts[i] <= retries:
                    again.append(i)
                results[i] = res
        return again


def _inline(fn: Callable[[Any], Any], item: Any, index: int, retries: int) -> ItemResult[Any]:
    attempt = 1
    while True:
        res = run_one(fn, item, index, attempt)
        if res.ok or not res.transient or attempt > retries:
            return res
        attempt += 1
