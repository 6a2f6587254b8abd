"""Claude Code records on one path of the session tree -> canonical messages.

Claude Code writes one line per content block of a response; the lines share ``message.id``
and each repeats the whole ``usage``. Here they become one assistant message, anchored where
the first line sits, with the usage taken once (the largest value seen per field, since
early lines of a streamed response can carry partial output counts).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
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

__all__ = ["Node", "Turn", "PathStream", "count_messages", "SYNTHETIC_MODEL"]

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
    key: str | None = None
    """For an assistant line: its response's identity (``message.id``), read in the first
    pass so a path knows where each response ends before its records are read back."""


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


def _key_of(node: Node, record: dict[str, Any]) -> str:
    msg = record.get("message")
    return str((msg.get("id") if isinstance(msg, dict) else None) or node.uuid)


class PathStream:
    """The messages of one root-to-leaf path, built node by node: a
    :class:`swemill.traces.stream.MessageStream`. A response's lines are merged into one
    assistant message; it is final once the path has passed the response's last line, so
    only the messages not yet taken (and responses still open) are held."""

    def __init__(self, path: list[Node], cwd: str | None, keep_thinking: bool, scrub: Scrubber,
                 load: Load = _own_record, to_ref: Callable[[Turn], Any] | None = None) -> None:
        self.path, self.cwd, self.keep_thinking, self.scrub, self.load = (
            path, cwd, keep_thinking, scrub, load)
        self.to_ref = to_ref
        self.window: list[Message] = []
        self.base = self.final = 0
        self.done = False
        self.compactions: list[int] = []
        self._open: dict[str, Turn] = {}  # responses whose last line is still to come
        self._turns: deque[Turn] = deque()  # not yet taken, in turn order

    @property
    def count(self) -> int:
        return self.base + len(self.window)

    def steps(self) -> Iterator[None]:
        keys = [(n.key or _key_of(n, self.load(n))) if n.kind == "assistant" else None
                for n in self.path]
        last = {k: p for p, k in enumerate(keys) if k is not None}
        for p, node in enumerate(self.path):
            if node.kind == "assistant":
                key = keys[p] or node.uuid
                self._add_assistant(node, key)
                if last[key] == p:
                    del self._open[key]
            elif node.kind == "user":
                self._add_user(node)
            elif node.boundary or (node.record or {}).get("subtype") == "compact_boundary":
                self._compaction()
            self.final = next(iter(self._open.values())).index if self._open else self.count
            yield
        self.done, self.final = True, self.count
        yield

    def take_turns(self) -> list[Any]:
        out = []
        while self._turns and (self.done or self._turns[0].index < self.final):
            turn = self._turns.popleft()
            if self.to_ref is not None:
                out.append(self.to_ref(turn))
        return out

    def release(self, before: int) -> None:
        if before > self.base:
            del self.window[: before - self.base]
            self.base = before

    def _compaction(self) -> None:
        # A boundary is followed by its summary message: one compaction, one index.
        if not self.compactions or self.compactions[-1] != self.count:
            self.compactions.append(self.count)

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

    def _add_assistant(self, node: Node, key: str) -> None:
        record = self.load(node)
        msg = record.get("message")
        msg = msg if isinstance(msg, dict) else {}
        turn = self._open.get(key)
        if turn is None:
            turn = Turn(index=self.count, key=key, model=str(msg.get("model", "")),
                        timestamp=record.get("timestamp"))
            self._open[key] = turn
            self._turns.append(turn)
            self.window.append(Message(role="assistant"))
        # A block repeated on a second line of the same response is taken once.
        blocks = self.assistant_blocks(msg.get("content"), turn.tool_use_ids)
        self.window[turn.index - self.base].content.extend(blocks)
        _merge_usage(turn.usage_raw, msg.get("usage"))
        turn.stop_reason = msg.get("stop_reason") or turn.stop_reason

    def _add_user(self, node: Node) -> None:
        record = self.load(node)
        msg = record.get("message")
        content = msg.get("content") if isinstance(msg, dict) else None
        if record.get("isCompactSummary"):
            self._compaction()
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
            self.window.append(Message(role="tool", content=results))
        if texts:
            self.window.append(Message(role="user", content=texts))


def count_messages(path: list[Node], cwd: str | None, scrub: Scrubber, load: Load) -> int:
    """How many messages ``path`` makes, holding only the responses still open."""
    stream = PathStream(path, cwd, True, scrub, load)
    for _ in stream.steps():
        stream.take_turns()
        stream.release(stream.final)
    return stream.count
