"""Retries for known-transient failures only: rate limits, 5xx, dropped or timed-out connections.

Backends translate their SDK's exceptions into :class:`Transient` (worth retrying, maybe with
the server's ``Retry-After``) or :class:`~swemill.core.errors.PolicyError` (never retried).
:func:`call_with_retries` retries with tenacity: exponential backoff with full jitter, never
shorter than the server's ``Retry-After`` (capped), and
:class:`~swemill.core.errors.TransientPolicyError` once the attempts are spent.

The SDKs' own retries (openai, anthropic, botocore) stay switched off: this is the one retry
layer over every backend, so ``--retries`` means the same number of attempts on each (stacked
SDK retries would multiply it, 3 x 5, and sleep past the rollout's budget checks), and a
transient error is classified once, by the backend, from the SDK's exception.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import (
    RetryCallState,
    RetryError,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
    wait_random_exponential,
)
from tenacity.wait import wait_base

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


def _wait(policy: RetryPolicy) -> Callable[[RetryCallState], float]:
    backoff: wait_base = (
        wait_random_exponential(multiplier=policy.base_s, max=policy.max_s) if policy.jitter
        else wait_exponential(multiplier=policy.base_s, max=policy.max_s))

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        hint = exc.retry_after_s if isinstance(exc, Transient) else None
        seconds = backoff(state)  # full jitter spreads out concurrent workers
        return seconds if hint is None else max(seconds, min(hint, policy.max_s))

    return wait


def call_with_retries(
    fn: Callable[[], T],
    policy: RetryPolicy,
    *,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run ``fn``; on :class:`Transient`, wait and try again up to ``policy.max_attempts``."""
    attempts = max(1, policy.max_attempts)
    retrying = Retrying(stop=stop_after_attempt(attempts), wait=_wait(policy),
                        retry=retry_if_exception_type(Transient), sleep=sleep)
    try:
        return retrying(fn)
    except RetryError as exc:
        last = exc.last_attempt.exception()
        raise TransientPolicyError(
            f"{what}: {last} (gave up after {attempts} attempts)") from last
