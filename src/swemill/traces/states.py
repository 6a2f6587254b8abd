"""Records of the traces stage: one state per assistant turn, quarantined lines, counts.

A :class:`TraceState` is what a teacher is asked to act on: the conversation up to an
assistant turn, and what the original agent did there (its actions in the canonical algebra,
the results with error flags, the usage). At rest a state does not repeat the history; it
names its trajectory and how many of its messages came before (``prefix_len``), because
repeating the history in every state grows with the square of a session's length.
:func:`swemill.traces.load.load_states` puts the history back.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from swemill.core.records import Message, ToolResultBlock, Usage, utcnow
from swemill.core.tools import ToolCall

__all__ = ["TraceState", "Quarantine", "IngestCounts", "BranchKind"]

BranchKind = Literal["main", "branch", "sidechain", "subagent"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TraceState(_Record):
    """One assistant turn of an imported session, with everything before it."""

    state_id: str
    """``f"{session}::{turn:04d}"``; ``session`` names the trajectory (see ``session_id``)."""
    session_id: str
    """The trajectory's session key: the session id, plus ``/branch-k``, ``/sidechain-k`` or
    ``/agent-<id>`` for a rewind branch, an inline sidechain or a sub-agent file."""
    trajectory_id: str
    turn: int
    """0-based index of this assistant turn within its trajectory."""
    prefix_len: int
    """How many of the trajectory's messages precede this turn's assistant message."""
    context_start: int = 0
    """Index of the first message the model still saw: after a compaction, the summary."""
    messages: list[Message] = Field(default_factory=list, exclude=True)
    """The messages so far (``trajectory.messages[context_start:prefix_len]``). Not stored
    (see the module note); ``load_states`` fills it back in."""
    response: Message
    """The assistant's message at this turn (text, thinking, tool calls)."""
    actions: list[ToolCall] = Field(default_factory=list)
    """The turn's tool calls in the canonical algebra (``other:<Name>`` for the rest)."""
    action_keys: list[str] = Field(default_factory=list)
    """``ToolCall.canonical_key()`` of each action, for comparing with other policies."""
    results: list[ToolResultBlock] = Field(default_factory=list)
    has_error: bool = False
    """True when any of the turn's tool results was an error."""
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    source: str = "claude_code"
    branch: BranchKind = "main"
    parent_trajectory_id: str | None = None
    branch_point: int | None = None
    """For a branch: how many messages it shares with its parent trajectory."""
    source_file: str = ""
    timestamp: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Quarantine(_Record):
    """A line (or a whole file) that could not be ingested, and why."""

    file: str
    line_no: int
    """1-based; 0 for a finding about the whole file."""
    reason: str
    head: str = ""
    """The first 200 bytes, decoded with replacement characters, to find the line again."""
    size: int = 0
    stage: str = "traces"
    created_at: str = Field(default_factory=utcnow)


class IngestCounts(_Record):
    """What an ingest run saw; printed by the CLI and written into the run manifest."""

    files: int = 0
    sessions: int = 0
    subagent_sessions: int = 0
    sidechains: int = 0
    branches: int = 0
    trajectories: int = 0
    assistant_turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    lines: int = 0
    quarantined: int = 0
    quarantined_files: int = 0
    record_types: dict[str, int] = Field(default_factory=dict)
    skipped_types: dict[str, int] = Field(default_factory=dict)
    """Records that carry no conversation (``summary``, ``progress``, unknown types...)."""
    dropped: dict[str, int] = Field(default_factory=dict)
    """Things left out on purpose, by reason (``dead_leaf``, ``duplicate_uuid``, ...)."""
    reattached: int = 0
    """Records whose ``parentUuid`` names no record of the file, attached to the record
    written just before them (a lost line must not split a conversation)."""
    redacted_thinking: int = 0
    """Encrypted reasoning blocks, kept opaque."""
    images: int = 0
    """Images, kept as typed placeholders (``[image: image/png]``): the bytes are not stored."""
    unpriced: dict[str, int] = Field(default_factory=dict)
    """Assistant turns per model with no known price and no reported cost: priced $0."""
    scrubbed: dict[str, int] = Field(default_factory=dict)

    def bump(self, table: str, key: str, n: int = 1) -> None:
        counter: dict[str, int] = getattr(self, table)
        counter[key] = counter.get(key, 0) + n

    def add_usage(self, usage: Usage) -> None:
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cache_read_tokens += usage.cache_read_tokens
        self.cache_write_tokens += usage.cache_write_tokens
        self.cost_usd += usage.cost_usd

    def merge(self, other: IngestCounts) -> None:
        for name, value in other:
            mine = getattr(self, name)
            if isinstance(value, dict):
                setattr(self, name, dict(Counter(mine) + Counter(value)))
            else:
                setattr(self, name, mine + value)

    @property
    def tokens(self) -> int:
        return (
            self.input_tokens + self.output_tokens + self.cache_read_tokens
            + self.cache_write_tokens
        )
