"""Text-rendered tool calling: rendering and parsing never crash on what a model writes."""

from __future__ import annotations

from swemill.core.records import Message, TextBlock, ToolResultBlock, ToolUseBlock
from swemill.core.tools import ToolCall, tool_schemas
from swemill.policies.textproto import (
    parse_tool_blocks,
    render_call,
    render_tools_prompt,
    to_text_messages,
)


def test_a_rendered_call_parses_back_to_itself() -> None:
    call = ToolCall("edit", {"path": "a.py", "old_str": "x = 1\n", "new_str": "x = ```2```\n"})
    prose, calls, errors = parse_tool_blocks("Editing.\n" + render_call(call))
    assert errors == [] and prose == "Editing."
    assert [(c.name, c.args) for c in calls] == [("edit", call.args)]


def test_several_blocks_and_arguments_given_as_a_string() -> None:
    text = (
        '```tool\n{"name": "read", "args": {"path": "a.py"}}\n```\nthen\n'
        '```tool\n{"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}\n```'
    )
    prose, calls, errors = parse_tool_blocks(text, id_prefix="t3")
    assert errors == [] and prose == "then"
    assert [(c.name, c.args, c.id) for c in calls] == [
        ("read", {"path": "a.py"}, "t3_0"),
        ("bash", {"command": "ls"}, "t3_1"),
    ]


def test_malformed_blocks_are_format_errors() -> None:
    cases = {
        "```tool\n{'name': 'read'}\n```": "not valid JSON",
        '```tool\n["read"]\n```': "string 'name'",
        '```tool\n{"name": "read", "args": [1]}\n```': "'args' must be a JSON object",
        '```tool\n{"name": "read", "args": "nope"}\n```': "'args' is not a JSON object",
        '```tool\n{"name": "read", "args": {}}': "unterminated",
    }
    for text, expected in cases.items():
        _, calls, errors = parse_tool_blocks(text)
        assert calls == [], text
        assert len(errors) == 1 and expected in errors[0], (text, errors)


def test_plain_prose_has_no_calls_and_no_errors() -> None:
    assert parse_tool_blocks("I think the bug is in parse().") == (
        "I think the bug is in parse().", [], [])


def test_conversation_rendered_as_text() -> None:
    tools = tool_schemas()
    call = ToolCall("read", {"path": "a.py"}, id="c1")
    messages = [
        Message(role="system", content=[TextBlock(text="Be brief.")]),
        Message(role="user", content=[TextBlock(text="Fix it.")]),
        Message(role="assistant", content=[ToolUseBlock(call=call)]),
        Message(role="tool", content=[ToolResultBlock(call_id="c1", content="boom",
                                                      is_error=True)]),
    ]
    out = to_text_messages(messages, tools)
    assert [m.role for m in out] == ["system", "user", "assistant", "user"]
    assert out[0].text.startswith("Be brief.") and render_tools_prompt(tools) in out[0].text
    assert out[2].text == render_call(call)
    assert out[3].text == "Tool result (error):\nboom"
    assert all(isinstance(b, TextBlock) for m in out for b in m.content)


def test_a_system_prompt_is_added_when_there_is_none() -> None:
    out = to_text_messages([Message(role="user", content=[TextBlock(text="hi")])],
                           tool_schemas(("bash", "submit")))
    assert out[0].role == "system" and "- bash:" in out[0].text and "- submit:" in out[0].text
    assert "- read:" not in out[0].text
