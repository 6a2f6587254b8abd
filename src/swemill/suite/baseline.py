"""The baseline: the suite at the base commit, run several times, plus the coverage map.

Each run gets a fresh copy of the working copy (tests may write files). The first run records
per-test coverage contexts; the last (of two or more) is *stuttered*: its processes are stopped
for 20 ms of every 40 (``run_tests(stutter=...)``), as on a machine with twice as much work
as CPUs, where tasks are graded (a trainer's many episodes at once). Durations are medians over
the other runs; a test whose outcome differs between runs (or that is missing from one) is
flaky and never used as FAIL_TO_PASS or PASS_TO_PASS. So a test that only passes on an idle
machine (a throttle held to 30 calls a second, a deadline of a few milliseconds) is in no
list: graded on a busy machine it would fail a correct fix. A stuttered run that does not
finish in twice the suite's bound, or cannot be trusted, is left out (``Baseline.stutter``
says whether one counted). Start-up is measured as the wall time of running the fastest
passing test minus that test's own duration. The result is saved as ``baseline.json`` next
to the environment.
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
from collections.abc import Callable, Iterator

from swemill.core.errors import TestRunError
from swemill.core.records import Baseline, TestStatus
from swemill.repo.cache import write_text_atomic
from swemill.repo.envbuild import RepoEnv
from swemill.repo.testdeps import describe_skipped
from swemill.sandbox import open_sandbox
from swemill.sandbox.contract import Sandbox
from swemill.sandbox.leftovers import scratch_dir
from swemill.suite.covermap import build_coverage_map, shared_functions
from swemill.suite.runner import command_line, run_tests
from swemill.suite.timeouts import SuiteTimeout, suite_timeout_for
from swemill.suite.verdict import TestRunReport

__all__ = ["run_baseline", "collect_errors", "combine_runs", "load_baseline", "fresh_sandbox",
           "BASELINE_VERSION"]

BASELINE_VERSION = 6
"""2: the coverage run also records shared functions and tests that start processes; 3: runs
turn off pytest-enabler and pytest-checkdocs (an older baseline holds their lint items, which
no run makes now, and an empty coverage map); 4: a test with a failed subtest is failed; 5:
runs turn off pytest-mypy-plugins (its YAML cases are in no newer run); 6: the last run is
stuttered (tests that fail on a busy machine are flaky)."""
STUTTER = "20:40"
"""The stuttered run's stop and period, in milliseconds."""

Step = Callable[[str], None]


def load_baseline(env: RepoEnv) -> Baseline | None:
    try:
        saved = Baseline.model_validate_json(env.baseline_path.read_text())
    except (FileNotFoundError, ValueError):
        return None
    return saved if saved.version >= BASELINE_VERSION else None


@contextlib.contextmanager
def fresh_sandbox(env: RepoEnv, backend: str = "auto") -> Iterator[Sandbox]:
    """A sandbox over a private copy of the env's working copy, deleted afterwards."""
    tmp = scratch_dir("ws")
    try:
        ws = tmp / "ws"
        shutil.copytree(env.source_path, ws, symlinks=True)
        with open_sandbox(ws, backend=backend, binds=env.binds()) as sb:
            yield sb
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_baseline(env: RepoEnv, *, backend: str = "auto", runs: int = 3,
                 suite_timeout: float | None = None, rebuild: bool = False,
                 step: Step | None = None) -> Baseline:
    """Return the env's baseline, running the suite ``runs`` times unless one is saved.

    Each run may take ``suite_timeout`` seconds; None derives the bound from the suite's size
    (:func:`swemill.suite.timeouts.suite_timeout_for`)."""
    cached = None if rebuild else load_baseline(env)
    if cached is not None:
        return cached
    say = step or (lambda _msg: None)
    bound = suite_timeout_for(env.source_path, suite_timeout)
    reports: list[TestRunReport] = []
    stuttered: TestRunReport | None = None
    for i in range(runs):
        stutter = STUTTER if runs >= 2 and i == runs - 1 else None
        say(f"baseline run {i + 1}/{runs}" + (" (with coverage)" if i == 0 else "")
            + (" (stuttered: a busy machine)" if stutter else ""))
        with fresh_sandbox(env, backend) as sb:
            report = run_tests(sb, env, None, timeout=bound.seconds * (2 if stutter else 1),
                               coverage=i == 0, stutter=stutter)
        if stutter:
            if report.trustworthy and not report.timed_out and report.stutter_stops:
                stuttered = report
            else:
                say("the stuttered run is left out: " + (report.problem or "it was never "
                                                          "stopped")[:200])
            continue
        _check(report, env, bound, i + 1)
        reports.append(report)
    outcomes, durations, flaky = combine_runs(reports)
    load_flaky: list[str] = []
    if stuttered is not None:  # its outcomes count, not its durations
        with_load = combine_runs([*reports, stuttered])[2]
        load_flaky, flaky = sorted(set(with_load) - set(flaky)), with_load
    say("measuring start-up")
    startup = measure_startup(env, backend, outcomes, durations)
    baseline = Baseline(
        repo=env.repo, commit=env.commit, env_key=env.key, runs=runs, outcomes=outcomes,
        durations_s=durations, flaky=flaky, load_flaky=load_flaky,
        stutter=STUTTER if stuttered is not None else "",
        collect_errors=collect_errors(reports),
        coverage=build_coverage_map(reports[0].coverage, env.source_path),
        shared=shared_functions(reports[0].shared_lines, env.source_path),
        uncovered=sorted(reports[0].spawned), version=BASELINE_VERSION,
        suite_wall_s=round(statistics.median(r.wall_s for r in reports[1:] or reports), 3),
        startup_s=startup, test_cmd=command_line(env),
    )
    write_text_atomic(env.baseline_path, baseline.model_dump_json(indent=2) + "\n")
    return baseline


def _check(report: TestRunReport, env: RepoEnv, bound: SuiteTimeout, run: int) -> None:
    if report.timed_out:
        raise TestRunError(f"the test suite of {env.repo} did not finish within "
                           f"{bound.describe()}{_where(report)}")
    if not report.results and report.collect_errors:
        # docopt: its conftest builds its collector the way pytest 6 stopped allowing, so the
        # whole collection failed; the cause is that error, not an empty suite
        nodeid, message = next(iter(report.collect_errors.items()))
        first = next((ln.strip() for ln in message.splitlines() if ln.strip()), "")
        more = len(report.collect_errors) - 1
        raise TestRunError(f"pytest collected no tests in {env.repo}: collecting "
                           f"{nodeid or 'the root'} failed: {first[:300]}"
                           + (f" (and {more} more collection errors)" if more else ""))
    if report.exit_code == 5 or (report.trustworthy and not report.results):
        raise TestRunError(f"pytest collected no tests in {env.repo}: nothing to run")
    if not report.trustworthy:
        # unearth 0.17.2: its conftest imports wsgiadapter, whose distribution has no wheel
        skipped = describe_skipped(env.skipped)
        note = f" (test dependencies not installed: {skipped})" if skipped else ""
        raise TestRunError(f"baseline run {run} of {env.repo} cannot be trusted: "
                           f"{report.problem}{note}")


def _where(report: TestRunReport) -> str:
    """What a run killed at the suite's bound was doing, and the two ways on: tests that
    wait for what the sandbox lacks (a database, the network) go with a recipe's
    ``--deselect``; a suite that is only slow gets a larger bound."""
    slow = sorted(report.results.values(), key=lambda r: -r.duration_s)[:2]
    done = f"{len(report.results)} tests had ended" + (
        " (the slowest " + ", ".join(f"{r.nodeid} {r.duration_s:.1f} s" for r in slow) + ")"
        if slow and slow[0].duration_s >= 1.0 else "")
    if not report.running:
        return f" ({done}); raise it with --suite-timeout SECONDS"
    return (f": it was still running {report.running} ({done}); tests that wait for a "
            f"service the sandbox lacks (a database, the network) can be left out with the "
            f"recipe's pytest_args (--deselect ID, or -k EXPR: docs/recipes.md); a suite "
            f"that is only slow needs --suite-timeout SECONDS")


def collect_errors(reports: list[TestRunReport]) -> dict[str, str]:
    """Every node that failed to collect in any of the runs, with its first message."""
    errors: dict[str, str] = {}
    for r in reports:
        for nodeid, message in r.collect_errors.items():
            errors.setdefault(nodeid, message[:600])
    return dict(sorted(errors.items()))


def combine_runs(reports: list[TestRunReport]
                 ) -> tuple[dict[str, TestStatus], dict[str, float], list[str]]:
    """Outcomes (first run's), median durations, and the flaky tests, over several runs."""
    ids: dict[str, None] = {}
    for r in reports:
        ids.update(dict.fromkeys(r.results))
    outcomes: dict[str, TestStatus] = {}
    durations: dict[str, float] = {}
    flaky: list[str] = []
    for nodeid in ids:
        seen = [r.results.get(nodeid) for r in reports]
        present = [s for s in seen if s is not None]
        if len({s.outcome for s in present}) > 1 or len(present) < len(seen):
            flaky.append(nodeid)
        outcomes[nodeid] = present[0].outcome
        durations[nodeid] = round(statistics.median(s.duration_s for s in present), 6)
    return outcomes, durations, sorted(flaky)


def measure_startup(env: RepoEnv, backend: str, outcomes: dict[str, TestStatus],
                    durations: dict[str, float], repeats: int = 3) -> float:
    """Wall time of a one-test run minus that test's duration (median of ``repeats``)."""
    passing = [n for n, o in outcomes.items() if o == "passed"]
    if not passing:
        return 0.0
    fastest = min(passing, key=lambda n: durations.get(n, 0.0))
    samples: list[float] = []
    with fresh_sandbox(env, backend) as sb:
        for _ in range(repeats):
            r = run_tests(sb, env, [fastest], timeout=120.0)
            samples.append(max(0.0, r.wall_s - r.results[fastest].duration_s))
    return round(statistics.median(samples), 3)
