"""One trajectory written out while its messages are still being built.

A long session must never be whole in memory: its messages come from a
:class:`MessageStream` (Claude Code's: :class:`swemill.traces.cc_messages.PathStream`), a
window over the message list that grows at the end and is released from the front. After
each step :func:`emit_part` takes what has become final: the states whose turn and results
are complete, and, whenever the final messages not yet stored pass ``segment_bytes``, one
segment row of the trajectory (see :mod:`swemill.core.segments`). The last row carries
what only the end settles (usage, policy, compactions). A trajectory that never reaches the
limit is one ordinary row, equal to :func:`swemill.traces.build.make_trajectory`'s.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from swemill.core.records import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Trajectory,
    Usage,
)
from swemill.core.segments import SEGMENT, SEGMENTS
from swemill.traces.build import SessionPart, TurnRef, _counted, _state, trajectory_metadata
from swemill.traces.states import IngestCounts, TraceState

__all__ = ["MessageStream", "emit_part", "message_bytes", "DEFAULT_SEGMENT_BYTES"]

DEFAULT_SEGMENT_BYTES = 1024 * 1024
"""About how much message text one trajectory row holds (a hundred turns or so)."""


class MessageStream(Protocol):
    window: list[Message]
    """The messages still held, from global index ``base`` on."""
    base: int
    final: int
    """Messages before this global index will not change any more."""
    done: bool
    compactions: list[int]

    def steps(self) -> Iterator[None]:
        """Builds the messages, pausing after each piece of input; ``done`` at the end."""
        ...

    def take_turns(self) -> list[TurnRef]:
        """The turns that became final since the last call, in turn order."""
        ...

    def release(self, before: int) -> None:
        """Messages before global index ``before`` are no longer needed here."""
        ...


def message_bytes(message: Message) -> int:
    """About how much text a message holds (to cut segments, not to bill anyone)."""
    n = 64
    for b in message.content:
        if isinstance(b, TextBlock):
            n += len(b.text)
        elif isinstance(b, ThinkingBlock):
            n += len(b.text) + len(b.signature or "")
        elif isinstance(b, ToolResultBlock):
            n += len(b.content)
        elif isinstance(b, ToolUseBlock):
            n += len(str(b.call.args))
        n += 64
    return n


def _policy(part: SessionPart, models: Counter[str]) -> str:
    return f"{part.source}:{models.most_common(1)[0][0]}" if models else part.source


@dataclass
class _Emitter:
    part: SessionPart
    s: MessageStream
    counts: IngestCounts
    emitted: set[str]
    history: bool
    segment_bytes: int
    pending: deque[TurnRef] = field(default_factory=deque)
    usage: Usage = field(default_factory=Usage)
    models: Counter[str] = field(default_factory=Counter)
    ordinal: int = -1
    seg: int = 0
    seg_start: int = 0
    scanned: int = 0
    seg_bytes: int = 0

    def _followed(self, index: int) -> bool:
        """Whether the turn at ``index`` has its results: the next assistant message began."""
        return any(m.role == "assistant" for m in self.s.window[index + 1 - self.s.base :])

    def states(self) -> Iterator[TraceState]:
        self.pending.extend(self.s.take_turns())
        while self.pending and (self.s.done or self._followed(self.pending[0].index)):
            ref = self.pending.popleft()
            self.usage = self.usage + ref.usage  # turn order, as make_trajectory sums
            if ref.synthetic:
                continue
            if ref.model:
                self.models[ref.model] += 1
            self.ordinal += 1
            if ref.key in self.emitted:
                continue
            self.emitted.add(ref.key)
            state = _state(self.part, ref, self.ordinal, self.s.window, self.s.base,
                           self.s.compactions, self.history)
            yield _counted(ref, state, self.counts)
        self._release()

    def segments(self) -> Iterator[Trajectory]:
        s = self.s
        # at the end the tail is the last row's, however long: cut only before it
        while self.scanned < s.final - (1 if s.done else 0):
            self.seg_bytes += message_bytes(s.window[self.scanned - s.base])
            self.scanned += 1
            if self.seg_bytes >= self.segment_bytes:
                yield self._cut()

    def _cut(self) -> Trajectory:
        s = self.s
        messages = s.window[self.seg_start - s.base : self.scanned - s.base]
        row = Trajectory(trajectory_id=self.part.trajectory_id, source=self.part.source,
                         policy="", messages=messages, metadata={SEGMENT: self.seg})
        self.seg, self.seg_start, self.seg_bytes = self.seg + 1, self.scanned, 0
        self._release()
        return row

    def _release(self) -> None:
        s = self.s
        keep = min(self.seg_start, self.pending[0].index if self.pending else s.final)
        if self.history:  # a state's history reaches back to its last compaction
            keep = min(keep, max((c for c in s.compactions if c <= keep), default=0))
        s.release(keep)

    def last(self) -> Trajectory:
        s = self.s
        meta = trajectory_metadata(self.part, s.compactions)
        if self.seg:
            meta.update({SEGMENT: self.seg, SEGMENTS: self.seg + 1})
        return Trajectory(
            trajectory_id=self.part.trajectory_id, source=self.part.source,
            policy=_policy(self.part, self.models),
            messages=s.window[self.seg_start - s.base : s.final - s.base], usage=self.usage,
            parent_id=self.part.parent_id, branch_point=self.part.branch_point, metadata=meta)


def emit_part(
    part: SessionPart, stream: MessageStream, counts: IngestCounts, emitted: set[str], *,
    history: bool = True, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
) -> Iterator[TraceState | Trajectory]:
    """The states of ``part`` and its trajectory's row(s), each as soon as it is final."""
    counts.trajectories += 1
    e = _Emitter(part, stream, counts, emitted, history, max(1, segment_bytes))
    for _ in stream.steps():
        yield from e.states()
        yield from e.segments()
    if not stream.done:
        raise RuntimeError("a message stream ended without saying it was done")
    yield e.last()
