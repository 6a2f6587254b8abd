"""Timeouts from measured durations, never a fixed limit.

A run of the selected tests gets ``factor`` times their baseline durations plus twice the
measured start-up plus a margin. A test the baseline has no duration for counts as the
slowest one it has (new tests, renamed parametrisations).
"""

from __future__ import annotations

from collections.abc import Iterable

from swemill.core.records import Baseline

__all__ = ["adaptive_timeout"]


def adaptive_timeout(baseline: Baseline, nodeids: Iterable[str] | None = None, *,
                     factor: float = 3.0, margin_s: float = 5.0) -> float:
    """Seconds to allow a run of ``nodeids`` (the whole suite when None)."""
    durations = baseline.durations_s
    fallback = max(durations.values(), default=1.0)
    selected = durations.keys() if nodeids is None else nodeids
    work = sum(durations.get(n, fallback) for n in selected)
    return round(factor * work + 2 * baseline.startup_s + margin_s, 3)
