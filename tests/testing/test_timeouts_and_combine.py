"""Adaptive timeouts come from measured durations; flaky tests are those whose outcome moves."""

from __future__ import annotations

from swemill.core.records import Baseline, TestResult, TestStatus
from swemill.testing.baseline import combine_runs
from swemill.testing.report import TestRunReport
from swemill.testing.timeouts import adaptive_timeout


def baseline(**durations: float) -> Baseline:
    return Baseline(repo="r", commit="c", env_key="r@c", runs=3,
                    outcomes=dict.fromkeys(durations, "passed"), durations_s=durations,
                    startup_s=0.5)


def test_timeout_scales_with_the_selected_tests() -> None:
    b = baseline(a=1.0, b=0.1, c=10.0)
    assert adaptive_timeout(b, ["a", "b"], factor=3, margin_s=5) == 3 * 1.1 + 1.0 + 5
    assert adaptive_timeout(b, None, factor=3, margin_s=5) == 3 * 11.1 + 1.0 + 5
    assert adaptive_timeout(b, ["a"]) < adaptive_timeout(b, ["c"])


def test_unknown_test_counts_as_the_slowest() -> None:
    b = baseline(a=1.0, c=10.0)
    assert adaptive_timeout(b, ["new"], factor=1, margin_s=0) == 10.0 + 1.0


def run(**outcomes: tuple[TestStatus, float]) -> TestRunReport:
    results = {n: TestResult(nodeid=n, outcome=o, duration_s=d) for n, (o, d) in outcomes.items()}
    return TestRunReport(results=results, exit_code=0, trustworthy=True)


def test_combine_finds_flaky_and_takes_median_durations() -> None:
    runs = [
        run(a=("passed", 1.0), b=("passed", 0.1), c=("failed", 0.2), d=("passed", 0.3)),
        run(a=("passed", 3.0), b=("failed", 0.1), c=("failed", 0.4)),
        run(a=("passed", 2.0), b=("passed", 0.1), c=("failed", 0.3), d=("passed", 0.3)),
    ]
    outcomes, durations, flaky = combine_runs(runs)
    assert flaky == ["b", "d"]  # b changes outcome; d is missing from one run
    assert outcomes == {"a": "passed", "b": "passed", "c": "failed", "d": "passed"}
    assert durations["a"] == 2.0 and durations["c"] == 0.3
