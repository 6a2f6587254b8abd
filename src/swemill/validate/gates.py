"""The four validation gates, each a pure decision over saved run evidence.

Nothing here runs a command: the validator runs tests in sandboxes and hands the evidence
over, so every verdict can be recomputed offline from the stored logs.

1. the bug patch applies and the broken tree imports;
2. FAIL_TO_PASS is non-empty: tests passing at baseline that fail on the broken tree, in
   every one of the broken runs;
3. PASS_TO_PASS is non-empty: baseline-passing tests that still pass on the broken tree;
4. solvable: the golden patch restores every FAIL_TO_PASS and PASS_TO_PASS test, in every one
   of the golden runs (at least two).

Flaky baseline tests never enter either list, nor do tests whose outcome on the broken tree
changes between its runs (flaky under the bug: a random-eviction cache test, say). No test
enters PASS_TO_PASS that did not pass in a run of the broken tree: a selection's other tests
enter it only from a whole-suite run of the broken tree (``confirm``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from swemill.core.records import Baseline, TestStatus
from swemill.suite.said import EXCEPTION_LINE

__all__ = ["EXCEPTION_LINE", "RunEvidence", "GateVerdict4", "decide", "FAILING", "PASSING",
           "collector_of", "with_collect_errors"]

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
    ``timeout``, ``untrusted_log``, ``no_fail_to_pass``, ``flaky`` (every newly failing test
    passed in another broken run), ``no_pass_to_pass``, ``not_solvable``."""
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    detail: str = ""
    flaky: list[str] = field(default_factory=list)
    """Tests whose outcome differed between the broken runs: in neither list."""
    repeated: int = 0
    """Tests that were run in more than one broken run (``flaky`` is a share of them)."""
    head_failed: list[str] = field(default_factory=list)
    """Tests that did not pass in a golden run whose tree is the head's, which the baseline
    passed them on: flaky whatever the candidate (in neither list here; the run takes them
    out of every task's lists: ``validator._unflake``)."""

    @property
    def flake_rate(self) -> float:
        return round(len(self.flaky) / self.repeated, 4) if self.repeated else 0.0


def _refuse(reason: str, detail: str = "") -> GateVerdict4:
    return GateVerdict4(False, reason, detail=detail)




def _exit_said(run: RunEvidence) -> str:
    """``, exit 3: AssertionError: ...``: the run's exit code, and the error of pytest's
    INTERNALERROR if it had one (its own failure, or a plugin's, not the tests')."""
    internal = [ln.removeprefix("INTERNALERROR>").strip() for ln in run.log.splitlines()
                if ln.startswith("INTERNALERROR>")]
    err = next((ln for ln in reversed(internal) if EXCEPTION_LINE.match(ln)), "")
    return f", exit {run.exit_code}" + (f": {err[:200]}" if err else "")


def decide(
    *,
    baseline: Baseline,
    applied: bool,
    imports: bool,
    broken: RunEvidence | None,
    golden_runs: Sequence[RunEvidence],
    selected: Sequence[str] | None,
    repeats: Sequence[RunEvidence] = (),
    golden_needed: int = 2,
    confirm: RunEvidence | None = None,
    golden_is_head: bool = False,
) -> GateVerdict4:
    """Apply the four gates. ``selected`` is the tests that were run on the broken tree
    (``None``: the full suite was run). Tests outside the selection never execute the
    changed code, so they keep their baseline outcome on the golden tree; on the broken tree
    they must be seen: ``confirm``, a whole-suite run of it, puts the ones it passed in
    PASS_TO_PASS (a test it ran in another outcome than the selection did is flaky under the
    bug); without it a selection is never accepted. ``repeats`` are further runs of the
    broken tree (of the selection, or of its newly failing tests): a test whose outcome in
    one of them differs from the first run's is flaky under the bug and in neither list.
    ``golden_needed``: golden runs every FAIL_TO_PASS and PASS_TO_PASS test must pass in.
    ``golden_is_head``: the golden tree is the head's, on which the baseline passed every
    eligible test in all its runs: a test that does not pass there is flaky (apscheduler
    3.10.4's ``test_broken_pool``, which waits 3 s for a process pool to restart), out of
    both lists and named in ``head_failed``, instead of the candidate's not being solvable."""
    if not applied:
        return _refuse("patch_failed")
    if not imports or broken is None:
        return _refuse("import_failed", broken.log[-2000:] if broken else "")
    for i, run in enumerate([broken, *repeats, *([confirm] if confirm else [])]):
        where = "broken tree" + (", whole suite" if run is confirm else
                                 f", run {i + 1}" if i else "")
        if run.timed_out:
            return _refuse("timeout", where)
        if not run.trusted:
            return _refuse("untrusted_log",
                           f"{where}: report and exit code disagree{_exit_said(run)}")

    broken = with_collect_errors(broken, baseline)
    repeats = [with_collect_errors(run, baseline) for run in repeats]
    confirm = with_collect_errors(confirm, baseline) if confirm is not None else None
    eligible = baseline.passing()
    ran = set(broken.outcomes) if selected is None else set(selected)
    failing = {t for t in ran & eligible if broken.outcomes.get(t) in FAILING}
    passing = {t for t in ran & eligible if broken.outcomes.get(t) in PASSING}
    flaky, repeated = _flaky(failing, passing, repeats)
    inherited_p2p: set[str] = set()
    if selected is not None and confirm is not None:
        seen = confirm.outcomes
        flaky |= {t for t in failing if seen.get(t) not in FAILING}
        flaky |= {t for t in passing if seen.get(t) not in PASSING}
        inherited_p2p = {t for t in eligible - ran if seen.get(t) in PASSING}
    f2p = sorted(failing - flaky)
    measured_p2p = passing - flaky
    p2p = sorted(measured_p2p | inherited_p2p)
    if not f2p:
        if failing:
            return GateVerdict4(False, "flaky", detail=f"{len(failing)} newly failing test(s) "
                                f"passed in another broken run, first {sorted(failing)[0]}",
                                flaky=sorted(flaky), repeated=repeated)
        return _refuse("no_fail_to_pass")
    unseen = eligible - ran if selected is not None and confirm is None else set()
    if not p2p and not unseen:
        return _refuse("no_pass_to_pass")

    must_pass = set(f2p) | measured_p2p
    if len(golden_runs) < golden_needed:  # what the broken runs found so far comes with it
        return GateVerdict4(False, "not_solvable",
                            detail=f"golden patch must be run {golden_needed} times",
                            flaky=sorted(flaky), repeated=repeated)
    head_failed: list[str] = []
    for i, run in enumerate(golden_runs):
        if not run.usable:
            return _refuse("not_solvable", f"golden run {i + 1}: timed out or untrusted log")
        missing = sorted(t for t in must_pass if run.outcomes.get(t) not in PASSING)
        if missing and golden_is_head:
            head_failed = sorted({*head_failed, *missing})
        elif missing:
            return _refuse("not_solvable", f"golden run {i + 1}: {len(missing)} tests not passing, "
                           f"first {missing[0]}")
    if head_failed:
        gone = set(head_failed)
        f2p = [t for t in f2p if t not in gone]
        p2p = [t for t in p2p if t not in gone]
        if not f2p:
            return GateVerdict4(False, "flaky", detail=f"{len(head_failed)} test(s) did not pass "
                                f"on the head tree, which the baseline passed them on, first "
                                f"{head_failed[0]}", flaky=sorted(flaky), repeated=repeated,
                                head_failed=head_failed)
    if unseen:
        return _refuse("not_solvable", f"{len(unseen)} tests outside the selection must be run "
                       "on the broken tree (the whole suite)")
    return GateVerdict4(True, "accepted", fail_to_pass=f2p, pass_to_pass=p2p,
                        flaky=sorted(flaky), repeated=repeated, head_failed=head_failed)


_HOLDS = ("::", "/")
"""What follows a collector's id in the ids of the tests it holds: a module's or a class's
``::``, a folder's ``/`` (a folder whose conftest fails to import reports itself)."""


def with_collect_errors(run: RunEvidence, baseline: Baseline) -> RunEvidence:
    """``run`` with an ``error`` for each baseline test it never reported because the module
    (class, folder) holding it failed to collect: such a collector reports itself, not its tests
    (a test module that builds attrs classes at import, under a bug in the class builder).
    Those tests do not pass there, which is what any run of them, a grader's included, sees;
    a collector that failed at baseline too holds no baseline test."""
    failed = tuple(f"{key}{sep}" for key, outcome in run.outcomes.items()
                   if outcome in FAILING and key not in baseline.outcomes for sep in _HOLDS)
    if not failed:
        return run
    unseen: dict[str, TestStatus] = {t: "error" for t in baseline.outcomes
                                     if t not in run.outcomes and t.startswith(failed)}
    return replace(run, outcomes={**run.outcomes, **unseen}) if unseen else run


def collector_of(test: str, keys: Iterable[str]) -> str | None:
    """The collector among ``keys`` (a folder, a module, a class) that holds ``test``."""
    return next((k for k in keys if test.startswith(tuple(f"{k}{sep}" for sep in _HOLDS))),
                None)


def _flaky(failing: set[str], passing: set[str], repeats: Sequence[RunEvidence]
           ) -> tuple[set[str], int]:
    """Tests of the first broken run whose outcome a repeat contradicts, and how many of the
    first run's tests the repeats ran at all."""
    flaky: set[str] = set()
    seen: set[str] = set()
    for run in repeats:
        for t, outcome in run.outcomes.items():
            if t in failing:
                seen.add(t)
                if outcome not in FAILING:
                    flaky.add(t)
            elif t in passing:
                seen.add(t)
                if outcome not in PASSING:
                    flaky.add(t)
    return flaky, len(seen)
