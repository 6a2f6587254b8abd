"""OpenAI Codex CLI session logs (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``) -> traces.

Each line is an envelope ``{"timestamp", "type", "payload"}``:

- ``session_meta`` — the session id, ``cwd``, CLI version, git state (the first line);
- ``turn_context`` — the model (and approval/sandbox settings) from here on;
- ``response_item`` — what the model saw and said, by ``payload.type``: ``message`` (role
  ``user`` / ``assistant`` / ``developer`` / ``system``), ``reasoning`` (readable summary,
  or only ``encrypted_content``), ``function_call`` / ``custom_tool_call`` /
  ``local_shell_call`` and their ``*_output`` by ``call_id``;
- ``event_msg`` — UI events; ``token_count`` carries the usage of the last model call (used),
  the others repeat response items (``user_message``, ``agent_message``...) and are skipped;
- ``compacted`` — a summary that replaced earlier history (a compaction point).

Older files have no envelope: a first line with the session's ``id`` and ``instructions``,
then bare response items (and ``{"record_type": "state"}`` lines). Both are read.

Consecutive model-side items (reasoning, an assistant message, tool calls) make one assistant
turn; tool outputs become a ``tool`` message; tools are mapped onto the tool algebra by
:func:`swemill.core.toolmap.from_codex`. Every line is counted: read into a message, skipped
by kind (``skipped_types``), or quarantined.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from swemill.core.records import (
    ContentBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Trajectory,
    Usage,
)
from swemill.core.toolmap import from_codex
from swemill.policies.prices import cost_of
from swemill.traces.build import (
    SessionPart,
    TurnRef,
    make_states,
    make_trajectory,
    unique_key,
)
from swemill.traces.claude_code import IngestOptions
from swemill.traces.lines import iter_records
from swemill.traces.scrub_hook import Scrubber
from swemill.traces.states import IngestCounts, Quarantine, TraceState

__all__ = ["SOURCE", "ingest_codex_file", "sniff"]

SOURCE = "codex"
Item = TraceState | Trajectory | Quarantine

_ENVELOPES = frozenset({"session_meta", "response_item", "turn_context", "event_msg",
                        "compacted"})
_ITEMS = frozenset({"message", "reasoning", "function_call", "function_call_output",
                    "custom_tool_call", "custom_tool_call_output", "local_shell_call",
                    "web_search_call"})
_CALLS = ("function_call", "custom_tool_call", "local_shell_call", "web_search_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output")


def sniff(path: Path) -> bool:
    """Whether a ``.jsonl`` file is a Codex rollout, from its name or its first line."""
    if path.name.startswith("rollout-"):
        return True
    if not path.is_file():  # a FIFO would block the read; it is quarantined elsewhere
        return False
    try:
        with open(path, "rb") as f:
            first = f.readline(1 << 16)
        rec = json.loads(first)
    except (OSError, ValueError, RecursionError):  # unreadable, not JSON, nested too deep
        return False
    if not isinstance(rec, dict):
        return False
    if rec.get("type") in _ENVELOPES and isinstance(rec.get("payload"), dict):
        return True
    # the older, envelope-less header: {"id", "timestamp", "instructions"} and no Claude keys
    return "instructions" in rec and "id" in rec and "sessionId" not in rec


def _text(content: Any) -> str:
    """The text of a content list; an image is a typed placeholder, encrypted parts are left
    out (they cannot be read, and a placeholder would be trained on as text)."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = str(block.get("type", ""))
        if isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif "image" in kind:
            parts.append("[image]")
        elif kind and "encrypted" not in kind:
            parts.append(f"[{kind}]")
    return "\n".join(parts)


def _output_text(output: Any) -> tuple[str, bool]:
    """A tool output (a string, or a JSON string ``{"output", "metadata": {"exit_code"}}``)."""
    if isinstance(output, dict):
        data: Any = output
    else:
        try:
            data = json.loads(output) if isinstance(output, str) else None
        except ValueError:
            data = None
    if isinstance(data, dict) and "output" in data:
        meta = data.get("metadata")
        code = meta.get("exit_code") if isinstance(meta, dict) else None
        return str(data["output"]), isinstance(code, int) and code != 0
    if isinstance(output, list):  # content items: [{"type": "input_text", "text": ...}]
        return _text(output), False
    return ("" if output is None else str(output)), False


class _Session:
    """Builds one session's messages and turns as its lines come."""

    def __init__(self, opts: IngestOptions, scrub: Scrubber) -> None:
        self.opts, self.scrub = opts, scrub
        self.meta: dict[str, Any] = {}
        self.model = ""
        self.messages: list[Message] = []
        self.turns: list[TurnRef] = []
        self.compactions: list[int] = []
        self.names: dict[str, str] = {}  # call_id -> tool name, for the outputs

    def _assistant(self, timestamp: str | None) -> Message:
        if not self.messages or self.messages[-1].role != "assistant":
            self.messages.append(Message(role="assistant"))
            self.turns.append(TurnRef(index=len(self.messages) - 1,
                                      key=f"turn-{len(self.turns)}", model=self.model,
                                      timestamp=timestamp))
        return self.messages[-1]

    def _add(self, role: str, block: ContentBlock) -> None:
        if self.messages and self.messages[-1].role == role and role != "assistant":
            self.messages[-1].content.append(block)
        else:
            self.messages.append(Message(role=role, content=[block]))  # type: ignore[arg-type]

    def item(self, p: dict[str, Any], timestamp: str | None, counts: IngestCounts) -> None:
        kind = p.get("type")
        if kind == "message":
            role = p.get("role")
            text = self.scrub.text(_text(p.get("content")))
            if role == "assistant":
                if text:
                    self._assistant(timestamp).content.append(TextBlock(text=text))
            elif role in ("user", "developer", "system") and text:
                # instructions are a system message only before the conversation starts
                system = role != "user" and all(m.role == "system" for m in self.messages)
                self._add("system" if system else "user", TextBlock(text=text))
        elif kind == "reasoning":
            summary = "\n".join(s.get("text", "") for s in p.get("summary") or []
                                if isinstance(s, dict))
            readable = summary or _text(p.get("content"))
            if not self.opts.keep_thinking:
                return
            if readable:
                self._assistant(timestamp).content.append(
                    ThinkingBlock(text=self.scrub.text(readable)))
            elif p.get("encrypted_content"):
                counts.redacted_thinking += 1
                self._assistant(timestamp).content.append(ThinkingBlock(
                    text="", signature=str(p["encrypted_content"]), redacted=True))
        elif kind in _CALLS:
            self._call(p, kind, timestamp)
        elif kind in _OUTPUTS:
            text, error = _output_text(p.get("output"))
            self._add("tool", ToolResultBlock(call_id=str(p.get("call_id", "")),
                                              content=self.scrub.text(text), is_error=error))

    def _call(self, p: dict[str, Any], kind: str, timestamp: str | None) -> None:
        call_id = str(p.get("call_id") or p.get("id") or "")
        args: Any
        action = p.get("action")
        if kind == "local_shell_call":
            command = action.get("command") if isinstance(action, dict) else None
            name, args = "local_shell", {"command": command}
        elif kind == "custom_tool_call":
            name, args = str(p.get("name", "")), {"input": p.get("input")}
        elif kind == "web_search_call":
            name, args = "web_search", action or {}
        else:
            name, raw = str(p.get("name", "")), p.get("arguments")
            try:
                args = json.loads(raw) if isinstance(raw, str) else raw
            except ValueError:
                args = {"arguments": raw}
        self.names[call_id] = name
        turn = self._assistant(timestamp)
        for call in from_codex(name, args, call_id, self.meta.get("cwd")):
            call = call.model_copy(update={"args": self.scrub.value(call.args)})
            turn.content.append(ToolUseBlock(call=call, original_name=name))
        self.turns[-1].n_source_calls += 1

    def tokens(self, p: dict[str, Any]) -> None:
        """``token_count``: the usage of the model call just made, on the latest turn."""
        info = p.get("info")
        last = info.get("last_token_usage") if isinstance(info, dict) else None
        if not isinstance(last, dict) or not self.turns:
            return
        ints = {k: v for k, v in last.items() if isinstance(v, int)}
        cached = ints.get("cached_input_tokens", 0)
        usage = Usage(input_tokens=max(0, ints.get("input_tokens", 0) - cached),
                      output_tokens=ints.get("output_tokens", 0), cache_read_tokens=cached)
        turn = self.turns[-1]
        cost, _ = cost_of(usage, self.opts.price(turn.model), None)
        turn.usage = turn.usage + usage.model_copy(update={"cost_usd": cost})


def _line(s: _Session, rec: dict[str, Any], counts: IngestCounts) -> None:
    kind, payload, ts = rec.get("type"), rec.get("payload"), rec.get("timestamp")
    if kind not in _ENVELOPES or not isinstance(payload, dict):
        # the older format: a header line, then bare response items
        if not s.meta and "instructions" in rec and "id" in rec:
            s.meta.update(session_id=str(rec["id"]))
            counts.bump("record_types", "session_meta")
        elif rec.get("type") in _ITEMS:
            counts.bump("record_types", f"response_item.{rec['type']}")
            s.item(rec, ts, counts)
        else:
            label = str(rec.get("record_type") or rec.get("type") or "<no type>")
            counts.bump("record_types", label)
            counts.bump("skipped_types", label)
        return
    sub = payload.get("type")
    counts.bump("record_types", f"{kind}.{sub}" if isinstance(sub, str) else str(kind))
    if kind == "session_meta":
        s.meta.update(session_id=str(payload.get("id", "")), cwd=payload.get("cwd"),
                      version=payload.get("cli_version"), originator=payload.get("originator"))
        git = payload.get("git")
        if isinstance(git, dict) and git.get("branch"):
            s.meta["git_branch"] = git["branch"]
    elif kind == "turn_context":
        s.model = str(payload.get("model") or s.model)
    elif kind == "response_item" and sub in _ITEMS:
        s.item(payload, ts, counts)
    elif kind == "event_msg" and sub == "token_count":
        s.tokens(payload)
    elif kind == "compacted":
        s.compactions.append(len(s.messages))
        s._add("user", TextBlock(text=s.scrub.text(str(payload.get("message", "")))))
    else:
        counts.bump("skipped_types", f"{kind}.{sub}" if isinstance(sub, str) else str(kind))


def ingest_codex_file(path: Path, counts: IngestCounts, keys: set[str],
                      opts: IngestOptions | None = None,
                      scrub: Scrubber | None = None) -> Iterator[Item]:
    """States, the trajectory and quarantine rows of one Codex rollout file."""
    opts = opts or IngestOptions()
    scrub = scrub or Scrubber(opts.scrub_keep)
    s = _Session(opts, scrub)
    lines_before = counts.lines
    for _, rec in iter_records(path, opts.max_line_bytes):
        counts.lines += 1
        if isinstance(rec, Quarantine):
            counts.quarantined += 1
            yield rec
            continue
        _line(s, rec, counts)
    if counts.lines == lines_before:
        counts.quarantined_files += 1
        yield Quarantine(file=str(path), line_no=0, reason="empty file")
        return
    if not s.turns:
        return
    for t in s.turns:
        if not opts.price(t.model) and t.usage.input_tokens + t.usage.output_tokens:
            counts.bump("unpriced", t.model or "<no model>")
    key = unique_key(str(s.meta.get("session_id") or path.stem.removeprefix("rollout-")), keys)
    counts.sessions += 1
    counts.trajectories += 1
    part = SessionPart(session_key=key, source=SOURCE, messages=s.messages, turns=s.turns,
                       compactions=s.compactions, source_file=str(path),
                       metadata={k: v for k, v in s.meta.items()
                                 if k != "session_id" and v is not None})
    yield from make_states(part, counts, set())
    yield make_trajectory(part)
