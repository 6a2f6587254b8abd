"""Request and response bodies of Bedrock batch inference, one format per model family.

Batch inference has no tool calling, so the tools are rendered into the prompt text
(:mod:`swemill.policies.textproto`) and the reply's fenced ``tool`` blocks parsed back.
A record's ``modelInput`` is the body the model takes in ``InvokeModel``:

- ``anthropic`` (Claude): the Anthropic Messages body with ``anthropic_version``;
- ``meta`` (Llama): ``prompt`` in the Llama 3 chat template, ``max_gen_len``;
- ``mistral``: ``prompt`` in the ``[INST]`` template, ``max_tokens``;
- ``amazon`` (Nova): the ``messages-v1`` body;
- ``converse``: any other family, as a Converse request body in a job created with
  ``modelInvocationType="Converse"``.

The ``modelOutput`` of each line is that model's response body (for ``converse``, the
Converse response), parsed here into text and token counts.
"""

from __future__ import annotations

from typing import Any

from swemill.core.records import Message, TextBlock, ToolUseBlock, Usage
from swemill.policies.textproto import parse_tool_blocks, to_text_messages

__all__ = ["FORMATS", "format_for", "invocation_type", "render_body", "parse_output",
           "message_from_text", "text_turns"]

FORMATS = ("anthropic", "meta", "mistral", "amazon", "converse")
ANTHROPIC_VERSION = "bedrock-2023-05-31"


def format_for(family: str) -> str:
    return family if family in FORMATS else "converse"


def invocation_type(fmt: str) -> str:
    return "Converse" if fmt == "converse" else "InvokeModel"


def text_turns(messages: list[Message], tools: list[dict[str, Any]]) -> tuple[str, list[
        tuple[str, str]]]:
    """(system text, alternating (role, text) turns starting with the user, ending with it)."""
    flat = to_text_messages(messages, tools)
    system = "\n\n".join(m.text for m in flat if m.role == "system" and m.text.strip())
    turns: list[tuple[str, str]] = []
    for m in flat:
        if m.role == "system" or not m.text.strip():
            continue
        role = "assistant" if m.role == "assistant" else "user"
        if turns and turns[-1][0] == role:
            turns[-1] = (role, turns[-1][1] + "\n\n" + m.text)
        else:
            turns.append((role, m.text))
    if not turns or turns[0][0] != "user":
        turns.insert(0, ("user", "(the session starts)"))
    if turns[-1][0] != "user":
        turns.append(("user", "Continue: take the next step."))
    return system, turns


def _llama(system: str, turns: list[tuple[str, str]]) -> str:
    parts = ["<|begin_of_text|>"]
    if system:
        parts.append(f"<|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|>")
    for role, text in turns:
        parts.append(f"<|start_header_id|>{role}<|end_header_id|>\n\n{text}<|eot_id|>")
    parts.append("<|start_header_id|>assistant<|end_header_id|>\n\n")
    return "".join(parts)


def _mistral(system: str, turns: list[tuple[str, str]]) -> str:
    out = "<s>"
    for i, (role, text) in enumerate(turns):
        if role == "user":
            lead = f"{system}\n\n" if system and i == len(turns) - 1 else ""
            out += f"[INST] {lead}{text} [/INST]"
        else:
            out += f"{text}</s>"
    return out


def render_body(fmt: str, messages: list[Message], tools: list[dict[str, Any]],
                max_tokens: int) -> dict[str, Any]:
    """The ``modelInput`` of one record for a model of format ``fmt``."""
    system, turns = text_turns(messages, tools)
    if fmt == "anthropic":
        body: dict[str, Any] = {
            "anthropic_version": ANTHROPIC_VERSION, "max_tokens": max_tokens,
            "messages": [{"role": r, "content": [{"type": "text", "text": t}]}
                         for r, t in turns]}
        if system:
            body["system"] = system
        return body
    if fmt == "meta":
        return {"prompt": _llama(system, turns), "max_gen_len": max_tokens}
    if fmt == "mistral":
        return {"prompt": _mistral(system, turns), "max_tokens": max_tokens}
    body = {"messages": [{"role": r, "content": [{"text": t}]} for r, t in turns],
            "inferenceConfig": {"maxTokens": max_tokens}}
    if system:
        body["system"] = [{"text": system}]
    if fmt == "amazon":
        body = {"schemaVersion": "messages-v1", **body}
    return body


def _blocks_text(blocks: Any, key: str = "text") -> str:
    if not isinstance(blocks, list):
        return ""
    return "".join(str(b.get(key) or "") for b in blocks if isinstance(b, dict))


def parse_output(fmt: str, output: Any) -> tuple[str, Usage, str | None]:
    """(reply text, usage, stop reason) from one line's ``modelOutput``; a body of the wrong
    shape raises ValueError (the caller records it as that record's error)."""
    if not isinstance(output, dict):
        raise ValueError(f"modelOutput is {type(output).__name__}, not an object")
    if fmt == "anthropic":
        if "content" not in output:
            raise ValueError("Claude output without 'content'")
        u = output.get("usage") or {}
        usage = Usage(input_tokens=int(u.get("input_tokens") or 0),
                      output_tokens=int(u.get("output_tokens") or 0))
        return _blocks_text(output["content"]), usage, output.get("stop_reason")
    if fmt == "meta":
        if "generation" not in output:
            raise ValueError("Llama output without 'generation'")
        usage = Usage(input_tokens=int(output.get("prompt_token_count") or 0),
                      output_tokens=int(output.get("generation_token_count") or 0))
        return str(output["generation"] or ""), usage, output.get("stop_reason")
    if fmt == "mistral":
        outs = output.get("outputs")
        if not isinstance(outs, list) or not outs:
            raise ValueError("Mistral output without 'outputs'")
        return str(outs[0].get("text") or ""), Usage(), outs[0].get("stop_reason")
    message = (output.get("output") or {}).get("message")
    if not isinstance(message, dict):
        raise ValueError("output without 'output.message'")
    u = output.get("usage") or {}
    usage = Usage(input_tokens=int(u.get("inputTokens") or 0),
                  output_tokens=int(u.get("outputTokens") or 0))
    return _blocks_text(message.get("content")), usage, output.get("stopReason")


def message_from_text(text: str, id_prefix: str, usage: Usage) -> tuple[Message, list[str]]:
    """An assistant message with the text's ``tool`` blocks as calls, and format errors."""
    prose, calls, errors = parse_tool_blocks(text, id_prefix)
    blocks: list[Any] = [TextBlock(text=prose)] if prose else []
    blocks += [ToolUseBlock(call=c) for c in calls]
    return Message(role="assistant", content=blocks, usage=usage), errors
