"""The warm server's optimisations change how fast a candidate is judged, never the judgement:
on procedural candidates of the bundled sample and of a real PyPI project (toolz 1.0.0), a
worker with every optimisation on (fork, code cache, report cache, head image, hotpatch) and a
worker with every one off (each run a fresh interpreter that imports and collects everything
itself) reach the same verdicts, FAIL_TO_PASS / PASS_TO_PASS lists and failure messages, inside
the real sandbox; and the head image really served the runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from swemill.repo.envbuild import build_env
from swemill.repo.sources import resolve_source
from swemill.sandbox import Limits
from swemill.suite.baseline import run_baseline
from swemill.synth import make_strategy
from swemill.synth.strategy import RepoView
from swemill.validate.check import CheckContext, Checked, check_candidate
from swemill.validate.inside.protocol import Flags
from swemill.validate.runners import ColdRunner
from swemill.validate.shadow import Shadow
from swemill.validate.worker import Worker, open_base

pytestmark = pytest.mark.slow


def _judgement(c: Checked) -> tuple[object, ...]:
    v = c.verdict
    messages = {k: re.sub(r"0x[0-9a-f]+", "0x?", m) for k, m in c.messages.items()}
    return (v.accepted, v.reason, v.fail_to_pass, v.pass_to_pass, messages)


@pytest.mark.parametrize(("spec", "seed", "n"), [
    ("sample", 3, 8),
    pytest.param("pypi:toolz==1.0.0", 0, 5, marks=pytest.mark.network),
])
def test_every_optimisation_off_gives_the_verdicts_of_all_on(
        spec: str, seed: int, n: int, shared_cache: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEMILL_CACHE", str(shared_cache))
    src = resolve_source(spec)
    env = build_env(src)
    baseline = run_baseline(env, backend="auto")
    view = RepoView(root=src.path, repo=src.repo, commit=src.commit, baseline=baseline,
                    seed=seed, max_candidates=n)
    cands = list(make_strategy("procedural").candidates(view))
    assert len(cands) == n
    ctx = CheckContext(baseline, src.commit)
    base = open_base(env, backend="auto", limits=Limits(timeout_s=300))
    shadow = Shadow(every=1)  # every image-served run is also run cold and compared
    fast = Worker(env, base, src.commit, prewarm_s=60, shadow=shadow)
    plain = Worker(env, base, src.commit, prewarm_s=60, flags=Flags.all_off())
    try:
        on = [check_candidate(ctx, fast, c) for c in cands]
        off = [check_candidate(ctx, plain, c) for c in cands]
        assert plain.server is not None and plain.server.warm is not None
        assert plain.server.warm.flags_off == Flags.names()  # the server was told
    finally:
        fast.close()
        plain.close()
        base.close()
    assert [_judgement(c) for c in on] == [_judgement(c) for c in off]
    accepted = sum(c.verdict.accepted for c in on)
    assert accepted >= 2
    # every accepted candidate had three selected runs (broken, golden twice): the image
    # served nearly all of them, and each was checked cold, in agreement; the plain worker
    # has no image
    assert fast.image is not None and fast.image.error == ""
    assert fast.image.runs >= 2 * accepted
    assert shadow.stats.checks + shadow.stats.inconclusive == fast.image.runs
    assert shadow.stats.mismatches == 0 and not shadow.image_off
    assert plain.image is None


def test_a_sandbox_that_cannot_spawn_gets_cold_runs_with_the_same_outcomes(
        sample_at_head: Any) -> None:
    """The runner a worker gets follows the sandbox's declared capability: with ``can_spawn``
    a warm server; the cold runner (``exec`` per run) gives the same per-test outcomes."""
    src, env, baseline = sample_at_head
    ids = sorted(baseline.passing())[:4]
    base = open_base(env, backend="auto", limits=Limits(timeout_s=300))
    worker = Worker(env, base, src.commit, image=False)
    try:
        assert worker.sb.can_spawn and worker.server is not None and worker.cold is None
        warm = worker.run(ids, 120)
        cold = ColdRunner(env, worker.sb).run(ids, 120)
    finally:
        worker.close()
        base.close()
    assert (warm.exit_code, warm.outcomes) == (cold.exit_code, cold.outcomes)
    assert cold.outcomes == dict.fromkeys(ids, "passed")
