"""Claude Code session logs (``~/.claude/projects/<project>/<session>.jsonl``) -> traces.

A file is read twice, line by line (:mod:`swemill.traces.lines`). The first pass keeps
only the shape of the session: per line its uuid, parent, kind and place in the file, not
the parsed record (which costs several times the line's bytes). The second pass reads back,
by place, the records of one path at a time as it turns them into messages. So memory
follows the number of lines and one trajectory's messages, never the raw file or the corpus.

A file that holds several ``sessionId`` values gives one session (one tree) per id; a line
without one belongs to the session of the line before it. ``user`` and ``assistant`` records
become messages (older logs write no ``type``: the message's ``role`` says which); other
records that carry a ``uuid`` (``system``, ``attachment``, ``progress``, ...) stay in the tree
so parent links hold, and are counted as skipped; a duplicated ``uuid`` keeps its well-formed
copy; records without one (``summary``, ``file-history-snapshot``, ``queue-operation``,
``ai-title``, anything unknown) are counted and skipped. Encrypted reasoning
(``redacted_thinking``) is kept opaque and images as typed placeholders, both counted; a model
with no known price and no reported cost is counted as ``unpriced`` (``IngestOptions.prices``
adds the user's prices). See :mod:`swemill.traces.cc_tree` for the main chain, rewind
branches and sidechains, and :mod:`swemill.traces.cc_messages` for the merge of a response's
lines by ``message.id``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swemill.core.records import Trajectory
from swemill.policies.prices import Price, lookup_price
from swemill.traces.build import SessionPart, TurnRef, unique_key
from swemill.traces.cc_messages import (
    SYNTHETIC_MODEL,
    Load,
    Node,
    PathStream,
    Turn,
    count_messages,
    turn_usage,
)
from swemill.traces.cc_tree import build_tree
from swemill.traces.lines import DEFAULT_MAX_LINE_BYTES, Line, LineReader, iter_lines
from swemill.traces.scrub_hook import Scrubber
from swemill.traces.states import BranchKind, IngestCounts, Quarantine, TraceState
from swemill.traces.stream import DEFAULT_SEGMENT_BYTES, emit_part

__all__ = ["IngestOptions", "ingest_session_file", "SOURCE"]

SOURCE = "claude_code"
Item = TraceState | Trajectory | Quarantine


@dataclass(slots=True)
class IngestOptions:
    keep_thinking: bool = True
    """Keep ``thinking`` blocks (with their signatures) in messages."""
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    """Lines longer than this are quarantined without being held in memory."""
    state_history: bool = True
    """Give each state its ``messages`` (the history). The store does not keep them, so
    :func:`swemill.traces.ingest.ingest` turns this off."""
    prices: Mapping[str, Price] = field(default_factory=dict)
    """The user's prices by model-name prefix, tried before swemill's own table."""
    scrub_keep: frozenset[str] = frozenset()
    """PII kinds the scrubber leaves in place (``--scrub-keep``); secrets never."""
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    """A Claude Code trajectory longer than about this much text is stored as several rows
    (:mod:`swemill.core.segments`), written as it is read: memory follows one segment."""

    def price(self, model: str) -> Price | None:
        mine = max((k for k in self.prices if model.startswith(k)), key=len, default=None)
        return self.prices[mine] if mine is not None else lookup_price(model)


@dataclass(slots=True)
class _Log:
    nodes: list[Node] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    summaries: list[str] = field(default_factory=list)
    cost_by_key: dict[str, float] = field(default_factory=dict)
    models: dict[str, str] = field(default_factory=dict)
    """Assistant message key -> model name, for the price check."""
    keys: dict[str, str] = field(default_factory=dict)
    """Assistant message keys, interned: the lines of a response share one string."""


_META_KEYS = {"sessionId": "session_id", "cwd": "cwd", "gitBranch": "git_branch",
              "version": "version", "agentId": "agent_id"}  # fmt: skip


def _kind(rec: dict[str, Any]) -> str | None:
    """The record's type; older logs write none on messages, whose ``role`` then says it."""
    kind = rec.get("type")
    if isinstance(kind, str):
        return kind
    msg = rec.get("message")
    role = msg.get("role") if isinstance(msg, dict) else None
    return role if role in ("user", "assistant") else None


def _well_formed(rec: dict[str, Any]) -> bool:
    msg = rec.get("message")
    return _kind(rec) in ("user", "assistant") and isinstance(msg, dict) \
        and isinstance(msg.get("content"), list | str) and bool(msg.get("content"))


def _count_blocks(rec: dict[str, Any], counts: IngestCounts) -> None:
    msg = rec.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    for b in content if isinstance(content, list) else []:
        if not isinstance(b, dict):
            continue
        inner = b.get("content") if b.get("type") == "tool_result" else None
        for x in [b, *(inner if isinstance(inner, list) else [])]:
            if isinstance(x, dict) and x.get("type") == "image":
                counts.images += 1
            elif isinstance(x, dict) and x.get("type") == "redacted_thinking":
                counts.redacted_thinking += 1


def _note(log: _Log, rec: dict[str, Any], counts: IngestCounts) -> None:
    kind = _kind(rec) or "<no type>"
    counts.bump("record_types", kind)
    for theirs, ours in _META_KEYS.items():
        if isinstance(rec.get(theirs), str) and ours not in log.meta:
            log.meta[ours] = rec[theirs]
    if kind == "summary" and isinstance(rec.get("summary"), str):
        log.summaries.append(rec["summary"])
    if kind not in ("user", "assistant"):
        counts.bump("skipped_types", kind)


_KINDS: dict[str, str] = {}
"""One string object per node kind, not one per line."""


def _node(rec: dict[str, Any], line: Line) -> Node | None:
    kind = _kind(rec)
    conversational = kind in ("user", "assistant") and isinstance(rec.get("message"), dict)
    uuid = rec.get("uuid")
    if not isinstance(uuid, str) or not uuid:
        if not conversational:
            return None
        uuid = f"line-{line.line_no}"  # a message without an id still belongs to the conversation
    parent, logical = rec.get("parentUuid"), rec.get("logicalParentUuid")
    name = str(kind) if conversational else f"other:{kind}"
    return Node(
        uuid=uuid,
        parent=parent if isinstance(parent, str) else None,
        order=line.line_no,
        kind=_KINDS.setdefault(name, name) if len(_KINDS) < 256 else name,
        sidechain=rec.get("isSidechain") is True,
        logical_parent=logical if isinstance(logical, str) else None,
        offset=line.offset,
        size=line.size,
        boundary=not conversational and rec.get("subtype") == "compact_boundary",
    )


GIVE_UP_AFTER = 100
"""A file whose first this many lines are all unusable is not a session log: the rest of it
is one quarantine row, not one per line (a binary file named .jsonl gave thousands)."""


def _give_up(path: Path, line: Line, counts: IngestCounts) -> Quarantine:
    counts.quarantined_files += 1
    rest = max(0, path.stat().st_size - line.offset - line.size)
    return Quarantine(file=str(path), line_no=0, size=rest,
                      reason=f"no JSON object in its first {GIVE_UP_AFTER} lines: not a "
                             f"session log (the other {rest} bytes were not read)")


def _index(mark: int) -> int:
    return mark if mark >= 0 else ~mark


def _read(path: Path, opts: IngestOptions, counts: IngestCounts) -> Iterator[Quarantine | _Log]:
    """Quarantined lines as they come, then one log per ``sessionId`` (file order)."""
    logs: dict[str, _Log] = {}
    sid = ""
    # per session: uuid -> index in log.nodes, as ~index while the kept copy is malformed
    at: dict[str, dict[str, int]] = {}
    good = 0
    for line in iter_lines(path, opts.max_line_bytes):
        rec = line.record
        counts.lines += 1
        if isinstance(rec, Quarantine):
            counts.quarantined += 1
            yield rec
            if not good and line.line_no >= GIVE_UP_AFTER:
                yield _give_up(path, line, counts)
                break
            continue
        good += 1
        if isinstance(rec.get("sessionId"), str) and rec["sessionId"]:
            sid = rec["sessionId"]
        log = logs.setdefault(sid, _Log())
        _note(log, rec, counts)
        node = _node(rec, line)
        if node is None:
            continue
        _count_blocks(rec, counts)
        if node.kind == "assistant":  # assistant nodes hold a dict message
            msg_id = str(rec["message"].get("id") or node.uuid)
            node.key = log.keys.setdefault(msg_id, msg_id)  # one string per response
        seen = at.setdefault(sid, {})
        if node.parent is not None and node.parent in seen:  # the parent's own string
            node.parent = log.nodes[_index(seen[node.parent])].uuid
        formed = _well_formed(rec)
        if node.uuid in seen:  # a duplicate uuid: the well-formed copy wins
            counts.bump("dropped", "duplicate_uuid")
            if formed and seen[node.uuid] < 0:
                log.nodes[~seen[node.uuid]] = node
                seen[node.uuid] = ~seen[node.uuid]
            continue
        seen[node.uuid] = len(log.nodes) if formed else ~len(log.nodes)
        log.nodes.append(node)
        if node.kind == "assistant" and node.key is not None:
            msg_id = node.key
            log.models.setdefault(msg_id, sys.intern(str(rec["message"].get("model") or "")))
            if isinstance(rec.get("costUSD"), int | float):
                # costUSD (older versions) is per line; the response's lines repeat it: once.
                log.cost_by_key[msg_id] = float(rec["costUSD"])
    for log in logs.values():
        for msg_id, model in log.models.items():
            if msg_id not in log.cost_by_key and model != SYNTHETIC_MODEL \
                    and opts.price(model) is None:
                counts.bump("unpriced", model or "<no model>")
        yield log


def _turn_ref(t: Turn, log: _Log, opts: IngestOptions) -> TurnRef:
    return TurnRef(
        index=t.index,
        key=t.key,
        model=t.model,
        usage=turn_usage(t, log.cost_by_key.get(t.key), opts.price(t.model)),
        n_source_calls=len(t.tool_use_ids),
        timestamp=t.timestamp,
        synthetic=t.synthetic,
    )


@dataclass(slots=True)
class _Session:
    path: Path
    log: _Log
    opts: IngestOptions
    scrub: Scrubber
    key: str
    load: Load
    """A node's record, read back from the file."""
    parent_key: str | None = None
    """For a sub-agent's file: the session that started it."""

    def part(self, nodes: list[Node], suffix: str, branch: BranchKind
             ) -> tuple[SessionPart, PathStream]:
        stream = PathStream(nodes, self.log.meta.get("cwd"), self.opts.keep_thinking,
                            self.scrub, self.load, lambda t: _turn_ref(t, self.log, self.opts))
        part = SessionPart(
            session_key=f"{self.key}{suffix}",
            source=SOURCE,
            messages=[],
            turns=[],
            branch=branch,
            parent_id=f"{SOURCE}:{self.key if suffix else self.parent_key}"
            if suffix or self.parent_key else None,
            source_file=str(self.path),
            metadata={k: v for k, v in self.log.meta.items() if k != "session_id"}
            | ({"summaries": self.log.summaries} if self.log.summaries else {}),
        )
        return part, stream


def _session_key(path: Path, log: _Log, subagent: bool, keys: set[str]) -> str:
    base = str(log.meta.get("session_id") or path.stem)
    if subagent:
        parent = str(log.meta.get("session_id") or path.parent.parent.name or "unknown")
        agent = str(log.meta.get("agent_id") or path.stem.removeprefix("agent-"))
        base = f"{parent}/agent-{agent}"
    return unique_key(base, keys)


def _parts(s: _Session, subagent: bool, counts: IngestCounts
           ) -> Iterator[tuple[SessionPart, PathStream]]:
    tree = build_tree(s.log.nodes, all_sidechain=subagent)
    if tree.dead_leaves:
        counts.bump("dropped", "dead_leaf", tree.dead_leaves)
    counts.reattached += tree.dangling
    if tree.main:
        yield s.part(tree.main, "", "subagent" if subagent else "main")
    for k, br in enumerate(tree.branches, 1):
        part, stream = s.part(br.path, f"/branch-{k}", "branch")
        part.branch_point = count_messages(br.path[: br.shared], s.log.meta.get("cwd"),
                                           Scrubber(), s.load)
        counts.branches += 1
        yield part, stream
    for k, side in enumerate(tree.sidechains, 1):
        counts.sidechains += 1
        yield s.part(side, f"/sidechain-{k}", "sidechain")


def ingest_session_file(
    path: Path,
    counts: IngestCounts,
    keys: set[str],
    opts: IngestOptions | None = None,
    scrub: Scrubber | None = None,
) -> Iterator[Item]:
    """States, trajectories and quarantine rows of one session file, in that order per part."""
    opts = opts or IngestOptions()
    subagent = path.parent.name == "subagents"
    logs: list[_Log] = []
    lines_before = counts.lines
    for item in _read(path, opts, counts):
        if isinstance(item, _Log):
            logs.append(item)
        else:
            yield item
    if counts.lines == lines_before:
        counts.quarantined_files += 1
        yield Quarantine(file=str(path), line_no=0, reason="empty file")
        return
    logs = [log for log in logs if any(n.kind in ("user", "assistant") for n in log.nodes)]
    if not logs:
        return
    scrub = scrub or Scrubber(opts.scrub_keep)
    with LineReader(path) as reader:
        for log in logs:
            key = _session_key(path, log, subagent, keys)
            counts.subagent_sessions += subagent
            counts.sessions += not subagent
            parent_key = key.rsplit("/agent-", 1)[0] if subagent else None
            log.summaries = [scrub.text(s) for s in log.summaries]
            session = _Session(path, log, opts, scrub, key,
                               lambda n: reader.read_at(n.offset, n.size), parent_key)
            emitted: set[str] = set()
            for part, stream in _parts(session, subagent, counts):
                yield from emit_part(part, stream, counts, emitted, history=opts.state_history,
                                     segment_bytes=opts.segment_bytes)
