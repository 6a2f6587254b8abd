"""Retries for known-transient failures only: rate limits, 5xx, dropped or timed-out connections.

Backends translate their SDK's exceptions into :class:`Transient` (worth retrying, maybe with
the server's ``Retry-After``) or :class:`~swemill.core.errors.PolicyError` (never retried).
:func:`call_with_retries` sleeps with exponential backoff and full jitter between attempts and
raises :class:`~swemill.core.errors.TransientPolicyError` once the attempts are spent.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from swemill.core.errors import TransientPolicyError

__all__ = ["RetryPolicy", "Transient", "call_with_retries", "parse_retry_after"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 5
    """Attempts in all, the first included."""
    base_s: float = 1.0
    """Backoff before the second attempt; doubles after each failure."""
    max_s: float = 60.0
    """Ceiling for one wait, ``Retry-After`` included."""
    jitter: bool = True


class Transient(Exception):  # noqa: N818 - an internal signal, never shown to users
    """Raised by a backend's call to ask for a retry."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds form; HTTP dates are ignored)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _wait_s(policy: RetryPolicy, attempt: int, hint: float | None, rng: random.Random) -> float:
    backoff = min(policy.max_s, policy.base_s * (2 ** (attempt - 1)))
    if policy.jitter:
        backoff = rng.uniform(0, backoff)  # full jitter: spreads out concurrent workers
    if hint is not None:
        backoff = max(backoff, min(hint, policy.max_s))
    return backoff


def call_with_retries(
    fn: Callable[[], T],
    policy: RetryPolicy,
    *,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run ``fn``; on :class:`Transient`, wait and try again up to ``policy.max_attempts``."""
    rng = random.Random()
    last: Transient | None = None
    for attempt in range(1, max(1, policy.max_attempts) + 1):
        try:
            return fn()
        except Transient as exc:
            last = exc
            if attempt >= policy.max_attempts:
                break
            sleep(_wait_s(policy, attempt, exc.retry_after_s, rng))
    raise TransientPolicyError(
        f"{what}: {last} (gave up after {policy.max_attempts} attempts)"
    ) from last
