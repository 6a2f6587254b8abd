"""Text-rendered tool calling, for models and services without native tool calls.

The tools are described in the system prompt and the model answers with fenced blocks::

    ```tool
    {"name": "read", "args": {"path": "src/app.py"}}
    ```

Tool results go back as user text. Parsing never raises: a block that is not a JSON object
with a ``name`` becomes a format error on the reply, which the harness reports to the model.
Bedrock batch inference uses the same rendering, since it has no tool calling at all.
"""

from __future__ import annotations

import json
import re
from typing import Any

from swemill.core.records import Message, TextBlock, ToolResultBlock, ToolUseBlock
from swemill.core.tools import ToolCall

__all__ = [
    "render_tools_prompt",
    "render_call",
    "render_result",
    "parse_tool_blocks",
    "to_text_messages",
    "tool_specs",
]

# The closing fence must start a line, so code in the arguments may itself contain ```.
_BLOCK = re.compile(r"```tool[ \t]*\n(.*?)\n[ \t]*```", re.DOTALL)
_MAX_ERR_RAW = 200


def tool_specs(tools: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, description, JSON schema) from OpenAI function tools or flat ``{name, ...}``."""
    out = []
    for tool in tools:
        fn = tool.get("function", tool)
        schema = fn.get("parameters") or fn.get("input_schema") or {"type": "object"}
        out.append((fn["name"], fn.get("description", ""), schema))
    return out


def render_tools_prompt(tools: list[dict[str, Any]]) -> str:
    lines = [
        "You can use tools. To call one, reply with a fenced block tagged `tool` holding a JSON",
        'object {"name": TOOL, "args": {...}} and nothing after it, for example:',
        "```tool",
        '{"name": "NAME", "args": {"ARG": "VALUE"}}',
        "```",
        "The result comes back in the next user message. Available tools:",
    ]
    for name, description, schema in tool_specs(tools):
        lines.append(f"- {name}: {description}".rstrip())
        lines.append(f"  arguments (JSON schema): {json.dumps(schema, sort_keys=True)}")
    return "\n".join(lines)


def render_call(call: ToolCall) -> str:
    payload = json.dumps({"name": call.name, "args": call.args}, ensure_ascii=False)
    return f"```tool\n{payload}\n```"


def render_result(block: ToolResultBlock) -> str:
    status = "error" if block.is_error else "ok"
    return f"Tool result ({status}):\n{block.content}"


def _short(raw: str) -> str:
    return raw if len(raw) <= _MAX_ERR_RAW else raw[:_MAX_ERR_RAW] + "..."


def _parse_one(raw: str, call_id: str) -> tuple[ToolCall | None, str | None]:
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, f"tool block is not valid JSON ({exc.msg}): {_short(raw)!r}"
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None, f"tool block must be an object with a string 'name': {_short(raw)!r}"
    args = obj.get("args", obj.get("arguments", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return None, f"tool {obj['name']!r}: 'args' is not a JSON object: {_short(args)!r}"
    if not isinstance(args, dict):
        kind = type(args).__name__
        return None, f"tool {obj['name']!r}: 'args' must be a JSON object, got {kind}"
    return ToolCall(name=obj["name"], args=args, id=call_id), None


def parse_tool_blocks(text: str, id_prefix: str = "call") -> tuple[str, list[ToolCall], list[str]]:
    """Split a reply into (prose without the tool blocks, the calls, format errors)."""
    calls: list[ToolCall] = []
    errors: list[str] = []
    for i, match in enumerate(_BLOCK.finditer(text)):
        call, error = _parse_one(match.group(1).strip(), f"{id_prefix}_{i}")
        if call is not None:
            calls.append(call)
        if error is not None:
            errors.append(error)
    prose = _BLOCK.sub("", text).strip()
    if not calls and not errors and "```tool" in text:
        errors.append("unterminated ```tool block")
    return prose, calls, errors


def to_text_messages(messages: list[Message], tools: list[dict[str, Any]]) -> list[Message]:
    """The same conversation with tool calls and results rendered as plain text."""
    prompt = render_tools_prompt(tools) if tools else ""
    out: list[Message] = []
    has_system = any(m.role == "system" for m in messages)
    if prompt and not has_system:
        out.append(Message(role="system", content=[TextBlock(text=prompt)]))
    for m in messages:
        parts: list[str] = []
        for block in m.content:
            if isinstance(block, TextBlock):
                parts.append(block.text)
            elif isinstance(block, ToolUseBlock):
                parts.append(render_call(block.call))
            elif isinstance(block, ToolResultBlock):
                parts.append(render_result(block))
        if m.role == "system" and prompt:
            parts.append(prompt)
        role = "user" if m.role == "tool" else m.role
        out.append(Message(role=role, content=[TextBlock(text="\n\n".join(parts))]))
    return out
