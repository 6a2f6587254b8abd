"""A candidate's wall-clock limits grow with how busy the machine is; CPU limits do not.

Regression class: asttokens 2.4.1 in the zoo. ``TestAstroid::test_await`` ran 1.2 ms at
baseline and about 0.2 s as the first astroid test of a run (astroid's first use); its wall
deadline was 10 x 1.2 ms + 1 s. At load 4-7 on 2 CPUs 5 of 14 candidates (11 of 20 in
bench_validate) ended as ``timeout`` after 1.1-1.5 s, "test_await ran past its own deadline".
"""

from __future__ import annotations

from swemill.core.records import Baseline
from swemill.suite.timeouts import busy_factor
from swemill.validate.check import CheckContext

B = Baseline(repo="r", commit="c", env_key="r@c", runs=3,
             outcomes={"t::fast": "passed", "t::slow": "passed"},
             durations_s={"t::fast": 0.0012, "t::slow": 2.0}, startup_s=0.5)


def test_wall_limits_are_multiplied_by_the_load_per_cpu() -> None:
    quiet = CheckContext(B, "c", busy=lambda: 1.0)
    busy = CheckContext(B, "c", busy=lambda: busy_factor(7.0, 2))  # 3.5
    q, b = quiet.deadlines(B, ["t::fast"]), busy.deadlines(B, ["t::fast"])
    assert q.wall == {"t::fast": 1.012} and b.wall == {"t::fast": 3.542}
    assert q.cpu == b.cpu == {"t::fast": 0.524}  # CPU seconds do not stretch with the load
    assert busy.timeout(B, ["t::slow"]) == round(3.5 * quiet.timeout(B, ["t::slow"]), 3)
    assert quiet.timeout(B, None) == round(3 * 2.0012 + 2 * 0.5 + 5.0, 3)


def test_by_default_the_load_is_this_machines_now() -> None:
    ctx = CheckContext(B, "c")
    assert ctx.deadlines(B, ["t::fast"]).wall["t::fast"] >= 1.012
    assert ctx.timeout(B, None) >= CheckContext(B, "c", busy=lambda: 1.0).timeout(B, None)
