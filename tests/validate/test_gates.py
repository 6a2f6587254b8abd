"""The four gates are pure: each refusal reason is reachable and flaky tests never leak in."""

from __future__ import annotations

from typing import Any

from swemill.core.records import Baseline
from swemill.validate.gates import RunEvidence, decide

BASE = Baseline(
    repo="r", commit="c", env_key="k", runs=3,
    outcomes={"t::a": "passed", "t::b": "passed", "t::c": "passed", "t::d": "failed",
              "t::flaky": "passed"},
    durations_s={}, flaky=["t::flaky"],
)


def ev(**outcomes: str) -> RunEvidence:
    return RunEvidence(outcomes={f"t::{k}": v for k, v in outcomes.items()}, exit_code=1)  # type: ignore[misc]


def ok_runs(**outcomes: str) -> list[RunEvidence]:
    return [RunEvidence({f"t::{k}": v for k, v in outcomes.items()}, 0) for _ in range(2)]  # type: ignore[misc]


def test_a_selection_takes_pass_to_pass_from_the_whole_suite_on_the_broken_tree() -> None:
    args: dict[str, Any] = dict(
        baseline=BASE, applied=True, imports=True,
        broken=ev(a="failed", b="passed", flaky="failed"),
        golden_runs=ok_runs(a="passed", b="passed", flaky="passed"),
        selected=["t::a", "t::b", "t::flaky"])
    v = decide(**args)  # c was never run on the broken tree: no verdict yet
    assert (v.accepted, v.reason) == (False, "not_solvable") and "outside the selection" in v.detail
    v = decide(**args, confirm=ev(a="failed", b="passed", c="passed", d="failed"))
    assert v.accepted, v
    assert v.fail_to_pass == ["t::a"]
    assert v.pass_to_pass == ["t::b", "t::c"]  # c seen passing; d failed at baseline; flaky never


def test_a_test_outside_the_selection_that_fails_on_the_whole_suite_is_in_no_list() -> None:
    v = decide(baseline=BASE, applied=True, imports=True, broken=ev(a="failed", b="passed"),
               golden_runs=ok_runs(a="passed", b="passed"), selected=["t::a", "t::b"],
               confirm=ev(a="failed", b="passed", c="failed"))
    assert v.accepted and (v.fail_to_pass, v.pass_to_pass) == (["t::a"], ["t::b"])
    # one the selection ran and the whole suite ran otherwise is flaky under the bug
    v = decide(baseline=BASE, applied=True, imports=True, broken=ev(a="failed", b="passed"),
               golden_runs=ok_runs(a="passed", b="passed"), selected=["t::a", "t::b"],
               confirm=ev(a="failed", b="failed", c="passed"))
    assert v.accepted and v.pass_to_pass == ["t::c"] and v.flaky == ["t::b"]
    hung = RunEvidence({"t::a": "failed"}, exit_code=1, timed_out=True)
    v = decide(baseline=BASE, applied=True, imports=True, broken=ev(a="failed", b="passed"),
               golden_runs=ok_runs(a="passed", b="passed"), selected=["t::a", "t::b"],
               confirm=hung)
    assert (v.reason, v.detail) == ("timeout", "broken tree, whole suite")


def test_a_selection_whose_every_test_fails_waits_for_the_whole_suite() -> None:
    v = decide(baseline=BASE, applied=True, imports=True, broken=ev(a="failed", b="failed"),
               golden_runs=[], selected=["t::a", "t::b"])
    assert v.reason == "not_solvable"  # not no_pass_to_pass: c is still to be seen
    v = decide(baseline=BASE, applied=True, imports=True, broken=ev(a="failed", b="failed"),
               golden_runs=ok_runs(a="passed", b="passed"), selected=["t::a", "t::b"],
               confirm=ev(a="failed", b="failed", c="failed"))
    assert v.reason == "no_pass_to_pass"


def test_full_suite_inherits_nothing() -> None:
    v = decide(baseline=BASE, applied=True, imports=True, broken=ev(a="error", b="passed"),
               golden_runs=ok_runs(a="passed", b="passed"), selected=None)
    assert v.accepted and v.pass_to_pass == ["t::b"]


def test_each_refusal() -> None:
    good = ok_runs(a="passed", b="passed")
    cases = {
        "patch_failed": dict(applied=False, imports=True, broken=None, golden_runs=good),
        "import_failed": dict(applied=True, imports=False, broken=ev(a="failed"), golden_runs=good),
        "no_fail_to_pass": dict(applied=True, imports=True, broken=ev(a="passed", b="passed"),
                                golden_runs=good),
        "no_pass_to_pass": dict(applied=True, imports=True,
                                broken=ev(a="failed", b="failed", c="failed"), golden_runs=good),
        "not_solvable": dict(applied=True, imports=True, broken=ev(a="failed", b="passed"),
                             golden_runs=[good[0], RunEvidence({"t::a": "failed"}, 1)]),
    }
    for reason, kw in cases.items():
        selected = None if reason == "no_pass_to_pass" else ["t::a", "t::b"]
        assert decide(baseline=BASE, selected=selected, **kw).reason == reason  # type: ignore[arg-type]


def test_a_lying_log_is_not_a_pass() -> None:
    lying = RunEvidence({"t::a": "failed", "t::b": "passed"}, exit_code=0, trusted=False)
    v = decide(baseline=BASE, applied=True, imports=True, broken=lying,
               golden_runs=ok_runs(a="passed", b="passed"), selected=["t::a", "t::b"])
    assert v.reason == "untrusted_log"
    timed = RunEvidence({"t::a": "failed"}, exit_code=1, timed_out=True)
    v = decide(baseline=BASE, applied=True, imports=True, broken=timed,
               golden_runs=ok_runs(a="passed"), selected=["t::a"])
    assert v.reason == "timeout"


def test_golden_must_pass_twice() -> None:
    v = decide(baseline=BASE, applied=True, imports=True, broken=ev(a="failed", b="passed"),
               golden_runs=ok_runs(a="passed", b="passed")[:1], selected=["t::a", "t::b"])
    assert v.reason == "not_solvable"


def test_a_test_that_passes_in_another_broken_run_is_in_neither_list() -> None:
    first = ev(a="failed", b="failed")
    again = [ev(a="failed", b="passed"), ev(a="error", b="failed")]
    v = decide(baseline=BASE, applied=True, imports=True, broken=first, repeats=again,
               golden_runs=ok_runs(a="passed", b="passed") * 2, golden_needed=3,
               selected=["t::a", "t::b"], confirm=ev(a="failed", b="failed", c="passed"))
    assert v.accepted, v
    assert v.fail_to_pass == ["t::a"] and v.pass_to_pass == ["t::c"]  # c seen passing
    assert v.flaky == ["t::b"] and v.flake_rate == 0.5


def test_only_flaky_failures_are_a_flaky_drop_and_golden_runs_are_counted() -> None:
    v = decide(baseline=BASE, applied=True, imports=True, broken=ev(a="failed", b="passed"),
               repeats=[ev(a="passed", b="passed")], golden_runs=ok_runs(a="passed"),
               selected=["t::a", "t::b"])
    assert v.reason == "flaky" and v.flaky == ["t::a"]
    v = decide(baseline=BASE, applied=True, imports=True, broken=ev(a="failed", b="passed"),
               repeats=[ev(a="failed", b="passed")], golden_runs=ok_runs(a="passed", b="passed"),
               golden_needed=3, selected=["t::a", "t::b"])
    assert v.reason == "not_solvable" and "3 times" in v.detail
    hung = RunEvidence({"t::a": "failed"}, exit_code=1, timed_out=True)
    v = decide(baseline=BASE, applied=True, imports=True, broken=ev(a="failed", b="passed"),
               repeats=[hung], golden_runs=ok_runs(a="passed", b="passed"),
               selected=["t::a", "t::b"])
    assert (v.reason, v.detail) == ("timeout", "broken tree, run 2")


def test_an_untrusted_run_says_its_exit_code_and_pytests_internal_error() -> None:
    # jsonpickle 3.3.0: 29 candidates were dropped as "broken tree: report and exit code
    # disagree", and the summary blamed a plugin or conftest; the runs had ended in an
    # INTERNALERROR of swemill's outcomes-only runs (exit 3), which the line now shows
    log = ("exit 3, 1 outcomes\nINTERNALERROR> Traceback (most recent call last):\n"
           "INTERNALERROR>   File \"runner.py\", line 422, in pytest_make_collect_report\n"
           "INTERNALERROR> AssertionError: 'Skipped: numpy is not available'\n1 error in 0.6s\n")
    broken = RunEvidence({"t::a": "failed"}, exit_code=1)
    whole = RunEvidence({"t::a": "failed"}, exit_code=3, trusted=False, log=log)
    v = decide(baseline=BASE, applied=True, imports=True, broken=broken, repeats=[whole],
               golden_runs=ok_runs(a="passed", b="passed"), selected=["t::a", "t::b"])
    assert v.reason == "untrusted_log"
    assert v.detail == ("broken tree, run 2: report and exit code disagree, exit 3: "
                        "AssertionError: 'Skipped: numpy is not available'")
    quiet = RunEvidence({"t::a": "failed"}, exit_code=0, trusted=False, log="exit 0, 1 outcomes")
    v = decide(baseline=BASE, applied=True, imports=True, broken=quiet,
               golden_runs=ok_runs(a="passed"), selected=["t::a"])
    assert v.detail == "broken tree: report and exit code disagree, exit 0"


def test_a_module_that_fails_to_collect_under_the_bug_puts_its_tests_in_fail_to_pass() -> None:
    base = Baseline(repo="r", commit="c", env_key="k", runs=3, durations_s={},
                    outcomes={"t::a": "passed", "t::b": "passed", "m.py::x": "passed",
                              "m.py::K::y": "passed"})
    # m.py builds something at import with the broken code: it reports itself, not its tests
    broken = RunEvidence({"t::a": "failed", "t::b": "passed", "m.py": "error"}, exit_code=1)
    v = decide(baseline=base, applied=True, imports=True, broken=broken,
               golden_runs=[RunEvidence(dict.fromkeys(base.outcomes, "passed"), 0)] * 2,  # type: ignore[arg-type]
               selected=None)
    assert v.accepted, v
    assert v.fail_to_pass == ["m.py::K::y", "m.py::x", "t::a"]
    assert v.pass_to_pass == ["t::b"]
    # a repeat in which the module collects and its tests pass makes them flaky, not F2P
    calm = RunEvidence({"t::a": "failed", "m.py::x": "passed", "m.py::K::y": "passed"}, 1)
    v = decide(baseline=base, applied=True, imports=True, broken=broken, repeats=[calm],
               golden_runs=[RunEvidence(dict.fromkeys(base.outcomes, "passed"), 0)] * 2,  # type: ignore[arg-type]
               selected=None)
    assert v.accepted and v.fail_to_pass == ["t::a"] and v.flaky == ["m.py::K::y", "m.py::x"]
    # a folder whose conftest fails to import reports itself too
    base = Baseline(repo="r", commit="c", env_key="k", runs=3, durations_s={},
                    outcomes={"t::a": "passed", "sub/m.py::x": "passed", "sub2/m.py::z": "passed"})
    broken = RunEvidence({"t::a": "passed", "sub": "error", "sub2/m.py::z": "passed"}, 1)
    v = decide(baseline=base, applied=True, imports=True, broken=broken,
               golden_runs=[RunEvidence(dict.fromkeys(base.outcomes, "passed"), 0)] * 2,  # type: ignore[arg-type]
               selected=None)
    assert v.accepted and v.fail_to_pass == ["sub/m.py::x"], v
    assert v.pass_to_pass == ["sub2/m.py::z", "t::a"]


def test_a_test_that_fails_on_the_head_tree_is_flaky_not_the_candidate_unsolvable() -> None:
    # apscheduler 3.10.4: test_broken_pool (it waits 3 s for a process pool to restart)
    # passed in the baseline's runs and failed in a golden run on the head tree; the
    # candidate was dropped not_solvable and four other tasks kept it in PASS_TO_PASS
    runs = [RunEvidence({"t::a": "passed", "t::b": "failed", "t::c": "passed"}, 1),  # type: ignore[arg-type]
            RunEvidence({"t::a": "passed", "t::b": "passed", "t::c": "passed"}, 0)]  # type: ignore[arg-type]
    args: dict[str, Any] = dict(baseline=BASE, applied=True, imports=True,
                                broken=ev(a="failed", b="passed", c="passed"), golden_runs=runs,
                                selected=None)
    elsewhere = decide(**args)  # a golden tree that is not the head's: the fix is not enough
    assert (elsewhere.reason, elsewhere.head_failed) == ("not_solvable", [])
    v = decide(**args, golden_is_head=True)
    assert v.accepted and v.head_failed == ["t::b"]
    assert (v.fail_to_pass, v.pass_to_pass) == (["t::a"], ["t::c"])
    # a FAIL_TO_PASS test that did not pass there leaves nothing to grade on
    v = decide(**{**args, "broken": ev(a="passed", b="failed", c="passed")},
               golden_is_head=True)
    assert (v.accepted, v.reason, v.head_failed) == (False, "flaky", ["t::b"])
    assert "head tree" in v.detail
