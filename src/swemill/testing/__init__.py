"""Test runs: pytest in a sandbox, judged from its report; the baseline and coverage map."""

from swemill.testing.baseline import combine_runs, fresh_sandbox, load_baseline, run_baseline
from swemill.testing.covermap import build_coverage_map, function_spans
from swemill.testing.report import TestRunReport, parse_report
from swemill.testing.runner import run_tests
from swemill.testing.timeouts import adaptive_timeout

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
