"""The shared Claude Code samples ingest with counts that match a count made by hand.

The numbers below were counted by reading ../shared/fixtures/claude_code/*.jsonl line by
line, not computed with the ingester. The samples are read in place and never copied.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from swemill.core.records import Trajectory
from swemill.traces.claude_code import ingest_session_file
from swemill.traces.states import IngestCounts, TraceState

FIXTURES = (Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "claude_code")
pytestmark = pytest.mark.skipif(
    not FIXTURES.is_dir(), reason=f"shared fixtures not present at {FIXTURES}"
)


def _ingest(name: str) -> tuple[IngestCounts, list[TraceState], list[Trajectory]]:
    counts = IngestCounts()
    items = list(ingest_session_file(FIXTURES / name, counts, set()))
    states = [i for i in items if isinstance(i, TraceState)]
    trajs = [i for i in items if isinstance(i, Trajectory)]
    return counts, states, trajs


def test_representative_messages_hand_count() -> None:
    counts, states, trajs = _ingest("representative_messages.jsonl")
    # 12 lines: user msg_001/003/005/007/009/011, assistant msg_002/004/006/008/010, 1 summary.
    assert counts.record_types == {"user": 6, "assistant": 5, "summary": 1}
    assert counts.skipped_types == {"summary": 1}
    # Five assistant lines, five distinct message.id values -> five turns.
    assert counts.assistant_turns == 5 == len(states)
    # tool_use blocks: tool_001 (Edit, line 4) and tool_002 (Bash, line 8).
    assert counts.tool_calls == 2
    # input_tokens 25 + 45 + 78 + 25 + 45; output_tokens 120 + 85 + 95 + 35 + 110.
    assert counts.input_tokens == 218
    assert counts.output_tokens == 445
    assert counts.quarantined == 0
    (traj,) = trajs
    assert len(traj.messages) == 11  # 5 assistant + 4 user texts + 2 tool results
    assert [s.state_id for s in states] == [f"test_session::{n:04d}" for n in range(5)]
    # Every parentUuid is null: read as one linear conversation, so turn 3 sees 7 messages.
    assert len(states[3].messages) == 7
    # The Edit with an empty old_string creates the file: a write, path relative to cwd /tmp.
    assert states[1].actions[0].name == "write"
    assert states[1].actions[0].args["path"] == "decorator_example.py"
    assert states[3].actions[0].args == {"command": "python /tmp/decorator_example.py"}
    assert states[3].results[0].content == "Hello, Alice!\nHello, Alice!\nHello, Alice!"
    assert traj.usage.input_tokens == 218 and traj.usage.output_tokens == 445


def test_todowrite_examples_hand_count() -> None:
    counts, states, trajs = _ingest("todowrite_examples.jsonl")
    # 12 lines: user_001..user_005, assistant msg_001..msg_006 (each its own id), 1 summary.
    assert counts.record_types == {"user": 5, "assistant": 6, "summary": 1}
    assert counts.assistant_turns == 6
    # toolu_todowrite_001, _002, _003.
    assert counts.tool_calls == 3
    # input 20 + 25 + 150 + 168 + 250 + 270; output 25 + 85 + 18 + 85 + 20 + 95.
    assert counts.input_tokens == 883
    assert counts.output_tokens == 328
    # claude-sonnet-4 at $3 / $15 per million: (883 * 3 + 328 * 15) / 1e6.
    assert counts.cost_usd == pytest.approx(0.007569)
    todo = [a for s in states for a in s.actions]
    assert [a.name for a in todo] == ["other:TodoWrite"] * 3
    assert len(todo[2].args["todos"]) == 6
    assert trajs[0].policy == "claude_code:claude-sonnet-4"


def test_fixture_folder_ingests_without_crash_and_quarantines_the_rest() -> None:
    from swemill.traces.claude_code import IngestOptions
    from swemill.traces.ingest import iter_items
    from swemill.traces.scrub_hook import Scrubber

    counts = IngestCounts()
    items = list(iter_items([FIXTURES], counts, IngestOptions(), Scrubber()))
    assert counts.sessions == 2
    assert counts.assistant_turns == 5 + 6
    assert counts.tool_calls == 2 + 3
    assert counts.input_tokens + counts.output_tokens == 218 + 445 + 883 + 328
    # README.md and LICENSE.claude-code-log are not traces: counted, quarantined, not fatal.
    assert counts.quarantined_files == counts.files - 2
    assert len(items) == 11 + 2 + counts.quarantined_files
