"""mini-swe-agent and SWE-agent trajectory files import into the same IR as Claude Code.

The files under data/ were written for these tests in each tool's documented layout.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swemill.core.records import Trajectory
from swemill.traces.claude_code import IngestOptions
from swemill.traces.ingest import iter_items
from swemill.traces.scrub_hook import Scrubber
from swemill.traces.states import IngestCounts, Quarantine, TraceState

DATA = Path(__file__).parent / "data"


def _items(*paths: Path) -> tuple[IngestCounts, list[TraceState], list[Trajectory], list]:
    counts = IngestCounts()
    items = list(iter_items(list(paths), counts, IngestOptions(), Scrubber()))
    return (counts, [i for i in items if isinstance(i, TraceState)],
            [i for i in items if isinstance(i, Trajectory)],
            [i for i in items if isinstance(i, Quarantine)])


def test_mini_swe_agent_v2_file() -> None:
    counts, states, (traj,), q = _items(DATA / "calc__calc-7.traj.json")
    assert q == []
    assert traj.source == "mini-swe-agent" and traj.policy == "mini-swe-agent:openai/gpt-5-mini"
    assert traj.metadata["exit_status"] == "Submitted"
    assert traj.metadata["submission"].startswith("diff --git")
    # Four assistant messages; the second had two code blocks (a format error): no action.
    assert counts.assistant_turns == 4 and counts.tool_calls == 3
    assert [len(s.actions) for s in states] == [1, 0, 1, 1]
    assert states[0].actions[0].canonical().args == {"command": "cat calc/ops.py"}
    assert states[0].results[0].is_error is False
    assert states[2].results[0].is_error is True  # returncode 1
    assert states[2].has_error and counts.tool_errors == 1
    # The format-error reply stays a user message, not a tool result.
    assert [m.role for m in traj.messages] == [
        "system", "user", "assistant", "tool", "assistant", "user", "assistant", "tool",
        "assistant"]
    assert counts.skipped_types == {"role:exit": 1}
    # Per-call usage from extra.response.usage: 812 + 901 + 990 + 1100 prompt tokens.
    assert counts.input_tokens == 3803 and counts.output_tokens == 64 + 30 + 71 + 40
    assert traj.usage.cost_usd == pytest.approx(0.0101 + 0.0100 + 0.0110 + 0.0110)
    assert states[3].state_id == "calc__calc-7::0003" and len(states[3].messages) == 8


def test_mini_swe_agent_v1_file_without_usage_takes_the_file_totals() -> None:
    counts, states, (traj,), _ = _items(DATA / "lint-v1.traj.json")
    assert [s.actions[0].args["command"] for s in states] == ["ruff check .", "cat a.py"]
    assert [s.results[0].is_error for s in states] == [True, False]
    assert traj.usage.cost_usd == 0.5 and counts.cost_usd == 0.5
    assert traj.metadata["exit_status"] == "LimitsExceeded"


def test_swe_agent_traj_file() -> None:
    counts, states, (traj,), q = _items(DATA / "calc__calc-7.traj")
    assert q == [] and traj.source == "swe-agent"
    # system prompt and the issue; the demonstration is left out.
    assert [m.text for m in traj.messages[:2]] == [
        "SETTING: You are an autonomous programmer.",
        "<uploaded_files>/testbed</uploaded_files>\nISSUE: add() subtracts."]
    assert counts.assistant_turns == 5 and counts.tool_calls == 5
    names = [s.actions[0].name for s in states]
    assert names == ["other:find_file", "read", "edit", "bash", "submit"]
    assert states[1].actions[0].args == {"path": "calc/ops.py", "start_line": 1, "end_line": 5}
    assert states[2].actions[0].args["new_str"] == "    return a + b"
    pytest_cmd = "python -m pytest -q tests/test_ops.py"  # double space collapsed
    assert states[3].actions[0].canonical().args["command"] == pytest_cmd
    assert states[1].response.content[1].original_name == "str_replace_editor"  # type: ignore
    assert states[4].results[0].content.startswith("diff --git")
    assert (traj.usage.input_tokens, traj.usage.output_tokens) == (15000, 420)
    assert counts.input_tokens == 15000


def test_broken_trajectory_files_are_quarantined(tmp_path: Path) -> None:
    (tmp_path / "cut.traj.json").write_text('{"messages": [{"role": "user"')
    (tmp_path / "list.traj").write_text("[1, 2]")
    (tmp_path / "other.traj.json").write_text(json.dumps({"steps": []}))
    (tmp_path / "latin1.traj").write_bytes(b'{"trajectory": ["caf\xe9"]}')
    counts, states, trajs, q = _items(tmp_path)
    assert states == [] and trajs == []
    by_file = {Path(x.file).name: x.reason.split(":")[0] for x in q}
    assert by_file == {
        "cut.traj.json": "not a JSON document",
        "list.traj": "JSON document is not an object",
        "other.traj.json": "no 'messages' list (not a mini-swe-agent file)",
        "latin1.traj": "not a JSON document",
    }
    assert counts.quarantined_files == 4
