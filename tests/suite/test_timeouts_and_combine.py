"""Adaptive timeouts come from measured durations; flaky tests are those whose outcome moves."""

from __future__ import annotations

from pathlib import Path

from swemill.core.records import Baseline, TestResult, TestStatus
from swemill.suite.baseline import combine_runs
from swemill.suite.timeouts import (
    BUSY_MAX,
    SUITE_CEILING_S,
    SUITE_FLOOR_S,
    SUITE_PER_TEST_S,
    adaptive_timeout,
    busy_factor,
    count_tests,
    suite_timeout_for,
)
from swemill.suite.verdict import TestRunReport


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


def _suite(root: Path, files: int, tests_each: int) -> Path:
    for i in range(files):
        body = "".join(f"def test_{k}():\n    pass\n\n" for k in range(tests_each))
        path = root / "tests" / f"test_m{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("import pytest\n\n" + body + "class TestC:\n    async def test_m(self):\n"
                        "        pass\n")
    (root / "src").mkdir(exist_ok=True)
    (root / "src" / "helpers.py").write_text("def test_like():\n    pass\n")  # not a test file
    return root


def test_suite_timeout_is_derived_from_the_number_of_tests(tmp_path: Path) -> None:
    small = suite_timeout_for(_suite(tmp_path / "small", 1, 2), busy=1.0)
    assert small.tests == 3 and small.seconds == SUITE_FLOOR_S
    mid = suite_timeout_for(_suite(tmp_path / "mid", 10, 29), busy=1.0)
    assert mid.tests == 300 and SUITE_FLOOR_S < mid.seconds < SUITE_CEILING_S
    assert mid.seconds == 60.0 + 300 * SUITE_PER_TEST_S
    big = suite_timeout_for(_suite(tmp_path / "big", 50, 99), busy=1.0)
    assert big.tests == 5000 and big.seconds == SUITE_CEILING_S
    assert big.describe() == "3600 s (the default for 5000 test functions)"


def test_a_busy_machine_stretches_the_derived_suite_bound_never_a_given_one(
        tmp_path: Path) -> None:
    # packaging 24.1 at load 13 on 2 CPUs: its 380 s bound ran out in the first baseline run
    assert busy_factor(13.0, 2) == 6.5
    assert busy_factor(0.4, 2) == busy_factor(2.0, 2) == 1.0  # an idle machine: as before
    assert busy_factor(100.0, 2) == BUSY_MAX
    assert busy_factor() >= 1.0  # this machine's own load
    root = _suite(tmp_path / "s", 10, 29)
    busy = suite_timeout_for(root, busy=busy_factor(13.0, 2))
    assert busy.seconds == 6.5 * (60.0 + 300 * SUITE_PER_TEST_S)
    assert busy.describe() == "2340 s (the default for 300 test functions, x6.5 for a busy " \
                              "machine)"
    assert suite_timeout_for(root, 90.0, busy=6.5).seconds == 90.0  # --suite-timeout is exact


def test_a_given_suite_timeout_wins(tmp_path: Path) -> None:
    given = suite_timeout_for(_suite(tmp_path, 3, 3), 7.0)
    assert (given.seconds, given.tests, given.describe()) == (7.0, None, "7 s")


def test_hidden_and_vendored_folders_are_not_counted(tmp_path: Path) -> None:
    _suite(tmp_path, 1, 1)
    for hidden in (".venv/lib/tests", "build/tests", "node_modules/x"):
        _suite(tmp_path / hidden, 5, 50)
    assert count_tests(tmp_path) == 2
