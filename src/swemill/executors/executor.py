"""The executor protocol: map a picklable function over work items, one result per item.

An executor only decides *where* an item runs. Item ``i`` of a list is the same work on
every backend, results come back in item order, and a failing item is a recorded failure
(an :class:`ItemResult` with ``ok=False`` and a one-line reason), never an exception that
loses the other items' work. Only known-transient failures are retried: a policy's rate
limit or dropped connection, a worker process that died (OOM killer, Spot reclaim), a
network error. A bug or bad input fails the same way twice, so it is not retried.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from swemill.core.errors import ConfigError, SwemillError, TransientPolicyError

__all__ = [
    "Executor",
    "ItemResult",
    "TransientError",
    "WorkerLost",
    "ItemFailed",
    "is_transient",
    "describe",
    "run_one",
    "fn_name",
    "log_map",
    "shard_bounds",
    "shard_items",
    "check_retries",
]

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")


class TransientError(SwemillError):
    """A failure worth retrying (raised by work functions that know theirs is transient)."""


class WorkerLost(TransientError):
    """The process running an item died before it answered (killed, OOM, Spot reclaim)."""


class ItemFailed(SwemillError):
    """A stage cannot go on because some of its items failed (the message names the first)."""


def is_transient(exc: BaseException) -> bool:
    """Whether retrying the item could succeed: transient errors, not bugs or bad input."""
    if isinstance(exc, TransientError | TransientPolicyError):
        return True
    if isinstance(exc, SwemillError):
        return False
    return isinstance(exc, ConnectionError | TimeoutError)


def describe(exc: BaseException) -> str:
    """``Type: first line of the message`` (what a failed item records)."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


@dataclass(slots=True)
class ItemResult(Generic[R]):
    """The outcome of one item: its value, or why it failed and whether that was transient."""

    index: int
    ok: bool
    value: R | None = None
    error: str | None = None
    transient: bool = False
    attempts: int = 1
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)


def fn_name(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


def run_one(fn: Callable[[T], R], item: T, index: int, attempt: int = 1) -> ItemResult[R]:
    """Run one item inside the per-item boundary: every exception becomes a failed result.
    This is where every backend's worker enters swemill, so it logs what runs and how it
    ended (plain lines on Ray and Batch workers: :func:`swemill.core.logs.worker_logging`)."""
    log.info("item %d (attempt %d): %s", index, attempt, fn_name(fn))
    start = time.perf_counter()
    try:
        value = fn(item)
    except Exception as exc:  # the per-item boundary
        res: ItemResult[R] = ItemResult(index, False, None, describe(exc), is_transient(exc),
                                        attempt, time.perf_counter() - start)
        log.info("item %d (attempt %d) failed after %.1f s%s: %s", index, attempt, res.seconds,
                 " (transient)" if res.transient else "", res.error)
        return res
    res = ItemResult(index, True, value, None, False, attempt, time.perf_counter() - start)
    log.info("item %d (attempt %d) done in %.1f s", index, attempt, res.seconds)
    return res


def log_map(name: str, fn: Callable[..., Any], results: Sequence[ItemResult[Any]],
            seconds: float) -> None:
    """The submitter's line for one ``map``: what ran where and how many items failed."""
    failed = [r for r in results if not r.ok]
    log.info("%s: %d item(s) of %s in %.1f s, %d failed%s", name, len(results), fn_name(fn),
             seconds, len(failed), f" (first: item {failed[0].index}: {failed[0].error})"
             if failed else "")


def check_retries(retries: int) -> int:
    if retries < 0:
        raise ConfigError(f"retries must be 0 or more, not {retries}")
    return retries


def shard_bounds(total: int, k: int, n: int) -> tuple[int, int]:
    """``[start, stop)`` of shard ``k`` of ``n`` over ``total`` items: contiguous, balanced,
    the same on every backend (the first ``total % n`` shards hold one item more)."""
    if n < 1 or not 0 <= k < n:
        raise ConfigError(f"shard {k} of {n} does not exist (need 0 <= k < n)")
    size, extra = divmod(total, n)
    start = k * size + min(k, extra)
    return start, start + size + (1 if k < extra else 0)


def shard_items(items: Sequence[T], k: int, n: int) -> list[T]:
    start, stop = shard_bounds(len(items), k, n)
    return list(items[start:stop])


class Executor(Protocol):
    """Where items run. ``map`` returns one :class:`ItemResult` per item, in item order."""

    name: str

    def map(
        self, fn: Callable[[Any], Any], items: Sequence[Any], *, retries: int = 2
    ) -> list[ItemResult[Any]]: ...
