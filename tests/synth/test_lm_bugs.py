"""lm-modify and lm-rewrite against the fake OpenAI-compatible server (real HTTP on loopback).

The server answers bug-writing prompts from a script (``swemill_testkit.fake_bugwriter``):
valid edits (whole function, diff), invalid diffs, edits outside the function, no-ops,
renamed parameters, broken syntax, answers cut at the token limit, empty answers, failing
calls, and bills every call; the budget's ceiling holds with 16 calls in flight."""

from __future__ import annotations

import shutil
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import swemill.repo.sample as sample_pkg
from swemill.core.errors import ConfigError
from swemill.policies import policy_from_spec
from swemill.policies.budget import Budget
from swemill.synth import make_strategy
from swemill.synth.bug_answer import function_spans
from swemill.synth.lm_bugs import BugWriter, LmModifyStrategy, LmRewriteStrategy
from swemill.synth.strategy import RepoView
from swemill_testkit.fake_bugwriter import ANSWER_KINDS, BugPrompt, bug_writer_script
from swemill_testkit.fake_server import FakeError, FakeOpenAIServer, FakeReply

from .conftest import git_apply_check, many_functions, run_git

SAMPLE = Path(sample_pkg.__file__).parent / "tree"
EXPECTED = {"bad_diff": "answer_bad_diff", "outside": "answer_outside_function",
            "noop": "answer_no_op", "signature": "answer_signature_changed",
            "unparseable": "answer_unparseable", "truncated": "answer_truncated",
            "empty": "answer_empty"}


@pytest.fixture
def repo(tmp_path: Path) -> RepoView:
    root = tmp_path / "repo"
    shutil.copytree(SAMPLE, root)
    run_git(root, "init", "-q", "-b", "main")
    run_git(root, "add", "-A")
    run_git(root, "commit", "-q", "-m", "sample")
    return RepoView(root=root, repo="o/sample", commit=run_git(root, "rev-parse", "HEAD").strip())


def _writer(srv: FakeOpenAIServer, workers: int = 4, **ctx: Any) -> BugWriter:
    return BugWriter(policy_from_spec(f"openai:fake-writer@{srv.base_url}", **ctx),
                     Budget(ctx.pop("max_usd", None)), workers)


def _kinds_by_function(plan: dict[str, str]) -> Any:
    """A plan that answers by function (not by arrival order, which threads reorder)."""
    def pick(_k: int, prompt: BugPrompt) -> str:
        return plan.get(prompt.qualname, "edit")
    return pick


@pytest.mark.parametrize("strategy", [LmModifyStrategy, LmRewriteStrategy])
def test_every_answer_is_a_candidate_or_a_named_drop(repo: RepoView, strategy: type) -> None:
    spans = [s for rel in ("inventory/stock.py", "inventory/reports.py")
             for s in function_spans(rel, (repo.root / rel).read_text())]
    kinds = ["edit", "diff", *EXPECTED]
    plan = {s.qualname: kinds[i % len(kinds)] for i, s in enumerate(spans)}
    with FakeOpenAIServer(bug_writer_script(repo.root, _kinds_by_function(plan)),
                          price_in=3.0, price_out=15.0) as srv:
        st = strategy(writer=_writer(srv))
        cands = list(st.candidates(repo))
        bodies = [r.body for r in srv.requests]
    rep = st.report
    refused = Counter(d.reason for d in rep.refused)
    calls = len(bodies)
    assert calls == rep.calls and len(cands) + len(rep.refused) == calls  # nothing lost
    for kind, reason in EXPECTED.items():
        n = sum(1 for q, k in plan.items() if k == kind and
                any(f"`{q}`" in str(b["messages"][1]["content"]) for b in bodies))
        assert n and refused[reason] >= n, (kind, refused)
    assert rep.cost_usd > 0 and abs(rep.cost_usd - st.writer.cost_usd) < 1e-12
    for c in cands:
        assert c.strategy == strategy.name and len(c.changed) == 1
        prov = c.metadata["provenance"]
        assert prov["model"] == "fake-writer" and prov["prompt"] == strategy.name
        assert prov["prompt_version"] == "1" and prov["cost_usd"] > 0
        assert git_apply_check(repo.root, c.bug_patch).returncode == 0
        assert c.bug_patch.count("diff --git") == 1
    for body in bodies:  # the model never sees a test
        text = "\n".join(str(m["content"]) for m in body["messages"])
        assert "def test_" not in text and "tests/" not in text


def test_rewrite_shows_the_stub_never_the_body(repo: RepoView) -> None:
    with FakeOpenAIServer(bug_writer_script(repo.root, ["edit"])) as srv:
        st = LmRewriteStrategy(writer=_writer(srv, workers=1))
        repo.max_candidates = 3
        cands = list(st.candidates(repo))
        prompts = [str(r.body["messages"][1]["content"]) for r in srv.requests]
    assert len(prompts) == 3 and cands
    source = (repo.root / "inventory/stock.py").read_text()
    body = '    match = SKU_PATTERN.match(sku.strip().upper())\n'
    assert body in source
    for c in cands:
        assert c.metadata["no_bug_reason"] == "rewrite_passes_tests"
    for p in prompts:
        assert "...  # body removed: write it" in p and body not in p


def test_failing_calls_are_counted_and_stop_the_strategy(repo: RepoView) -> None:
    with FakeOpenAIServer([FakeError(status=400, message="model not found")],
                          repeat_last=True) as srv:
        st = LmModifyStrategy(writer=_writer(srv, workers=2))
        assert list(st.candidates(repo)) == []
    reasons = Counter(d.reason for d in st.report.refused)
    assert reasons["call_failed"] >= 5 and set(reasons) == {"call_failed"}
    assert "calls failed in a row" in (st.report.reason or "")
    assert len(srv.requests) < 12  # it stopped asking


def test_a_spent_budget_stops_the_strategy_within_the_ceiling(repo: RepoView) -> None:
    # every reply costs $0.05 (the server's figure); each call reserves its worst case
    with FakeOpenAIServer(bug_writer_script(repo.root, ["edit"], cost=0.05)) as srv:
        writer = _writer(srv, workers=2, price="10,10", max_tokens=512, max_usd=0.30)
        st = LmModifyStrategy(writer=writer)
        list(st.candidates(repo))
    assert st.report.skipped["over_budget"] >= 1
    assert "--max-usd budget is spent" in (st.report.reason or "")
    assert writer.budget.spent_usd <= 0.30 and writer.budget.reserved_usd == 0
    assert len(srv.requests) == writer.calls == st.report.calls


def test_a_model_strategy_needs_a_writer() -> None:
    with pytest.raises(ConfigError, match="--bug-writer"):
        make_strategy("lm-modify")
    with pytest.raises(ConfigError, match="--bug-writer"):
        make_strategy("lm-rewrite", writer=None)


HOLD_S = 2.0
N_HELD = 16


def test_sixteen_concurrent_calls_never_pass_max_usd(tmp_path: Path) -> None:
    repo = many_functions(tmp_path / "many", 120)
    starts: list[float] = []
    held: list[float] = []
    lock = threading.Lock()
    edit = bug_writer_script(repo.root, ["edit"])

    def script(request: dict[str, Any]) -> FakeReply:
        with lock:  # the first calls are held, so sixteen are in flight at once
            starts.append(time.monotonic())
            hold = len(starts) <= N_HELD
            if hold:
                held.append(starts[-1])
        reply = edit(request)
        reply.delay_s = HOLD_S if hold else 0.01
        return reply

    # the server bills $10 per million tokens in and out; each call reserves its worst case
    with FakeOpenAIServer(script, price_in=10.0, price_out=10.0) as srv:
        writer = _writer(srv, workers=16, price="10,10", max_tokens=256, max_usd=0.40)
        st = LmModifyStrategy(writer=writer, max_context_chars=2000)
        cands = list(st.candidates(repo))
        n_requests = len(srv.requests)
    assert st.report.skipped["over_budget"] >= 1 and cands, (writer.budget.summary(), n_requests)
    b = writer.budget
    assert 0.2 < b.spent_usd <= 0.40 and b.reserved_usd == 0 and b.overrun_usd == 0
    # every call the server billed is in the books, and no call was made past the ceiling
    assert n_requests == writer.calls and abs(writer.cost_usd - b.spent_usd) < 1e-6
    busiest = max(sum(1 for s in held if 0 <= s - t < HOLD_S) for t in held)
    assert busiest >= N_HELD, sorted(round(s - held[0], 2) for s in held)


def test_answer_kinds_cover_the_scripted_paths() -> None:
    assert set(EXPECTED) | {"edit", "diff", "same_behaviour"} == set(ANSWER_KINDS)


def test_a_reply_billed_above_its_reservation_is_booked_and_stops_the_calls(
        repo: RepoView) -> None:
    # the provider reports $0.50 for a call whose worst case at the given price is far less
    with FakeOpenAIServer(bug_writer_script(repo.root, ["edit"], cost=0.50)) as srv:
        writer = _writer(srv, workers=1, price="1,1", max_tokens=256, max_usd=0.40)
        st = LmModifyStrategy(writer=writer)
        cands = list(st.candidates(repo))
    b = writer.budget
    assert len(srv.requests) == 1 and len(cands) == 1  # the one call, then nothing fits
    assert b.overrun_usd > 0.49 and b.spent_usd == pytest.approx(0.50)
    assert st.report.skipped["over_budget"] == 1 and st.report.cost_usd == pytest.approx(0.50)


def test_a_refusal_while_calls_are_in_flight_waits_for_them(tmp_path: Path) -> None:
    """Eight workers, a ceiling that holds two worst cases at once but pays for several calls
    one after another: refused reservations wait for the calls in flight instead of ending
    the strategy while money is left."""
    repo = many_functions(tmp_path / "many", 40)
    with FakeOpenAIServer(bug_writer_script(repo.root, ["edit"]), price_in=10.0,
                          price_out=10.0) as srv:
        writer = _writer(srv, workers=8, price="10,10", max_tokens=256, max_usd=0.025)
        st = LmModifyStrategy(writer=writer, max_context_chars=2000)
        worst = writer.policy.worst_case_cost(
            st._job(repo, "lib.py", (repo.root / "lib.py").read_text(),
                    function_spans("lib.py", (repo.root / "lib.py").read_text())[0],
                    []).messages, [])
        cands = list(st.candidates(repo))
    assert 2 * worst < 0.025 < 3 * worst  # two calls fit at once, three do not
    b = writer.budget
    assert writer.calls >= 4 and len(cands) == writer.calls  # more than fit at once
    assert b.spent_usd <= 0.025 < b.spent_usd + worst and b.reserved_usd == 0
    assert st.report.skipped["over_budget"] == 1  # one refusal, with nothing in flight
