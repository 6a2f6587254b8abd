"""Test runs: pytest in a sandbox, judged from its report; the baseline and coverage map."""

from swemill.suite.baseline import combine_runs, fresh_sandbox, load_baseline, run_baseline
from swemill.suite.covermap import build_coverage_map, function_spans
from swemill.suite.runner import run_tests
from swemill.suite.timeouts import adaptive_timeout
from swemill.suite.verdict import TestRunReport, parse_report

__all__ = [
    "TestRunReport",
    "adaptive_timeout",
    "build_coverage_map",
    "combine_runs",
    "fresh_sandbox",
    "function_spans",
    "load_baseline",
    "parse_report",
    "run_baseline",
    "run_tests",
]
