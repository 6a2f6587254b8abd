"""OpenAI Codex CLI rollouts: a session written line by line as the CLI writes it (the
envelope format, and the older bare-item format), ingested into the same IR as Claude Code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from swemill.core.records import ThinkingBlock, ToolResultBlock, Trajectory
from swemill.store import Store
from swemill.traces.codex import ingest_codex_file, sniff
from swemill.traces.ingest import classify, ingest
from swemill.traces.states import IngestCounts, TraceState

CWD = "/home/dev/shop"
PATCH = """*** Begin Patch
*** Update File: shop/cart.py
@@ def total(items):
-    return sum(i.price for i in items)
+    return sum(i.price * i.qty for i in items)
*** End Patch"""


def _env(kind: str, payload: dict[str, Any], t: int) -> dict[str, Any]:
    return {"timestamp": f"2026-11-02T10:00:{t:02d}.000Z", "type": kind, "payload": payload}


def _tokens(t: int, inp: int, cached: int, out: int) -> dict[str, Any]:
    last = {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out,
            "reasoning_output_tokens": 0, "total_tokens": inp + out}
    return _env("event_msg", {"type": "token_count", "info": {"last_token_usage": last,
                                                              "total_token_usage": last}}, t)


def rollout() -> list[dict[str, Any]]:
    msg = "response_item"
    return [
        _env("session_meta", {"id": "0199-abc", "timestamp": "2026-11-02T10:00:00Z",
                              "cwd": CWD, "originator": "codex_cli_rs", "cli_version": "0.58.0",
                              "git": {"branch": "main"}}, 0),
        _env(msg, {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": f"<environment_context>cwd: {CWD}"
                                           "</environment_context>"}]}, 1),
        _env(msg, {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "the cart total ignores quantities; fix it"}]}, 1),
        _env("event_msg", {"type": "user_message", "message": "the cart total ignores..."}, 1),
        _env("turn_context", {"cwd": CWD, "model": "gpt-5-codex", "effort": "medium"}, 2),
        _env(msg, {"type": "reasoning", "summary": [
            {"type": "summary_text", "text": "**Finding the total**"}],
            "encrypted_content": "gAAAA..."}, 3),
        _env(msg, {"type": "function_call", "name": "shell", "call_id": "call_1",
                   "arguments": json.dumps({"command": ["bash", "-lc", "grep -n total -r shop"],
                                            "workdir": CWD})}, 3),
        _env(msg, {"type": "function_call_output", "call_id": "call_1", "output": json.dumps(
            {"output": "shop/cart.py:3:def total(items):", "metadata": {"exit_code": 0}})}, 4),
        _tokens(4, 1200, 1000, 40),
        _env(msg, {"type": "reasoning", "summary": [], "encrypted_content": "gAAAB..."}, 5),
        _env(msg, {"type": "custom_tool_call", "name": "apply_patch", "call_id": "call_2",
                   "input": PATCH, "status": "completed"}, 5),
        _env(msg, {"type": "custom_tool_call_output", "call_id": "call_2",
                   "output": "Success. Updated the following files:\nM shop/cart.py"}, 6),
        _tokens(6, 1400, 1200, 80),
        _env(msg, {"type": "function_call", "name": "shell", "call_id": "call_3",
                   "arguments": json.dumps({"command": ["pytest", "-q", "tests/test_cart.py"]})},
             7),
        _env(msg, {"type": "function_call_output", "call_id": "call_3", "output": json.dumps(
            {"output": "1 failed", "metadata": {"exit_code": 1}})}, 8),
        _tokens(8, 1500, 1400, 20),
        _env(msg, {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "Fixed `total`; one test still fails."}]}, 9),
        _env("event_msg", {"type": "agent_message", "message": "Fixed `total`..."}, 9),
        _tokens(9, 1600, 1500, 30),
    ]


def _write(path: Path, records: list[dict[str, Any]], garbage: bool = True) -> Path:
    lines = [json.dumps(r) for r in records]
    if garbage:
        lines.insert(5, '{"type": "response_item", "payload": {"type": "mess')  # truncated
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(path: Path) -> tuple[IngestCounts, list[TraceState], Trajectory]:
    counts = IngestCounts()
    items = list(ingest_codex_file(path, counts, set()))
    (traj,) = [i for i in items if isinstance(i, Trajectory)]
    return counts, [i for i in items if isinstance(i, TraceState)], traj


def test_a_rollout_becomes_turns_tool_calls_and_results(tmp_path: Path) -> None:
    path = _write(tmp_path / "rollout-2026-11-02T10-00-00-0199-abc.jsonl", rollout())
    counts, states, traj = _run(path)
    assert traj.trajectory_id == "codex:0199-abc" and traj.policy == "codex:gpt-5-codex"
    assert [m.role for m in traj.messages] == [
        "user", "assistant", "tool", "assistant", "tool", "assistant", "tool", "assistant"]
    assert counts.assistant_turns == 4 and len(states) == 4
    assert counts.tool_calls == 3  # as Codex wrote them: shell, apply_patch, shell
    assert [[a.name for a in s.actions] for s in states] == [["bash"], ["edit"], ["bash"], []]
    assert states[0].actions[0].args == {"command": "grep -n total -r shop"}
    assert states[1].actions[0].args == {
        "path": "shop/cart.py", "old_str": "    return sum(i.price for i in items)",
        "new_str": "    return sum(i.price * i.qty for i in items)"}
    assert states[2].actions[0].args == {"command": "pytest -q tests/test_cart.py"}
    assert states[2].has_error and counts.tool_errors == 1  # exit code 1
    assert isinstance(traj.messages[1].content[0], ThinkingBlock)
    hidden = traj.messages[3].content[0]
    assert isinstance(hidden, ThinkingBlock) and hidden.redacted and counts.redacted_thinking == 1
    assert isinstance(traj.messages[2].content[0], ToolResultBlock)
    # usage: input counts only the uncached part; cached tokens are cache reads
    assert (counts.input_tokens, counts.cache_read_tokens, counts.output_tokens) == (
        200 + 200 + 100 + 100, 1000 + 1200 + 1400 + 1500, 170)
    assert counts.cost_usd > 0 and counts.unpriced == {}
    # every line is read, skipped by kind, or quarantined
    assert counts.quarantined == 1
    assert sum(counts.record_types.values()) + counts.quarantined == counts.lines == 20
    assert counts.skipped_types == {"event_msg.user_message": 1, "event_msg.agent_message": 1}


def test_outputs_as_content_lists_mid_session_instructions_and_encrypted_parts(
        tmp_path: Path) -> None:
    recs = rollout()[:3] + [
        _env("response_item", {"type": "message", "role": "developer", "content": [
            {"type": "input_text", "text": "prefer small diffs"}]}, 3),
        _env("response_item", {"type": "function_call", "name": "exec_command",
                               "call_id": "e1", "arguments": '{"cmd": "ls"}'}, 4),
        _env("response_item", {"type": "function_call_output", "call_id": "e1",
                               "output": [{"type": "input_text", "text": "cart.py"}]}, 5),
        _env("response_item", {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "done"},
            {"type": "encrypted_content", "encrypted_content": "gAAA"}]}, 6),
    ]
    _, _, traj = _run(_write(tmp_path / "rollout-x.jsonl", recs, garbage=False))
    assert [m.role for m in traj.messages] == ["user", "assistant", "tool", "assistant"]
    assert traj.messages[0].content[-1].text == "prefer small diffs"  # type: ignore[union-attr]
    assert traj.messages[2].content[0].content == "cart.py"  # type: ignore[union-attr]
    assert traj.messages[3].content[0].text == "done"  # type: ignore[union-attr]


def test_format_is_detected_per_file_and_the_older_bare_format_reads(tmp_path: Path) -> None:
    named = _write(tmp_path / "0199-abc.jsonl", rollout(), garbage=False)  # no rollout- prefix
    assert sniff(named) and classify(named) == "codex"
    claude = tmp_path / "session.jsonl"
    claude.write_text(json.dumps({"type": "user", "uuid": "u", "sessionId": "s",
                                  "message": {"role": "user", "content": "hi"}}) + "\n")
    assert classify(claude) == "claude_code"
    old = [{"id": "old-1", "timestamp": "2025-05-01T00:00:00Z", "instructions": None}]
    old += [r["payload"] for r in rollout() if r["type"] == "response_item"]
    old.append({"record_type": "state"})
    counts, states, traj = _run(_write(tmp_path / "rollout-old.jsonl", old, garbage=False))
    assert traj.trajectory_id == "codex:old-1" and counts.assistant_turns == 4
    assert counts.skipped_types == {"state": 1}
    assert sum(counts.record_types.values()) == counts.lines


def test_cli_ingest_takes_a_codex_sessions_tree(tmp_path: Path) -> None:
    day = tmp_path / "sessions" / "2026" / "11" / "02"
    day.mkdir(parents=True)
    _write(day / "rollout-2026-11-02T10-00-00-0199-abc.jsonl", rollout())
    result = ingest([tmp_path / "sessions"], Store.open(str(tmp_path / "out")))
    assert result.counts.trajectories == 1 and result.counts.assistant_turns == 4
    assert result.shards["traces"] == 1 and result.shards["quarantine"] == 1
    trajs = Store.open(str(tmp_path / "out")).read_records("trajectories", result.run_id,
                                                           Trajectory)
    assert [t.source for t in trajs] == ["codex"]
