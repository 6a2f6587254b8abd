"""The four validation gates, each a pure decision over saved run evidence.

Nothing here runs a command: the validator runs tests in sandboxes and hands the evidence
over, so every verdict can be recomputed offline from the stored logs.

1. the bug patch applies and the broken tree imports;
2. FAIL_TO_PASS is non-empty: tests passing at baseline that fail on the broken tree;
3. PASS_TO_PASS is non-empty: baseline-passing tests that still pass on the broken tree;
4. solvable: the golden patch restores every FAIL_TO_PASS and PASS_TO_PASS test, twice.

Flaky baseline tests never enter either list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from swemill.core.records import Baseline, TestStatus

__all__ = ["RunEvidence", "GateVerdict4", "decide", "FAILING", "PASSING"]

FAILING: frozenset[str] = frozenset({"failed", "error"})
PASSING: frozenset[str] = frozenset({"passed"})


@dataclass(slots=True)
class RunEvidence:
    """One test run as the sandbox saw it: per-test outcomes, exit code, trust."""

    outcomes: Mapping[str, TestStatus]
    exit_code: int
    timed_out: bool = False
    trusted: bool = True
    """False when the report and the exit code disagree (a log can lie; the exit code cannot)."""
    log: str = ""

    @property
    def usable(self) -> bool:
        return self.trusted and not self.timed_out


@dataclass(slots=True)
class GateVerdict4:
    accepted: bool
    reason: str
    """``accepted``, or the first gate that refused: ``patch_failed``, ``import_failed``,
    ``timeout``, ``untrusted_log``, ``no_fail_to_pass``, ``no_pass_to_pass``, ``not_solvable``."""
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    detail: str = ""


def _refuse(reason: str, detail: str = "") -> GateVerdict4:
    return GateVerdict4(False, reason, detail=detail)


def decide(
    *,
    baseline: Baseline,
    applied: bool,
    imports: bool,
    broken: RunEvidence | None,
    golden_runs: Sequence[RunEvidence],
    selected: Sequence[str] | None,
) -> GateVerdict4:
    """Apply the four gates. ``selected`` is the tests that were run on the broken tree
    (``None``: the full suite was run). Tests outside the selection never execute the
    changed code, so they keep their baseline outcome."""
    if not applied:
        return _refuse("patch_failed")
    if not imports or broken is None:
        return _refuse("import_failed", broken.log[-2000:] if broken else "")
    if broken.timed_out:
        return _refuse("timeout", "broken tree")
    if not broken.trusted:
        return _refuse("untrusted_log", "broken tree: report and exit code disagree")

    eligible = baseline.passing()
    ran = set(broken.outcomes) if selected is None else set(selected)
    f2p = sorted(t for t in ran & eligible if broken.outcomes.get(t) in FAILING)
    measured_p2p = {t for t in ran & eligible if broken.outcomes.get(t) in PASSING}
    inherited_p2p = eligible - ran if selected is not None else set()
    p2p = sorted(measured_p2p | inherited_p2p)
    if not f2p:
        return _refuse("no_fail_to_pass")
    if not p2p:
        return _refuse("no_pass_to_pass")

    must_pass = set(f2p) | measured_p2p
    if len(golden_runs) < 2:
        return _refuse("not_solvable", "golden patch must be run twice")
    for i, run in enumerate(golden_runs):
        if not run.usable:
            return _refuse("not_solvable", f"golden run {i + 1}: timed out or untrusted log")
        missing = sorted(t for t in must_pass if run.outcomes.get(t) not in PASSING)
        if missing:
            return _refuse("not_solvable", f"golden run {i + 1}: {len(missing)} tests not passing, "
                           f"first {missing[0]}")
    return GateVerdict4(True, "accepted", fail_to_pass=f2p, pass_to_pass=p2p)
