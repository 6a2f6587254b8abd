"""A baseline at another commit (pr-mirror, rows) is measured like the head's: as many full
runs as the head baseline had, and it tells the tests of that commit, not the head's (save
that a test flaky at the head is flaky there too)."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from swemill.core.records import Baseline
from swemill.sandbox import Limits
from swemill.synth.patches import file_diff
from swemill.validate.check import CheckContext
from swemill.validate.worker import Worker, open_base


@pytest.mark.slow
def test_baseline_at_an_older_commit_runs_as_often_as_the_head_one(
        sample_at_head: Any) -> None:
    src, env, head = sample_at_head
    older = subprocess.run(["git", "rev-parse", "HEAD~1"], cwd=src.path, capture_output=True,
                           text=True, check=True).stdout.strip()
    ctx = CheckContext(head, src.commit)
    base = open_base(env, backend="auto", limits=Limits(timeout_s=300))
    try:
        worker = Worker(env, base, src.commit)
        try:
            measured = ctx.baseline_for(worker, older, "")
            again = ctx.baseline_for(worker, older, "")  # measured once, then shared
            # a state whose tests cannot start, and one that does not apply: each says why
            conftest = subprocess.run(["git", "show", f"{older}:tests/conftest.py"],
                                      cwd=src.path, capture_output=True, text=True,
                                      check=True).stdout
            broken = file_diff("tests/conftest.py", conftest,
                               conftest + "\nraise RuntimeError('this commit needs a service')\n")
            failed = ctx.baseline_for(worker, older, broken)
            stale_patch = file_diff("tests/conftest.py", "no such line\n", "no such line\nx = 1\n")
            stale = ctx.baseline_for(worker, older, stale_patch)
            # a test flaky at the head (one that fails on a busy machine) is flaky here too
            shaky = sorted(set(measured.passing()) & set(head.passing()))[0]
            busy = CheckContext(head.model_copy(update={"flaky": [shaky]}), src.commit)
            held = busy.baseline_for(worker, older, "")
        finally:
            worker.close()
    finally:
        base.close()
    assert isinstance(measured, Baseline) and again is measured
    assert measured.commit == older and measured.runs == head.runs == 3
    assert measured.flaky == [] and measured.passing()
    assert isinstance(held, Baseline) and held.flaky == [shaky]
    assert held.passing() == measured.passing() - {shaky}
    assert failed == "baseline_failed"
    why = ctx.why(older, broken)
    assert why.startswith("pytest exit 4 (usage error"), why
    assert why.endswith("RuntimeError: this commit needs a service"), why
    assert stale == "base_patch_failed" and "tests/conftest.py" in ctx.why(older, stale_patch)
    # the head's own baseline is never re-measured
    assert ctx.baseline_for(worker, src.commit, "") is head
