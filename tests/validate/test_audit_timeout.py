"""The audit's cold whole-suite runs get a budget that grows with how busy the machine is."""

from __future__ import annotations

from swemill.core.records import Baseline
from swemill.suite.timeouts import adaptive_timeout, busy_factor
from swemill.validate.audit import audit_timeout


def test_the_audit_budget_is_twice_the_suite_times_the_machine_load() -> None:
    # marshmallow 3.22.0 at load 15 on 2 CPUs: both audit runs timed out and the audit
    # removed both written tasks as untrusted
    b = Baseline(repo="r", commit="c", env_key="r@c", runs=3,
                 outcomes={"a": "passed", "b": "passed"}, durations_s={"a": 1.0, "b": 2.0},
                 startup_s=0.5)
    quiet = audit_timeout(b, busy=1.0)
    assert quiet == 2 * adaptive_timeout(b, None) == 2 * (3 * 3.0 + 1.0 + 5)
    assert audit_timeout(b, busy=busy_factor(15.0, 2)) == 7.5 * quiet
    assert audit_timeout(b) >= quiet  # this machine, now
