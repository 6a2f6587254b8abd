"""Claude Code records on one path of the session tree -> canonical messages.

Claude Code writes one line per content block of a response; the lines share ``message.id``
and each repeats the whole ``usage``. Here they become one assistant message, anchored where
the first line sits, with the usage taken once (the largest value seen per field, since
early lines of a streamed response can carry partial output counts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from swemill.core.records import (
    ContentBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from swemill.core.toolmap import from_claude_code
from swemill.policies.prices import Price, cost_of
from swemill.traces.scrub_hook import Scrubber

__all__ = ["Node", "Turn", "PathMessages", "to_messages", "SYNTHETIC_MODEL"]

SYNTHETIC_MODEL = "<synthetic>"
"""The model name Claude Code gives to messages it writes itself (errors, interruptions)."""


@dataclass(slots=True)
class Node:
    """One line of a session file that takes part in the ``parentUuid`` tree.

    A node read for the tree alone carries no ``record``, only where its line is in the file
    (``offset``, ``size``): :func:`to_messages` reads the records of one path back when it
    needs them, so a long session costs a few hundred bytes per line, not the parsed line."""

    uuid: str
    parent: str | None
    order: int
    kind: str
    record: dict[str, Any] | None = None
    sidechain: bool = False
    logical_parent: str | None = None
    offset: int = 0
    size: int = 0
    boundary: bool = False
    """A ``system`` record of subtype ``compact_boundary``."""


Load = Callable[[Node], dict[str, Any]]


def _own_record(node: Node) -> dict[str, Any]:
    return node.record or {}


@dataclass(slots=True)
class Turn:
    """An assistant message (one API response) inside a message list."""

    index: int
    key: str
    model: str
    usage_raw: dict[str, int] = field(default_factory=dict)
    tool_use_ids: list[str] = field(default_factory=list)
    timestamp: str | None = None
    stop_reason: str | None = None

    @property
    def synthetic(self) -> bool:
        return self.model == SYNTHETIC_MODEL


@dataclass(slots=True)
class PathMessages:
    messages: list[Message]
    turns: list[Turn]
    compactions: list[int]
    """Index of the first message after each compaction boundary."""


_USAGE_FIELDS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_read_input_tokens": "cache_read_tokens",
    "cache_creation_input_tokens": "cache_write_tokens",
}


def turn_usage(turn: Turn, cost_usd: float | None, price: Price | None) -> Usage:
    usage = Usage(**{ours: turn.usage_raw.get(theirs, 0) for theirs, ours in _USAGE_FIELDS.items()})
    cost, _ = cost_of(usage, price, cost_usd)
    return usage.model_copy(update={"cost_usd": cost})


def _merge_usage(into: dict[str, int], usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    for key in _USAGE_FIELDS:
        value = usage.get(key)
        if isinstance(value, int) and value > into.get(key, 0):
            into[key] = value


def placeholder(block: dict[str, Any]) -> str:
    """A typed stand-in for a block whose bytes are not kept: ``[image: image/png]``."""
    kind = str(block.get("type", "block"))
    source = block.get("source")
    media = source.get("media_type") if isinstance(source, dict) else None
    return f"[{kind}: {media}]" if media else f"[{kind} omitted]"


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif isinstance(block, dict):
                parts.append(placeholder(block))
        return "\n".join(parts)
    return "" if content is None else str(content)


class _Builder:
    def __init__(self, cwd: str | None, keep_thinking: bool, scrub: Scrubber, load: Load) -> None:
        self.cwd, self.keep_thinking, self.scrub, self.load = cwd, keep_thinking, scrub, load
        self.out = PathMessages([], [], [])
        self.by_key: dict[str, Turn] = {}

    def assistant_blocks(self, content: Any, seen_ids: list[str]) -> list[ContentBlock]:
        blocks: list[ContentBlock] = []
        for b in content if isinstance(content, list) else [{"type": "text", "text": content}]:
            kind = b.get("type") if isinstance(b, dict) else None
            if kind == "text" and b.get("text"):
                blocks.append(TextBlock(text=self.scrub.text(str(b["text"]))))
            elif kind == "thinking" and self.keep_thinking:
                text = self.scrub.text(str(b.get("thinking", "")))
                blocks.append(ThinkingBlock(text=text, signature=b.get("signature")))
            elif kind == "redacted_thinking" and self.keep_thinking:
                blocks.append(ThinkingBlock(text="", signature=str(b.get("data", "")),
                                            redacted=True))
            elif kind == "image":
                blocks.append(TextBlock(text=placeholder(b)))
            elif kind == "tool_use" and str(b.get("id", "")) not in seen_ids:
                call_id, name = str(b.get("id", "")), str(b.get("name", ""))
                seen_ids.append(call_id)
                # Paths are made relative to the session's cwd first, then scrubbed (a home
                # directory left in an argument becomes ``~``).
                for call in from_claude_code(name, b.get("input"), call_id, self.cwd):
                    call = call.model_copy(update={"args": self.scrub.value(call.args)})
                    blocks.append(ToolUseBlock(call=call, original_name=name))
        return blocks

    def add_assistant(self, node: Node) -> None:
        record = self.load(node)
        msg = record.get("message")
        msg = msg if isinstance(msg, dict) else {}
        key = str(msg.get("id") or node.uuid)
        turn = self.by_key.get(key)
        if turn is None:
            turn = Turn(index=len(self.out.messages), key=key, model=str(msg.get("model", "")),
                        timestamp=record.get("timestamp"))
            self.by_key[key] = turn
            self.out.turns.append(turn)
            self.out.messages.append(Message(role="assistant"))
        # A block repeated on a second line of the same response is taken once.
        blocks = self.assistant_blocks(msg.get("content"), turn.tool_use_ids)
        self.out.messages[turn.index].content.extend(blocks)
        _merge_usage(turn.usage_raw, msg.get("usage"))
        turn.stop_reason = msg.get("stop_reason") or turn.stop_reason

    def add_user(self, node: Node) -> None:
        record = self.load(node)
        msg = record.get("message")
        content = msg.get("content") if isinstance(msg, dict) else None
        if record.get("isCompactSummary"):
            self.out.compactions.append(len(self.out.messages))
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        results: list[ContentBlock] = []
        texts: list[ContentBlock] = []
        for b in content if isinstance(content, list) else []:
            kind = b.get("type") if isinstance(b, dict) else None
            if kind == "tool_result":
                text = self.scrub.text(_result_text(b.get("content")))
                call_id = str(b.get("tool_use_id", ""))
                results.append(ToolResultBlock(call_id=call_id, content=text,
                                               is_error=bool(b.get("is_error"))))
            elif kind == "text" and b.get("text"):
                texts.append(TextBlock(text=self.scrub.text(str(b["text"]))))
            elif kind:
                texts.append(TextBlock(text=placeholder(b)))
        if results:
            self.out.messages.append(Message(role="tool", content=results))
        if texts:
            self.out.messages.append(Message(role="user", content=texts))


def to_messages(
    path: list[Node], cwd: str | None, keep_thinking: bool, scrub: Scrubber,
    load: Load = _own_record,
) -> PathMessages:
    """Messages, assistant turns and compaction points for one root-to-leaf path; ``load``
    gives a node's record (default: the one it holds)."""
    b = _Builder(cwd, keep_thinking, scrub, load)
    for node in path:
        if node.kind == "assistant":
            b.add_assistant(node)
        elif node.kind == "user":
            b.add_user(node)
        elif node.boundary or (node.record or {}).get("subtype") == "compact_boundary":
            b.out.compactions.append(len(b.out.messages))
    # A boundary is followed by its summary message: one compaction, one index.
    b.out.compactions = sorted(set(b.out.compactions))
    return b.out
