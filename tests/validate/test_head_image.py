"""The head image changes how fast a candidate is judged, never the judgement: on the sample's
procedural candidates, a worker with it and a worker without it (every run a fresh pytest in
a fork of the warm server) reach the same verdicts, FAIL_TO_PASS / PASS_TO_PASS lists and
failure messages, inside the real bwrap sandbox; and the image really served the runs."""

from __future__ import annotations

import re
from typing import Any

import pytest

from swemill.sandbox import Limits
from swemill.synth import make_strategy
from swemill.synth.strategy import RepoView
from swemill.validate.check import CheckContext, Checked, check_candidate
from swemill.validate.worker import Worker, open_base

pytestmark = pytest.mark.slow


def _judgement(c: Checked) -> tuple[object, ...]:
    v = c.verdict
    messages = {k: re.sub(r"0x[0-9a-f]+", "0x?", m) for k, m in c.messages.items()}
    return (v.accepted, v.reason, v.fail_to_pass, v.pass_to_pass, messages)


def test_the_head_image_gives_the_verdicts_of_fresh_runs(sample_at_head: Any) -> None:
    src, env, baseline = sample_at_head
    view = RepoView(root=src.path, repo=src.repo, commit=src.commit, baseline=baseline,
                    seed=3, max_candidates=16)
    cands = list(make_strategy("procedural").candidates(view))
    assert len(cands) >= 10
    ctx = CheckContext(baseline, src.commit)
    base = open_base(env, backend="auto", limits=Limits(timeout_s=300))
    imaged, plain = (Worker(env, base, src.commit, prewarm_s=60, image=flag)
                     for flag in (True, False))
    try:
        with_image = [check_candidate(ctx, imaged, c) for c in cands]
        without = [check_candidate(ctx, plain, c) for c in cands]
    finally:
        imaged.close()
        plain.close()
        base.close()
    assert [_judgement(c) for c in with_image] == [_judgement(c) for c in without]
    accepted = sum(c.verdict.accepted for c in with_image)
    assert accepted >= 5
    # every accepted candidate had three selected runs (broken, golden twice): the image
    # served nearly all of them, and the plain worker none
    assert imaged.image_error == "" and imaged.image_runs >= 2 * accepted
    assert plain.image_runs == 0 and not plain.image_fallbacks
