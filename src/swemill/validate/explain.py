"""One line per refused candidate: the error pytest printed, an exit code explained.

Pure text work over what a run left (exit code, per-test outcomes and messages, the log's
tail); :mod:`swemill.validate.check` calls :func:`refusal_detail` for every candidate the
broken tree's run refused, and the line goes into the ``candidates/`` table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from swemill.suite.said import PYTEST_EXIT, exit_meaning, first_error, one_line
from swemill.validate.gates import FAILING

__all__ = ["PYTEST_EXIT", "exit_meaning", "first_error", "one_line", "import_detail",
           "run_failure", "refusal_detail", "MISSING_MODULE"]

MISSING_MODULE = re.compile(r"No module named '([^']+)'")


def import_detail(outcomes: Mapping[str, str], messages: Mapping[str, str]) -> str:
    """``"tests/test_x.py: ModuleNotFoundError: No module named 'hypothesis'"``: the first
    test module (in name order) that failed to collect, and why."""
    broken = sorted(k for k, v in outcomes.items() if "::" not in k and v in FAILING)
    if not broken:
        return ""
    module = broken[0]
    more = f" (and {len(broken) - 1} more module(s))" if len(broken) > 1 else ""
    return one_line(f"{module}: {first_error(messages.get(module, '')) or 'did not collect'}"
                     f"{more}")


def run_failure(exit_code: int, outcomes: Mapping[str, str], messages: Mapping[str, str],
                log: str) -> str:
    """A run that could not be used: its exit code explained, then the first error line (a
    module that did not collect first, else the log's)."""
    if exit_code < 0:  # the log's tail is mostly the stack faulthandler dumped, if anything
        err = next((ln for ln in log.splitlines() if ln.startswith("Fatal Python error")), "")
    else:
        err = import_detail(outcomes, messages) or first_error(log)
    return one_line(exit_meaning(exit_code) + (f": {err}" if err else ""))


def refusal_detail(reason: str, *, exit_code: int, outcomes: Mapping[str, str],
                   messages: Mapping[str, str], log: str, hung: str | None = None,
                   selected: Sequence[str] | None = None) -> str:
    """One line for a candidate the broken tree's run refused (see the module docstring);
    ``selected``: the tests that run was limited to (None: the whole suite)."""
    if reason == "import_failed":
        return import_detail(outcomes, messages) or first_error(log)
    if reason == "crashed":
        if exit_code in (1, 2, 3) and not outcomes:
            err = first_error(log)
            return one_line(f"exit {exit_code} before pytest reported any test (the code under "
                            "test ended the process, or pytest failed inside)"
                            + (f": {err}" if err else ""))
        return run_failure(exit_code, outcomes, messages, log)
    if reason == "timeout":
        if hung:
            return one_line(f"{hung} ran past its own deadline")
        return "the broken tree's run went past its whole budget"
    if reason == "untrusted_log":
        err = first_error(log)
        return one_line(f"report and exit code disagree, {exit_meaning(exit_code)}"
                         + (f": {err}" if err else ""))
    if reason == "no_fail_to_pass":
        if selected is not None:
            return (f"none of the {len(selected)} test(s) that execute the changed code "
                    "failed on the broken tree")
        return "no test that passes at the baseline failed on the broken tree"
    if reason == "no_pass_to_pass":
        return "no test that passes at the baseline still passed on the broken tree"
    return first_error(log)
