"""Validate one candidate on a worker: run the tests, then let the pure gates decide.

Body-only edits at the head commit run just the tests the coverage map says execute the
changed functions (fastest first, never ``-x``: the whole FAIL_TO_PASS set is wanted),
plus the tests whose coverage is unknown (they start processes); everything else runs the
full suite. A candidate whose broken run shows no newly failing test stops there (F2P early
exit). The survivors' newly failing tests are run ``repeat - 1`` more times on the broken
tree. A selection's broken tree then runs the whole suite once: PASS_TO_PASS holds only
tests seen passing on the broken tree, and where that run disagrees with the selection (a
test outside it fails: the map missed it, through a cache say) the candidate is judged as a
whole-suite one. That run is one of the ``repeat`` runs of the broken tree (a FAIL_TO_PASS
test must fail there too), so a selection's newly failing tests are run ``repeat - 2`` more
times, not ``repeat - 1``; a selection taking half the suite's time or more runs the whole
suite as its first broken run instead (it confirms the selection there and then). Then the
golden state runs twice (where it is byte for byte the head tree, which the baseline ran
three times) or ``max(2, repeat)`` times: a FAIL_TO_PASS test fails in every broken run and
passes in every golden one. Before the golden runs, where some test changed outcome
between broken runs, the passing tests that run the changed code run ``steady_runs`` more
times on the broken tree (``_suspects``): the bug may make them random too. An accepted
candidate's near-miss variants (other mutants of
the same function, made by the strategy) are then run against its lists.

Only the first broken run formats its failures (the task's failure messages and a refused
candidate's one-line detail come from it); the others ask for outcomes alone (``terse``).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from swemill.core.errors import SandboxError, SynthesisError
from swemill.core.records import Baseline, Candidate, TestStatus
from swemill.repo.runner_code import suite_plugin_files_of
from swemill.suite.timeouts import adaptive_timeout, busy_factor
from swemill.synth.patches import patch_files, reverse_patch
from swemill.validate.explain import first_error, refusal_detail, run_failure
from swemill.validate.gates import (
    FAILING,
    PASSING,
    GateVerdict4,
    RunEvidence,
    collector_of,
    decide,
)
from swemill.validate.warm import Deadlines, WarmResult
from swemill.validate.worker import TreeState, Worker, evidence_of

__all__ = ["CheckContext", "Checked", "check_candidate", "select_tests"]


@dataclass(slots=True)
class Checked:
    """A candidate's verdict, with what the emitter needs for accepted ones."""

    candidate: Candidate
    verdict: GateVerdict4
    base_commit: str
    base_patch: str = ""
    selected: bool = False
    messages: dict[str, str] = field(default_factory=dict)
    """Failure text of the FAIL_TO_PASS tests on the broken tree (for the problem statement)."""
    wall_s: float = 0.0
    near_miss: tuple[int, int] | None = None
    """(variants tried, variants caught) for an accepted candidate that came with near-miss
    variants; caught: at least one FAIL_TO_PASS or PASS_TO_PASS test did not pass."""
    env_key: str = ""
    """The environment it ran in (the head's, or its base commit's own)."""

    @property
    def reason(self) -> str:
        return self.verdict.reason


@dataclass
class CheckContext:
    baseline: Baseline
    head: str
    timeout_factor: float = 3.0
    timeout_margin_s: float = 5.0
    test_deadline_factor: float = 10.0
    test_deadline_floor_s: float = 1.0
    test_cpu_factor: float = 20.0
    test_cpu_floor_s: float = 0.5
    repeat: int = 3
    """Runs of a surviving broken tree; golden runs: at least two, at least this many."""
    steady_runs: int = 6
    """Further broken runs of the passing tests that run the changed code, made only when
    some test's outcome changed between broken runs: each must pass in every one to enter
    PASS_TO_PASS. A test the bug fails half of the time slips through all eight of its runs
    (these, the first and the whole suite's) 0.4% of the time, and the audit is there for
    that."""
    near_misses: int = 2
    """Near-miss variants run per accepted candidate (those it carries, at most this many)."""
    busy: Callable[[], float] = busy_factor
    """The machine's load per CPU above 1, read at each run (``suite.timeouts.busy_factor``):
    wall-clock limits are multiplied by it, CPU-second limits are not. Baseline durations are
    measured at one load and candidates run at another; asttokens 2.4.1 in the zoo lost 5 of
    14 candidates (11 of 20 in bench_validate) at load 4-7 on 2 CPUs to a 1.0 s wall deadline
    on a test that ran 1.2 ms at baseline and 0.2 s as the first astroid test of a run."""
    _bases: dict[tuple[str, str], Baseline | str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _pending: dict[tuple[str, str], threading.Event] = field(default_factory=dict)
    _why: dict[tuple[str, str], str] = field(default_factory=dict)
    """Why the baseline of a (commit, base patch) failed, in one line."""

    def timeout(self, baseline: Baseline, selected: Sequence[str] | None) -> float:
        """The baseline-derived budget, plus a little per selected test: a failing test costs
        more than a passing one (tracebacks, assertion diffs), and a broken run fails many."""
        extra = min(0.25 * len(selected), 10.0) if selected is not None else 0.0
        return round((adaptive_timeout(baseline, selected, factor=self.timeout_factor,
                                       margin_s=self.timeout_margin_s) + extra) * self.busy(), 3)

    def deadlines(self, baseline: Baseline, selected: Sequence[str] | None) -> Deadlines:
        """Per-test deadlines for a broken tree's run: a test still running 10x its baseline
        duration plus 1 s (times :attr:`busy`) after it started, or that has used 20x its
        duration plus 0.5 s of CPU since, is taken for a hang and the run ends as timed out,
        instead of waiting out the whole run's budget. The CPU deadline catches a busy loop in
        a short test sooner, however loaded the machine is; from 50 ms of baseline up it is
        never the tighter of the two on a quiet machine. Only a broken run gets them: they
        can turn a slow run into a ``timeout`` refusal, never into an accepted task."""
        durations = baseline.durations_s
        fallback = max(durations.values(), default=1.0)
        tests = durations.keys() if selected is None else selected
        base = {t: durations.get(t, fallback) for t in tests}
        busy = self.busy()
        return Deadlines(
            wall={t: round((self.test_deadline_factor * d + self.test_deadline_floor_s) * busy, 3)
                  for t, d in base.items()},
            cpu={t: round(self.test_cpu_factor * d + self.test_cpu_floor_s, 3)
                 for t, d in base.items()})

    def baseline_for(self, worker: Worker, commit: str, base_patch: str) -> Baseline | str:
        """The baseline at ``commit`` + ``base_patch`` (or the reason there is none)."""
        if commit == self.head and not base_patch.strip():
            return self.baseline
        key = self._key(commit, base_patch)
        with self._lock:
            if key in self._bases:
                return self._bases[key]
            event = self._pending.get(key)
            mine = event is None
            if mine:
                event = self._pending[key] = threading.Event()
        assert event is not None
        if not mine:
            event.wait()
            return self._bases[key]
        result: Baseline | str = "baseline_failed"
        try:
            result = self._measure(worker, commit, base_patch)
        finally:
            with self._lock:
                self._bases[key] = result
            event.set()
        return result

    @staticmethod
    def _key(commit: str, base_patch: str) -> tuple[str, str]:
        return commit, hashlib.sha256(base_patch.encode()).hexdigest()

    def why(self, commit: str, base_patch: str) -> str:
        """Why :meth:`baseline_for` found no baseline at this state (one line, or "")."""
        return self._why.get(self._key(commit, base_patch), "")

    def _measure(self, worker: Worker, commit: str, base_patch: str) -> Baseline | str:
        """As many full runs at the state as the head baseline had (at least two); flaky:
        any test whose outcome differs between them or that is missing from one, and any
        test flaky in the head's baseline."""
        key = self._key(commit, base_patch)
        try:
            worker.checkout(TreeState(commit, (base_patch,)))
        except SynthesisError as exc:
            self._why[key] = first_error(str(exc))
            return "base_patch_failed"
        n = max(2, self.baseline.runs)
        head_flaky = set(self.baseline.flaky)
        runs: list[RunEvidence] = []
        for _ in range(n):
            try:
                res = worker.run(None, 2 * self.timeout(self.baseline, None))
            except SandboxError as exc:
                self._why[key] = first_error(str(exc))
                return "baseline_failed"
            ev = evidence_of(res, None)
            if not ev.usable:
                self._why[key] = "the baseline's run went past its budget" if ev.timed_out \
                    else run_failure(res.exit_code, res.outcomes, res.messages, res.log_tail)
                return "baseline_failed"
            runs.append(ev)
        ids = set().union(*(r.outcomes for r in runs))
        # a test flaky at the head (on a busy machine, say) is flaky at this state too
        flaky = sorted(t for t in ids if len({r.outcomes.get(t) for r in runs}) > 1
                       or t in head_flaky)
        outcomes: dict[str, TestStatus] = {t: runs[0].outcomes.get(t, "error") for t in ids}
        uncollected = {t: "did not collect" for r in runs for t, o in r.outcomes.items()
                       if "::" not in t and o in FAILING}
        durations = {t: self.baseline.durations_s.get(t, max(self.baseline.durations_s.values(),
                                                             default=1.0)) for t in ids}
        return Baseline(repo=self.baseline.repo, commit=commit, env_key=worker.env.key,
                        runs=n, outcomes=outcomes, durations_s=durations, flaky=flaky,
                        collect_errors=dict(sorted(uncollected.items())),
                        startup_s=self.baseline.startup_s, test_cmd=self.baseline.test_cmd)


def select_tests(cand: Candidate, baseline: Baseline) -> list[str] | None:
    """The tests to run on the broken tree, fastest first; None for the full suite: an edit
    beyond function bodies, or of a function that ran outside any one test (what it computed
    at import or in a shared fixture may be used by any test)."""
    if cand.scope != "body" or not cand.changed or not baseline.coverage:
        return None
    shared = set(baseline.shared)
    if any(f"{sym.file}::{sym.qualname}" in shared for sym in cand.changed):
        return None
    eligible = baseline.passing()
    tests: set[str] = set(baseline.uncovered)
    for sym in cand.changed:
        tests.update(baseline.coverage.get(f"{sym.file}::{sym.qualname}", []))
    durations = baseline.durations_s
    return sorted(tests & eligible, key=lambda t: (durations.get(t, 0.0), t))


def _imports(outcomes: Mapping[str, str], baseline: Baseline) -> bool:
    """False when the broken tree imports nowhere the run looked: modules that collected at
    baseline failed to collect, and not one test reported (``outcomes``: the run's own,
    before a selection's unreported tests count as errors). A module that fails while others
    run is the gates' to judge, its tests errors (:func:`~swemill.validate.gates.
    with_collect_errors`); one that did not collect at baseline either says nothing."""
    known = baseline.collect_errors
    failed = any("::" not in k and v in FAILING and k not in known for k, v in outcomes.items())
    return not failed or any("::" in k for k in outcomes)


def _conftest_failed(res: WarmResult) -> bool:
    """pytest stopped at loading a conftest (``ImportError while loading conftest`` or a
    conftest's own exception at import, exit 4) and ran no test."""
    return res.exit_code == 4 and not res.outcomes and (
        "while loading conftest" in res.log_tail or "ConftestImportFailure" in res.log_tail)


def _refused(cand: Candidate, reason: str, commit: str, detail: str = "") -> Checked:
    return Checked(cand, GateVerdict4(False, reason, detail=detail), commit)


def check_candidate(ctx: CheckContext, worker: Worker, cand: Candidate) -> Checked:
    """Run and judge one candidate; the worker's workspace is left at its head commit (the
    clone's commit for a worker of another commit's environment)."""
    commit = str(cand.metadata.get("base_commit") or ctx.head)
    base_patch = str(cand.metadata.get("base_patch") or "")
    try:
        out = _check(ctx, worker, cand, commit, base_patch)
    except SandboxError as exc:
        # The warm server died twice (memory, a crash it could not contain): a counted drop.
        out = _refused(cand, "crashed", commit, first_error(str(exc)))
    finally:
        worker.reset(worker.head)
    out.env_key = worker.env.key
    if out.reason == "no_fail_to_pass" and cand.metadata.get("no_bug_reason"):
        out.verdict.reason = str(cand.metadata["no_bug_reason"])  # e.g. a correct rewrite
    return out


def _check(ctx: CheckContext, worker: Worker, cand: Candidate, commit: str,
           base_patch: str) -> Checked:
    plugins = suite_plugin_files_of(worker.env.source_path)
    if touched := sorted(set(patch_files(cand.bug_patch)) & plugins):
        return _refused(cand, "runner_plugin", commit,
                        f"{touched[0]}: the suite loads it as a pytest plugin (pytest_plugins, "
                        "addopts -p), and the grader never takes a change to it")
    baseline = ctx.baseline_for(worker, commit, base_patch)
    if isinstance(baseline, str):
        return _refused(cand, baseline, commit, ctx.why(commit, base_patch))
    at_head = commit == ctx.head and not base_patch.strip()
    selected = select_tests(cand, baseline) if at_head else None
    if selected is not None and not selected:
        return _refused(cand, "no_fail_to_pass", commit, "no passing test executes the change")
    try:
        worker.checkout(TreeState(commit, (base_patch, cand.bug_patch)))
    except SynthesisError as exc:
        verdict = decide(baseline=baseline, applied=False, imports=False, broken=None,
                         golden_runs=[], selected=selected)
        verdict.detail = first_error(str(exc))
        return Checked(cand, verdict, commit, base_patch)
    whole_first = selected is not None and _mostly(baseline, selected)
    ran = None if whole_first else selected
    res = worker.run(ran, ctx.timeout(baseline, ran), ctx.deadlines(baseline, ran),
                     edited_whole=whole_first)
    broken = evidence_of(res, ran)
    # a whole suite run first confirms the selection, unless a test outside it did not pass:
    # then the candidate is a whole-suite one from the start
    missed = _map_missed(baseline, selected, broken) if whole_first and selected else ""
    selected = None if missed else selected
    confirmed = broken if whole_first and not missed else None
    first = decide(baseline=baseline, applied=True, imports=_imports(res.outcomes, baseline),
                   broken=broken, golden_runs=[], selected=selected, confirm=confirmed)
    if first.reason != "not_solvable":  # F2P / P2P already settled it: no golden run
        if first.reason == "untrusted_log" and (res.exit_code < 0 or not res.outcomes):
            # a conftest that runs the broken code at import ends pytest before any test
            # (exit 4; marshmallow 3.22.0 builds its schemas there): the tree does not import
            first = GateVerdict4(False, "import_failed" if _conftest_failed(res) else "crashed")
        first.detail = refusal_detail(first.reason, exit_code=res.exit_code,
                                      outcomes=res.outcomes, messages=res.messages,
                                      log=res.log_tail, hung=res.hung, selected=selected)
        return Checked(cand, first, commit, base_patch, selected is not None)
    out = _settle(ctx, worker, cand, baseline, (commit, base_patch), broken, res.messages,
                  selected, confirmed=confirmed, mapped=not missed)
    if missed:
        out.verdict.detail = out.verdict.detail or f"judged on the whole suite: {missed}"
    if out.verdict.accepted:
        out.near_miss = _near_miss(ctx, worker, cand, baseline, commit, base_patch, out.verdict)
    return out


def _settle(ctx: CheckContext, worker: Worker, cand: Candidate, baseline: Baseline,
            base: tuple[str, str], broken: RunEvidence, messages: dict[str, str],
            selected: list[str] | None, earlier: Sequence[RunEvidence] = (),
            confirmed: RunEvidence | None = None, mapped: bool = True) -> Checked:
    """A broken run with newly failing tests: repeat those on the broken tree; for a
    selection, run the whole suite on the broken tree once (no PASS_TO_PASS test unseen
    there), and where it disagrees with the selection, judge the candidate on the whole suite
    instead (``earlier``: the selection's runs, which count as repeats there); then the
    golden runs. ``confirmed``: the first broken run was that whole-suite run already.
    ``mapped``: the coverage map stands for this candidate (no whole-suite run contradicted
    its selection). Where a test changed outcome between broken runs, the passing tests that
    run the changed code are run :attr:`CheckContext.steady_runs` more times first."""
    commit, base_patch = base
    again = _newly_failing(baseline, broken, selected)
    # a selection's whole-suite run is a run of the broken tree too, FAIL_TO_PASS included
    # (``decide`` holds a test that does not fail there as flaky): one of the ``repeat`` runs
    confirming = (selected is not None and confirmed is None
                  and bool(baseline.passing() - set(selected)))
    repeats = [*earlier, *(evidence_of(worker.run(again, ctx.timeout(baseline, again),
                                                ctx.deadlines(baseline, again), terse=True),
                                     again)
                           for _ in range(max(0, ctx.repeat - 1 - confirming)))]
    needed = max(2, ctx.repeat)
    confirm = confirmed

    def judge(golden_runs: list[RunEvidence], at_head: bool = False) -> GateVerdict4:
        return decide(baseline=baseline, applied=True, imports=True, broken=broken,
                      golden_runs=golden_runs, selected=selected, repeats=repeats,
                      golden_needed=needed, confirm=confirm, golden_is_head=at_head)

    first = judge([])
    if first.reason == "not_solvable" and confirming and selected is not None:
        res = worker.run(None, ctx.timeout(baseline, None), ctx.deadlines(baseline, None),
                         terse=True, edited_whole=True, once=True)
        confirm = evidence_of(res, None)
        missed = _map_missed(baseline, selected, confirm)
        if missed:  # the coverage map did not stand for the suite here: no shortcut
            out = _settle(ctx, worker, cand, baseline, base, confirm,
                          {**res.messages, **messages}, None, [broken, *repeats], mapped=False)
            out.verdict.detail = out.verdict.detail or f"judged on the whole suite: {missed}"
            return out
        first = judge([])
    if first.reason != "not_solvable":  # flaky under the bug
        return Checked(cand, first, commit, base_patch, selected is not None)
    if first.flaky:  # the bug made an outcome random: so may it have others that passed
        suspects = _suspects(cand, baseline, broken, selected, mapped)
        if suspects != []:  # None: the whole suite
            repeats += [evidence_of(worker.run(suspects, ctx.timeout(baseline, suspects),
                                               ctx.deadlines(baseline, suspects), terse=True),
                                    suspects)
                        for _ in range(ctx.steady_runs)]
            first = judge([])
            if first.reason != "not_solvable":
                return Checked(cand, first, commit, base_patch, selected is not None)
    golden = cand.golden_patch or reverse_patch(cand.bug_patch)
    try:
        worker.checkout(TreeState(commit, (base_patch, cand.bug_patch, golden)))
    except SynthesisError as exc:
        return Checked(cand, GateVerdict4(False, "golden_failed", detail=first_error(str(exc))),
                       commit, base_patch)
    at_head = worker.equals_head()
    if at_head:  # the tree the baseline ran three times: two runs suffice
        needed = 2
    verdict = judge([evidence_of(worker.run(selected, ctx.timeout(baseline, selected),
                                            terse=True), selected)
                     for _ in range(needed)], at_head)
    # a test whose module failed to collect says what its module said
    collectors = [k for k in messages if k not in baseline.outcomes]
    messages = {t: messages.get(t) or messages.get(collector_of(t, collectors) or "", "")
                for t in verdict.fail_to_pass}
    return Checked(cand, verdict, commit, base_patch, selected is not None, messages)


def _suspects(cand: Candidate, baseline: Baseline, broken: RunEvidence,
              selected: Sequence[str] | None, mapped: bool) -> list[str] | None:
    """The tests that run the changed code and passed in the first broken run: where the bug
    made one test's outcome random, these may have passed by chance (pyparsing 3.1.4: a
    ``' '.join`` mutant of ``unicode_set.printables`` fails six tests that draw random
    characters about half of the time; two broken runs saw one of them pass and put it in
    PASS_TO_PASS, and the cold audit failed it). None when the coverage map does not know
    them (an edit beyond a function body, code that ran outside any one test, a selection
    the whole suite contradicted: ``mapped`` False), meaning the whole suite, whose every
    passing test is then a suspect."""
    if selected is None:
        selected = select_tests(cand, baseline) if mapped else None
        if selected is None:
            return None
    return [t for t in selected if broken.outcomes.get(t) in PASSING]


def _map_missed(baseline: Baseline, selected: Sequence[str], whole: RunEvidence) -> str:
    """Where the whole suite on the broken tree disagrees with the selection (a baseline-
    passing test outside it did not pass), in a few words; "" when it agrees (a selected test
    it ran otherwise is flaky under the bug, for the gates). A function whose result the test
    process caches is seen by the map in the first test that calls it only (jmespath's parse
    cache)."""
    if not whole.usable:
        return "its run on the broken tree timed out or its log is untrusted"
    odd = sorted(t for t in baseline.passing() - set(selected)
                 if whole.outcomes.get(t) not in PASSING)
    return f"{len(odd)} test(s) outside the selection did not pass, first {odd[0]}" if odd \
        else ""


def _mostly(baseline: Baseline, selected: Sequence[str]) -> bool:
    """Does the selection take half of the suite's baseline time or more? Then the broken
    tree runs the whole suite first, which both runs the selection and confirms it: a
    survivor's newly failing tests then run ``repeat - 1`` more times, instead of the
    selection, one repeat and the whole suite (asttokens 2.4.1: 104 of 116 tests)."""
    durations = baseline.durations_s
    total = sum(durations.get(t, 0.0) for t in baseline.passing())
    return total > 0 and 2 * sum(durations.get(t, 0.0) for t in selected) >= total


def _newly_failing(baseline: Baseline, broken: RunEvidence, selected: Sequence[str] | None
                   ) -> list[str]:
    """The baseline-passing tests the broken run failed, in the run's order."""
    eligible = baseline.passing()
    order = selected if selected is not None else list(broken.outcomes)
    return [t for t in order if t in eligible and broken.outcomes.get(t) in FAILING]


def _near_miss(ctx: CheckContext, worker: Worker, cand: Candidate, baseline: Baseline,
               commit: str, base_patch: str, verdict: GateVerdict4) -> tuple[int, int] | None:
    """Run each near-miss variant (``cand.metadata["near_miss"]``: patches of the base tree)
    against the task's lists: FAIL_TO_PASS first, then the PASS_TO_PASS tests that execute
    the changed code (the rest keep their outcome), in one run that stops at the first
    failure (only whether one fails is wanted). A variant that does not apply is not
    counted; a run that times out or crashes caught it."""
    variants = [str(v) for v in cand.metadata.get("near_miss") or []
                if str(v).strip()][: ctx.near_misses]
    if not variants:
        return None
    p2p = set(verdict.pass_to_pass)
    selected = select_tests(cand, baseline)
    tests = [*verdict.fail_to_pass,
             *sorted(p2p if selected is None else p2p & set(selected))]
    # No per-test deadlines here (a kill by one was followed by false timeouts in the worker's
    # next candidates: 14 of 40 on more-itertools); a whole-run budget instead, also in CPU
    # seconds: a variant that loops forever ends there, not at the load-scaled wall budget
    cpu = adaptive_timeout(baseline, tests, factor=ctx.timeout_factor, margin_s=1.0)
    tried = caught = 0
    for variant in variants:
        try:
            worker.checkout(TreeState(commit, (base_patch, variant)))
        except SynthesisError:
            continue
        tried += 1
        try:
            ev = evidence_of(worker.run(tests, cpu * ctx.busy(), terse=True, maxfail=1,
                                        once=True, cpu_timeout=cpu), tests)
        except SandboxError:  # the server died under the variant: the task's verdict stands
            caught += 1
            continue
        # a test the run did not reach after the first failure is "error" here: caught
        caught += not ev.usable or any(ev.outcomes.get(t) not in PASSING for t in tests)
    return (tried, caught) if tried else None
