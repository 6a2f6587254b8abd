"""Admission: where a graded trajectory may go.

- ``sft``: grade 1.0, every PASS_TO_PASS test passing, and nothing flagged by the hack monitor.
- ``preference``: clean, but only partly right: some FAIL_TO_PASS tests fixed, or all of them
  at the price of a regression (a near miss). Such runs are candidates for preference pairs.
- ``withheld``: the rest (flagged, failed, ungraded, errored). Kept, never trained on.
"""

from __future__ import annotations

from typing import Literal

from swemill.core.records import Trajectory

__all__ = ["Admission", "admit"]

Admission = Literal["sft", "preference", "withheld"]


def admit(traj: Trajectory) -> Admission:
    outcome = traj.outcome
    if outcome is None or traj.flags or traj.error:
        return "withheld"
    if outcome.resolved and outcome.grade >= 1.0 and not outcome.regression:
        return "sft"
    fixed = outcome.signals.get("f2p_fraction", outcome.grade)
    return "preference" if fixed > 0.0 else "withheld"
