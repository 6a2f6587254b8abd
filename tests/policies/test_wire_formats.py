"""Canonical messages survive the trip through each provider's wire format."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from swemill.core.records import Message, TextBlock, ToolUseBlock
from swemill.core.tools import ToolCall
from swemill.policies.anthropic import from_anthropic, to_anthropic
from swemill.policies.bedrock import from_converse, to_converse
from swemill.policies.openai_format import from_openai_message, to_openai_messages

_args = st.dictionaries(st.text(min_size=1, max_size=8),
                        st.one_of(st.text(max_size=20), st.integers(), st.booleans()),
                        max_size=3)
_calls = st.lists(st.builds(ToolCall, st.sampled_from(["read", "edit", "bash"]), _args,
                            st.text("abc123", min_size=1, max_size=6)),
                  max_size=3, unique_by=lambda c: c.id)
_text = st.text(max_size=40).filter(lambda t: t.strip() == t and t != "")


@given(text=st.one_of(st.none(), _text), calls=_calls)
def test_assistant_turns_round_trip(text: str | None, calls: list[ToolCall]) -> None:
    blocks = ([TextBlock(text=text)] if text else []) + [ToolUseBlock(call=c) for c in calls]
    message = Message(role="assistant", content=blocks)

    (wire,) = to_openai_messages([message])
    wire = json.loads(json.dumps(wire))  # what really crosses the network
    back, errors = from_openai_message(wire, "x")
    assert errors == [] and back == message

    _, turns = to_anthropic([Message(role="user", content=[TextBlock(text="q")]), message])
    if blocks:
        back, errors = from_anthropic({"content": turns[-1]["content"]})
        assert errors == [] and back == message

    _, turns = to_converse([Message(role="user", content=[TextBlock(text="q")]), message])
    if blocks:
        back, errors = from_converse({"output": {"message": turns[-1]}})
        assert errors == [] and back == message


def test_a_tool_call_whose_input_is_not_an_object_is_a_format_error() -> None:
    """Both Anthropic-style formats keep the good call, drop the bad one, and say why."""
    good = {"name": "read", "input": {"path": "a.py"}, "id": "t1"}
    bad = {"name": "bash", "input": "ls -la", "id": "t2"}
    message, errors = from_anthropic({"content": [{"type": "tool_use", **good},
                                                  {"type": "tool_use", **bad}]})
    assert message.content == [ToolUseBlock(call=ToolCall("read", {"path": "a.py"}, id="t1"))]
    assert errors == ["tool call 'bash' (t2): input is not a JSON object: 'ls -la'"]
    converse = {"output": {"message": {"content": [
        {"toolUse": {"name": n["name"], "input": n["input"], "toolUseId": n["id"]}}
        for n in (good, bad)]}}}
    message_c, errors_c = from_converse(converse)
    assert message_c == message and errors_c == errors
