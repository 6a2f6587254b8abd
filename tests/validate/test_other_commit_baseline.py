"""A baseline at another commit (pr-mirror, rows) is measured like the head's: as many full
runs as the head baseline had, and it tells the tests of that commit, not the head's."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from swemill.core.records import Baseline
from swemill.repo.envbuild import build_env
from swemill.repo.sources import resolve_source
from swemill.sandbox import Limits
from swemill.testing.baseline import run_baseline
from swemill.validate.check import CheckContext
from swemill.validate.worker import Worker, open_base


@pytest.mark.slow
def test_baseline_at_an_older_commit_runs_as_often_as_the_head_one(
        shared_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEMILL_CACHE", str(shared_cache))
    src = resolve_source("sample")
    env = build_env(src)
    head = run_baseline(env, backend="auto")
    older = subprocess.run(["git", "rev-parse", "HEAD~1"], cwd=src.path, capture_output=True,
                           text=True, check=True).stdout.strip()
    ctx = CheckContext(head, src.commit)
    base = open_base(env, backend="auto", limits=Limits(timeout_s=300))
    try:
        worker = Worker(env, base, src.commit)
        try:
            measured = ctx.baseline_for(worker, older, "")
            again = ctx.baseline_for(worker, older, "")  # measured once, then shared
        finally:
            worker.close()
    finally:
        base.close()
    assert isinstance(measured, Baseline) and again is measured
    assert measured.commit == older and measured.runs == head.runs == 3
    assert measured.flaky == [] and measured.passing()
    # the head's own baseline is never re-measured
    assert ctx.baseline_for(worker, src.commit, "") is head
