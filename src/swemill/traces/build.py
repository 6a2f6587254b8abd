"""From a message list to the records of the traces stage, whatever agent wrote the log.

Every importer (Claude Code, mini-swe-agent, SWE-agent) reduces its format to messages in
the canonical IR plus a list of :class:`TurnRef` (where each assistant turn sits, what it
cost); this module makes the whole-session ``Trajectory`` and one ``TraceState`` per turn.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from swemill.core.records import Message, ToolResultBlock, Trajectory, Usage
from swemill.traces.states import BranchKind, IngestCounts, TraceState

__all__ = ["TurnRef", "SessionPart", "make_trajectory", "make_states", "unique_key",
           "trajectory_metadata"]


@dataclass(slots=True)
class TurnRef:
    """Where an assistant turn sits in its message list, and what the call behind it cost."""

    index: int
    key: str
    """Identity of the API response (Claude Code's ``message.id``), to emit each turn once."""
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    n_source_calls: int = 0
    """Tool calls as the source agent wrote them (a ``MultiEdit`` is one)."""
    timestamp: str | None = None
    synthetic: bool = False
    """Written by the agent program, not a model (Claude Code's ``<synthetic>``)."""


@dataclass(slots=True)
class SessionPart:
    """One trajectory to emit: the main chain, a branch, a sidechain or a sub-agent."""

    session_key: str
    source: str
    messages: list[Message]
    turns: list[TurnRef]
    branch: BranchKind = "main"
    parent_id: str | None = None
    branch_point: int | None = None
    compactions: list[int] = field(default_factory=list)
    source_file: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def trajectory_id(self) -> str:
        return f"{self.source}:{self.session_key}"


def _policy(part: SessionPart) -> str:
    models = Counter(t.model for t in part.turns if t.model and not t.synthetic)
    return f"{part.source}:{models.most_common(1)[0][0]}" if models else part.source


def trajectory_metadata(part: SessionPart, compactions: list[int]) -> dict[str, Any]:
    meta = dict(part.metadata)
    meta.update(session=part.session_key, branch=part.branch, source_file=part.source_file)
    if compactions:
        meta["compactions"] = list(compactions)
    return meta


def make_trajectory(part: SessionPart) -> Trajectory:
    usage = Usage()
    for t in part.turns:
        usage = usage + t.usage
    meta = trajectory_metadata(part, part.compactions)
    return Trajectory(
        trajectory_id=part.trajectory_id,
        source=part.source,
        policy=_policy(part),
        messages=part.messages,
        usage=usage,
        parent_id=part.parent_id,
        branch_point=part.branch_point,
        metadata=meta,
    )


def _results(messages: list[Message], start: int, call_ids: set[str]) -> list[ToolResultBlock]:
    out: list[ToolResultBlock] = []
    for msg in messages[start + 1 :]:
        if msg.role == "assistant":
            break
        out.extend(
            b for b in msg.content
            if isinstance(b, ToolResultBlock) and (not call_ids or b.call_id in call_ids)
        )
    return out


def _state(part: SessionPart, ref: TurnRef, ordinal: int, window: list[Message], base: int,
           compactions: list[int], history: bool) -> TraceState:
    """The state of turn ``ref``; ``window`` holds the messages from global index ``base``
    on (the whole list, or what a stream still holds)."""
    response = window[ref.index - base]
    actions = response.tool_calls
    results = _results(window, ref.index - base, {a.id for a in actions if a.id})
    context_start = max((c for c in compactions if c <= ref.index), default=0)
    return TraceState(
        state_id=f"{part.session_key}::{ordinal:04d}",
        session_id=part.session_key,
        trajectory_id=part.trajectory_id,
        turn=ordinal,
        prefix_len=ref.index,
        context_start=context_start,
        messages=window[context_start - base : ref.index - base] if history else [],
        response=response,
        actions=actions,
        action_keys=[a.canonical_key() for a in actions],
        results=results,
        has_error=any(r.is_error for r in results),
        usage=ref.usage,
        model=ref.model,
        source=part.source,
        branch=part.branch,
        parent_trajectory_id=part.parent_id,
        branch_point=part.branch_point,
        source_file=part.source_file,
        timestamp=ref.timestamp,
    )


def _counted(ref: TurnRef, state: TraceState, counts: IngestCounts) -> TraceState:
    counts.assistant_turns += 1
    counts.tool_calls += ref.n_source_calls
    counts.tool_errors += sum(r.is_error for r in state.results)
    counts.add_usage(ref.usage)
    return state


def make_states(
    part: SessionPart, counts: IngestCounts, emitted: set[str], *, history: bool = True
) -> Iterable[TraceState]:
    """One state per real assistant turn not already emitted (``emitted`` holds turn keys);
    without ``history`` the states' ``messages`` stay empty (they are not stored)."""
    ordinal = -1
    for ref in part.turns:
        if ref.synthetic:
            continue
        ordinal += 1
        if ref.key in emitted:
            continue
        emitted.add(ref.key)
        state = _state(part, ref, ordinal, part.messages, 0, part.compactions, history)
        yield _counted(ref, state, counts)


def unique_key(base: str, keys: set[str]) -> str:
    """``base``, or ``base#2``, ``base#3``... when a session of that key was already read (the
    same session id in two files: both are kept, apart). Records the key in ``keys``."""
    key, n = base, 1
    while key in keys:
        n += 1
        key = f"{base}#{n}"
    keys.add(key)
    return key
