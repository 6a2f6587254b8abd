"""Canonical messages <-> the OpenAI chat-completions wire format (no SDK needed).

Kept apart from the policy so the fake server, replay and batch code can share it.
"""

from __future__ import annotations

import json
from typing import Any

from swemill.core.records import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from swemill.core.tools import ToolCall

__all__ = ["to_openai_messages", "to_openai_tools", "from_openai_message", "usage_from_openai"]

_MAX_ERR_RAW = 200


def to_openai_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI function tools; flat ``{name, description, parameters}`` dicts are wrapped."""
    out = []
    for tool in tools:
        if tool.get("type") == "function" and "function" in tool:
            out.append(tool)
            continue
        fn = {"name": tool["name"], "description": tool.get("description", "")}
        fn["parameters"] = tool.get("parameters") or tool.get("input_schema") or {"type": "object"}
        out.append({"type": "function", "function": fn})
    return out


def _text(message: Message) -> str:
    return "".join(b.text for b in message.content if isinstance(b, TextBlock))


def _assistant(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": _text(message) or None}
    calls = [
        {
            "id": b.call.id or f"call_{i}",
            "type": "function",
            "function": {"name": b.call.name, "arguments": json.dumps(b.call.args)},
        }
        for i, b in enumerate(message.content)
        if isinstance(b, ToolUseBlock)
    ]
    if calls:
        out["tool_calls"] = calls
    elif out["content"] is None:
        out["content"] = ""  # servers reject an assistant turn with neither text nor calls
    return out


def to_openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Tool results become ``tool`` messages (one per result); thinking blocks are dropped,
    since chat-completions servers do not accept them back."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "assistant":
            out.append(_assistant(m))
            continue
        for b in m.content:
            if isinstance(b, ToolResultBlock):
                out.append({"role": "tool", "tool_call_id": b.call_id, "content": b.content})
        text = _text(m)
        if text or (m.role in ("system", "user") and not m.content):
            out.append({"role": "system" if m.role == "system" else "user", "content": text})
    return out


def _short(raw: str) -> str:
    return raw if len(raw) <= _MAX_ERR_RAW else raw[:_MAX_ERR_RAW] + "..."


def _parse_call(raw_call: dict[str, Any], fallback_id: str) -> tuple[ToolCall | None, str | None]:
    fn = raw_call.get("function") or {}
    name = fn.get("name")
    call_id = raw_call.get("id") or fallback_id
    if not isinstance(name, str) or not name:
        return None, f"tool call {call_id}: no function name"
    raw_args = fn.get("arguments")
    if raw_args is None or raw_args == "":
        return ToolCall(name=name, args={}, id=call_id), None
    if isinstance(raw_args, dict):  # some servers send an object, not a JSON string
        return ToolCall(name=name, args=raw_args, id=call_id), None
    try:
        args = json.loads(raw_args)
    except (TypeError, json.JSONDecodeError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        return None, (
            f"tool call {name!r} ({call_id}): arguments are not valid JSON ({reason}): "
            f"{_short(str(raw_args))!r}"
        )
    if not isinstance(args, dict):
        return None, f"tool call {name!r} ({call_id}): arguments must be a JSON object"
    return ToolCall(name=name, args=args, id=call_id), None


def from_openai_message(raw: dict[str, Any], id_prefix: str) -> tuple[Message, list[str]]:
    """One ``choices[i].message`` -> (assistant Message, format errors). Calls whose arguments
    cannot be parsed are left out of the message and described in the errors."""
    blocks: list[Any] = []
    errors: list[str] = []
    reasoning = raw.get("reasoning_content") or raw.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        blocks.append(ThinkingBlock(text=reasoning))
    content = raw.get("content")
    if isinstance(content, str) and content:
        blocks.append(TextBlock(text=content))
    for i, raw_call in enumerate(raw.get("tool_calls") or []):
        call, error = _parse_call(raw_call, f"{id_prefix}_{i}")
        if call is not None:
            blocks.append(ToolUseBlock(call=call))
        if error is not None:
            errors.append(error)
    return Message(role="assistant", content=blocks), errors


def usage_from_openai(raw: dict[str, Any] | None) -> tuple[Usage, float | None]:
    """(Usage, provider-reported cost or None). Cached prompt tokens are split out so that
    input + cache_read equals the prompt the server saw."""
    raw = raw or {}
    prompt = int(raw.get("prompt_tokens") or 0)
    details = raw.get("prompt_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0)
    usage = Usage(
        input_tokens=max(0, prompt - cached),
        output_tokens=int(raw.get("completion_tokens") or 0),
        cache_read_tokens=cached,
    )
    cost = raw.get("cost")
    return usage, float(cost) if isinstance(cost, int | float) else None
