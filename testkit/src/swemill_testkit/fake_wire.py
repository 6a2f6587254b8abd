"""Response bodies the fake model server sends, in OpenAI and Anthropic shapes."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from swemill_testkit.fake_server import FakeReply

__all__ = ["openai_body", "anthropic_body"]

CostFn = Callable[[int, int], float | None]


def _tokens(step: FakeReply, request_size: int, reply_size: int) -> tuple[int, int]:
    prompt = step.prompt_tokens if step.prompt_tokens is not None else max(1, request_size // 4)
    done = step.completion_tokens
    return prompt, done if done is not None else max(1, reply_size // 4)


def _args_text(arguments: dict[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def openai_body(step: FakeReply, request: dict[str, Any], request_size: int,
                cost_for: CostFn) -> dict[str, Any]:
    calls = [
        {"id": c.id or f"call_{uuid.uuid4().hex[:12]}", "type": "function",
         "function": {"name": c.name, "arguments": _args_text(c.arguments)}}
        for c in step.tool_calls
    ]
    message: dict[str, Any] = {"role": "assistant", "content": step.text}
    if calls:
        message["tool_calls"] = calls
    prompt, completion = _tokens(step, request_size, len(json.dumps(message)))
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                             "total_tokens": prompt + completion}
    cost = step.cost if step.cost is not None else cost_for(prompt, completion)
    if cost is not None:
        usage["cost"] = cost
    finish = step.finish_reason or ("tool_calls" if calls else "stop")
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
        "object": "chat.completion",
        "created": 0,
        "model": request.get("model", "fake"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }


def _anthropic_input(arguments: dict[str, Any] | str) -> Any:
    if isinstance(arguments, dict):
        return arguments
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments  # a malformed input, sent as a bare string on purpose


def anthropic_body(step: FakeReply, request: dict[str, Any], request_size: int,
                   cost_for: CostFn) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if step.text:
        content.append({"type": "text", "text": step.text})
    for c in step.tool_calls:
        content.append({"type": "tool_use", "id": c.id or f"toolu_{uuid.uuid4().hex[:12]}",
                        "name": c.name, "input": _anthropic_input(c.arguments)})
    prompt, completion = _tokens(step, request_size, len(json.dumps(content)))
    stop = step.finish_reason or ("tool_use" if step.tool_calls else "end_turn")
    return {
        "id": f"msg_{uuid.uuid4().hex[:16]}",
        "type": "message",
        "role": "assistant",
        "model": request.get("model", "fake"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": prompt, "output_tokens": completion},
    }
