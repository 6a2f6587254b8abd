"""Realtime replay against three fake OpenAI-compatible teachers on loopback, with costs."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from swemill.core.records import PreferencePair
from swemill.corpus.stage import PAIRS_STAGE
from swemill.policies.retry import RetryPolicy
from swemill.replay.replies import REPLIES_STAGE, TeacherReply
from swemill.replay.run import ReplayConfig, run_replay
from swemill_testkit.fake_server import FakeError, FakeReply, Step, tool_reply

from .conftest import ingested, teachers

FAST = RetryPolicy(max_attempts=4, base_s=0.01, max_s=0.05)


class Arrivals:
    """A script that answers ``ls`` after ``delay_s`` and notes when each request came."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.times: list[float] = []
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Step:
        with self.lock:
            self.times.append(time.monotonic())
        return tool_reply("bash", {"command": "ls"}, delay_s=self.delay_s)


def most_in_window(times: list[float], window: float) -> int:
    """The most arrivals inside any half-open window of ``window`` seconds."""
    times = sorted(times)
    best, lo = 0, 0
    for hi, t in enumerate(times):
        while times[lo] <= t - window:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


@pytest.mark.slow
def test_max_usd_holds_with_16_concurrent_requests(tmp_path: Path) -> None:
    store, run = ingested(tmp_path, turns=40)
    scripts = [Arrivals(1.0) for _ in range(3)]
    max_usd = 0.1
    with teachers(scripts) as specs:  # type: ignore[arg-type]
        summary = run_replay(store, run, ReplayConfig(teachers=specs, max_usd=max_usd,
                                                      concurrency=16, retry=FAST))
    replies = store.read_records(REPLIES_STAGE, run, TeacherReply)
    sent = sum(len(s.times) for s in scripts)
    ok = [r for r in replies if r.status == "ok"]
    refused = [r for r in replies if r.status == "budget"]
    # The limit bit: some calls were refused, none of them reached a server.
    assert refused and ok and len(replies) == 41 * 3
    assert sent == len(ok) == len(replies) - len(refused)
    # What the providers billed (their reported usage.cost) never passed the limit.
    billed = sum(r.usage.cost_usd for r in ok)
    assert 0 < billed <= max_usd
    assert abs(summary.cost_usd - billed) < 1e-9
    assert summary.budget["overrun_usd"] == 0
    # Up to 16 calls overlapped (each takes 1 s): never more, and really concurrent.
    peak = most_in_window([t for s in scripts for t in s.times], 1.0)
    assert 12 <= peak <= 16, peak
    manifest = store.read_manifest(run)
    assert manifest.counts["replay"]["replies_budget"] == len(refused)
    assert manifest.teachers == sorted(specs)


def test_pairs_carry_their_source_and_reach_the_pairs_stage(tmp_path: Path) -> None:
    store, run = ingested(tmp_path, turns=5, errors={1, 3})
    always_ls = [tool_reply("bash", {"command": "ls"})]
    with teachers([always_ls] * 3, repeat_last=True) as specs:
        summary = run_replay(store, run, ReplayConfig(teachers=specs, max_usd=1.0, retry=FAST))
    pairs = store.read_records(PAIRS_STAGE, run, PreferencePair)
    by_state = {p.state_id: p.preference_source for p in pairs}
    # Turns 1 and 3 failed: error_signal; the others (and the closing text turn) are
    # outvoted by three families agreeing on `ls`: consensus.
    assert by_state == {"sess::0000": "consensus", "sess::0001": "error_signal",
                        "sess::0002": "consensus", "sess::0003": "error_signal",
                        "sess::0004": "consensus", "sess::0005": "consensus"}
    assert all(p.metadata["rejected_by"] == "original" for p in pairs)
    assert summary.counts["pairs_error_signal"] == 2 and summary.counts["pairs_consensus"] == 4
    assert summary.divergence_rate == 1.0
    meta = store.read_manifest(run).metadata["replay"]
    assert meta["pool"]["families"] == ["meta", "mistral", "qwen"]
    assert meta["pool"]["min_families"] == 3


def test_transient_errors_are_retried_and_hard_errors_recorded(tmp_path: Path) -> None:
    store, run = ingested(tmp_path, turns=2)
    flaky: list[Step] = [FakeError(503), FakeError(429, retry_after=0),
                         *[tool_reply("bash", {"command": "ls"})] * 3]
    broken: list[Step] = [FakeError(400, "model not found")]
    fine: list[Step] = [FakeReply(text="All done.")]
    with teachers([flaky, broken, fine], repeat_last=True) as specs:
        summary = run_replay(store, run, ReplayConfig(teachers=specs, concurrency=1,
                                                      retry=FAST))
    replies = store.read_records(REPLIES_STAGE, run, TeacherReply)
    by_teacher: dict[str, list[str]] = {}
    for r in replies:
        by_teacher.setdefault(r.family, []).append(r.status)
    assert by_teacher["qwen"] == ["ok"] * 3  # two transient failures, retried
    assert by_teacher["meta"] == ["error"] * 3
    assert all("HTTP 400" in r.error for r in replies if r.family == "meta")
    assert by_teacher["mistral"] == ["ok"] * 3
    assert summary.counts["replies_error"] == 3


def test_calls_outside_the_algebra_reach_teachers_as_text() -> None:
    from swemill.core.records import Message, ToolResultBlock, ToolUseBlock
    from swemill.core.tools import ToolCall
    from swemill.replay.realtime import teacher_messages

    from .conftest import state

    s = state()
    todo = ToolCall("other:TodoWrite", {"todos": [{"content": "fix"}]}, id="t9")
    s.messages += [Message(role="assistant", content=[ToolUseBlock(call=todo)]),
                   Message(role="user", content=[ToolResultBlock(call_id="t9", content="ok")])]
    shown = teacher_messages(s)
    assert [c.name for m in shown for c in m.tool_calls] == ["bash"]  # the algebra's call stays
    assert shown[-2].text.startswith("[used TodoWrite: {") and shown[-1].text == "[result: ok]"
    assert shown[:3] == s.messages[:3]


def test_a_rerun_replaces_its_shards_and_teacher_trajectories_stay_out_of_sft(
        tmp_path: Path) -> None:
    from swemill.core.records import Trajectory
    from swemill.corpus.stage import run_corpus

    store, run = ingested(tmp_path, turns=4, errors={2})
    always_ls = [tool_reply("bash", {"command": "ls"})]
    with teachers([always_ls] * 3, repeat_last=True) as specs:
        first = run_replay(store, run, ReplayConfig(teachers=specs, emit_trajectories=True))
        trajs = store.read_records("trajectories", run, Trajectory)
        assert sum(t.source == "replay" for t in trajs) == 3 * 5
        assert all(t.admission == "preference" and t.parent_id == "claude_code:sess" for t in trajs
                   if t.source == "replay")
        second = run_replay(store, run, ReplayConfig(teachers=specs, limit=2))
    assert (first.counts["pairs"], second.counts["pairs"]) == (5, 2)
    assert len(store.read_records(PAIRS_STAGE, run, PreferencePair)) == 2
    assert len(store.read_records(REPLIES_STAGE, run, TeacherReply)) == 6
    # The ingested session is still there; the teacher trajectories of the first run are gone.
    assert [t.source for t in store.read_records("trajectories", run, Trajectory)] == [
        "claude_code"]
    summary = run_corpus(store, run)
    assert summary.rows["dpo"] + summary.rows["dpo_holdout"] == 2


@pytest.mark.slow  # importing the anthropic SDK alone takes seconds
def test_an_anthropic_teacher_speaks_the_messages_api(tmp_path: Path) -> None:
    from swemill_testkit.fake_server import FakeOpenAIServer

    pytest.importorskip("anthropic")
    store, run = ingested(tmp_path, turns=2)
    always_ls = [tool_reply("bash", {"command": "ls"})]
    with teachers([always_ls] * 3, repeat_last=True) as specs, \
            FakeOpenAIServer(always_ls, repeat_last=True, price_in=1, price_out=2) as srv:
        claude = f"anthropic:claude-haiku-4-5@{srv.root_url}#price=1/2"
        summary = run_replay(store, run, ReplayConfig(teachers=[claude, *specs[:2]],
                                                      max_usd=1.0, retry=FAST))
        paths = {r.path for r in srv.requests}
    assert paths == {"/v1/messages"} and len(srv.requests) == 3
    replies = [r for r in store.read_records(REPLIES_STAGE, run, TeacherReply)
               if r.family == "anthropic"]
    assert [r.status for r in replies] == ["ok"] * 3
    assert summary.counts["pairs_consensus"] == 3


def test_a_judge_decides_where_teachers_disagree_and_is_billed(tmp_path: Path) -> None:
    from swemill.core.errors import ConfigError
    from swemill_testkit.fake_server import FakeOpenAIServer, text_reply

    store, run = ingested(tmp_path, turns=1)
    scripts = [[tool_reply("bash", {"command": c})] for c in ("ls", "pwd", "whoami")]
    with teachers(scripts, repeat_last=True) as specs, FakeOpenAIServer(
            [text_reply("B")], repeat_last=True, price_in=1, price_out=2) as judge:
        with pytest.raises(ConfigError, match="add #price"):
            run_replay(store, run, ReplayConfig(teachers=specs, max_usd=1.0,
                                                judge=f"openai:judge-x@{judge.base_url}"))
        summary = run_replay(store, run, ReplayConfig(
            teachers=specs, max_usd=1.0, retry=FAST,
            judge=f"openai:judge-x@{judge.base_url}#family=acme;price=1/2"))
        asked = len(judge.requests)
    pairs = store.read_records(PAIRS_STAGE, run, PreferencePair)
    # Two states, three different teacher actions each, none a majority: the judge compared
    # the original with each and preferred the teacher ("B") every time.
    assert asked == 6 and len(pairs) == 6
    assert {p.preference_source for p in pairs} == {"judge"}
    assert all(p.metadata["rejected_by"] == "original" for p in pairs)
    teacher_cost = sum(r.usage.cost_usd for r in store.read_records(
        REPLIES_STAGE, run, TeacherReply))
    assert summary.cost_usd > teacher_cost  # the judge's calls were booked too


def test_one_teacher_at_a_time_then_pairs_from_every_teachers_replies(tmp_path: Path) -> None:
    store, run = ingested(tmp_path, turns=3, errors={1})
    always_ls = [tool_reply("bash", {"command": "ls"})]
    with teachers([always_ls] * 3, repeat_last=True) as specs:
        first = run_replay(store, run, ReplayConfig(teachers=specs[:1], min_families=1))
        for spec in specs[1:]:  # as a workflow with one job per teacher would
            last = run_replay(store, run, ReplayConfig(teachers=[spec], min_families=1))
    # Alone, the first teacher gives only the error_signal pair (no 3-family consensus).
    assert (first.counts["pairs"], first.counts["pairs_error_signal"]) == (1, 1)
    assert last.counts["replies_of_other_teachers"] == 2 * 4
    assert (last.counts["pairs_error_signal"], last.counts["pairs_consensus"]) == (1, 3)
    assert store.read_manifest(run).teachers == sorted(specs)
    before = sorted(p.pair_id for p in store.read_records(PAIRS_STAGE, run, PreferencePair))
    # The servers are gone: extracting again calls nobody and gives the same pairs.
    again = run_replay(store, run, ReplayConfig(teachers=[], pairs_only=True))
    assert again.counts["pairs"] == 4 and again.counts["replies"] == 0
    after = sorted(p.pair_id for p in store.read_records(PAIRS_STAGE, run, PreferencePair))
    assert len(before) == 4 and after == before
    assert len(store.read_records(REPLIES_STAGE, run, TeacherReply)) == 3 * 4
