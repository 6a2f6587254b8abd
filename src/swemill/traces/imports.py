"""Trajectory files of bash-centred agents -> the same traces as Claude Code sessions.

- mini-swe-agent ``.traj.json``: ``{"info": {exit_status, submission, model_stats, config},
  "messages": [{"role", "content", "extra"?, "tool_calls"?}], "trajectory_format"}``. The
  action of an assistant message is ``extra.actions`` when present (v2), else its native
  ``tool_calls``, else the one fenced ``mswea_bash_command``/``bash`` block of its text (a
  message with zero or several blocks was a format error and has no action). The message
  that follows an action is its observation; its exit code (``extra.returncode`` or the
  ``<returncode>`` tag) sets the error flag.
- SWE-agent ``.traj``: ``{"trajectory": [{action, observation, response, thought, state,
  ...}], "history": [...], "info": {model_stats, exit_status, submission}}``. The opening
  messages come from ``history`` (demonstrations left out); each step becomes an assistant
  message and a tool result. SWE-agent keeps no exit codes, so its results carry no error
  flag. Neither format records per-call tokens: totals from ``info.model_stats`` go on the
  trajectory, and its states have zero usage.

A whole file is one JSON document, so it is read whole, but only under the same size
ceiling as a JSONL line; a larger or malformed file is quarantined.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from swemill.core.records import Message, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from swemill.core.toolmap import from_bash_agent, from_swe_agent_action, from_swe_agent_tool_call
from swemill.core.tools import ToolCall
from swemill.traces.build import SessionPart, TurnRef, make_states, make_trajectory, unique_key
from swemill.traces.lines import head_of
from swemill.traces.scrub_hook import Scrubber
from swemill.traces.states import IngestCounts, Quarantine

__all__ = ["import_mini_swe_agent", "import_swe_agent", "load_document"]

_FENCE = re.compile(r"```(?:mswea_bash_command|bash)\s*\n(.*?)\n```", re.DOTALL)
# v1.1 renders ``<returncode>N</returncode>``; v1's default renders the output dict's repr.
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>|'returncode': (-?\d+)")


def load_document(path: Path, max_bytes: int) -> dict[str, Any] | Quarantine:
    """One JSON object from a file no larger than ``max_bytes``, or why not."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        if size > max_bytes:
            reason = f"file larger than {max_bytes} bytes ({size} bytes)"
            return Quarantine(file=str(path), line_no=0, reason=reason, head=head_of(f.read(200)),
                              size=size)
        raw = f.read()
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        reason = f"not a JSON document: {str(exc).splitlines()[0]}"
        return Quarantine(file=str(path), line_no=0, reason=reason, head=head_of(raw), size=size)
    if not isinstance(doc, dict):
        return Quarantine(file=str(path), line_no=0, reason="JSON document is not an object",
                          head=head_of(raw), size=size)
    return doc


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)




def _mini_actions(msg: dict[str, Any], call_id: str) -> list[ToolCall]:
    extra = _dict(msg.get("extra"))
    acts = extra.get("actions")
    if isinstance(acts, list) and acts:
        return [
            from_bash_agent(str(a.get("command", "")), str(a.get("tool_call_id") or call_id))
            for a in acts if isinstance(a, dict)
        ]
    calls = msg.get("tool_calls")
    if isinstance(calls, list) and calls:
        out = []
        for c in calls:
            fn = c.get("function", {}) if isinstance(c, dict) else {}
            out.append(from_swe_agent_tool_call(str(fn.get("name", "")), fn.get("arguments"),
                                                str(c.get("id") or call_id)))
        return out
    blocks = _FENCE.findall(_text(msg.get("content")))
    return [from_bash_agent(blocks[0].strip(), call_id)] if len(blocks) == 1 else []


def _returncode(msg: dict[str, Any]) -> int | None:
    extra = _dict(msg.get("extra"))
    if isinstance(extra.get("returncode"), int):
        return extra["returncode"]
    m = _RETURNCODE.search(_text(msg.get("content")))
    return int(m.group(1) or m.group(2)) if m else None


def _usage_of(msg: dict[str, Any]) -> Usage:
    extra = _dict(msg.get("extra"))
    resp = _dict(extra.get("response"))
    raw = _dict(resp.get("usage"))
    cost = extra.get("cost")
    return Usage(input_tokens=int(raw.get("prompt_tokens") or 0),
                 output_tokens=int(raw.get("completion_tokens") or 0),
                 cost_usd=float(cost) if isinstance(cost, int | float) else 0.0)


class _Acc:
    """Accumulates messages and turns for one imported trajectory."""

    def __init__(self, key: str, scrub: Scrubber) -> None:
        self.key, self.scrub = key, scrub
        self.messages: list[Message] = []
        self.turns: list[TurnRef] = []
        self.pending: list[ToolCall] = []

    def say(self, role: Literal["system", "user"], text: str) -> None:
        self.messages.append(Message(role=role, content=[TextBlock(text=self.scrub.text(text))]))

    def act(self, text: str, calls: list[ToolCall], model: str, usage: Usage,
            original: str | None = None) -> None:
        blocks: list[Any] = [TextBlock(text=self.scrub.text(text))] if text else []
        calls = [c.model_copy(update={"args": self.scrub.value(c.args)}) for c in calls]
        blocks += [ToolUseBlock(call=c, original_name=original or c.name) for c in calls]
        self.turns.append(TurnRef(index=len(self.messages), key=f"{self.key}#{len(self.turns)}",
                                  model=model, usage=usage, n_source_calls=len(calls)))
        self.messages.append(Message(role="assistant", content=blocks))
        self.pending = list(calls)

    def observe(self, text: str, is_error: bool, call_id: str | None = None) -> None:
        call = next((c for c in self.pending if c.id == call_id), None) if call_id else None
        call = call or (self.pending[0] if self.pending else None)
        if call is not None:
            self.pending.remove(call)
        block = ToolResultBlock(call_id=call.id if call else (call_id or ""),
                                content=self.scrub.text(text), is_error=is_error)
        self.messages.append(Message(role="tool", content=[block]))


def _mini_message(acc: _Acc, msg: dict[str, Any], model: str, counts: IngestCounts) -> None:
    role, extra = msg.get("role"), _dict(msg.get("extra"))
    text = _text(msg.get("content"))
    if role == "assistant":
        calls = _mini_actions(msg, f"{acc.key}-call-{len(acc.turns)}")
        acc.act(text, calls, model, _usage_of(msg))
    elif role == "tool" or (role == "user" and acc.pending and "interrupt_type" not in extra):
        code = _returncode(msg)
        acc.observe(text, code is not None and code != 0, msg.get("tool_call_id"))
    elif role in ("system", "user"):
        acc.say("system" if role == "system" else "user", text)
    else:
        counts.bump("skipped_types", f"role:{role}")


def _finish(acc: _Acc, source: str, path: Path, counts: IngestCounts, total: Usage,
            meta: dict[str, Any]) -> Iterator[Any]:
    part = SessionPart(session_key=acc.key, source=source, messages=acc.messages,
                       turns=acc.turns, source_file=str(path), metadata=meta)
    counts.sessions += 1
    counts.trajectories += 1
    yield from make_states(part, counts, set())
    traj = make_trajectory(part)
    if traj.usage == Usage():  # per-call usage absent: the file's totals are all there is
        traj.usage = total
        counts.add_usage(total)
    yield traj


def import_mini_swe_agent(
    path: Path, counts: IngestCounts, keys: set[str], max_bytes: int, scrub: Scrubber
) -> Iterator[Any]:
    doc = load_document(path, max_bytes)
    if isinstance(doc, Quarantine) or not isinstance(doc.get("messages"), list):
        counts.quarantined_files += 1
        yield doc if isinstance(doc, Quarantine) else Quarantine(
            file=str(path), line_no=0, reason="no 'messages' list (not a mini-swe-agent file)")
        return
    info = _dict(doc.get("info"))
    cfg = _dict(info.get("config"))
    model_cfg = _dict(cfg.get("model"))
    model = str(model_cfg.get("model_name") or "")
    acc = _Acc(unique_key(path.name.removesuffix(".traj.json").removesuffix(".json"), keys), scrub)
    for msg in doc["messages"]:
        if isinstance(msg, dict):
            _mini_message(acc, msg, model, counts)
    stats = _dict(info.get("model_stats"))
    total = Usage(cost_usd=float(stats.get("instance_cost") or 0.0))
    meta = {"exit_status": info.get("exit_status"), "api_calls": stats.get("api_calls"),
            "submission": scrub.text(str(info.get("submission") or "")),
            "format": doc.get("trajectory_format", "mini-swe-agent-1")}
    yield from _finish(acc, "mini-swe-agent", path, counts, total, meta)


def _swe_head(acc: _Acc, history: Any) -> None:
    for item in history if isinstance(history, list) else []:
        if not isinstance(item, dict) or item.get("is_demo"):
            continue
        if item.get("role") not in ("system", "user"):
            break
        acc.say("system" if item["role"] == "system" else "user", _text(item.get("content")))


def import_swe_agent(
    path: Path, counts: IngestCounts, keys: set[str], max_bytes: int, scrub: Scrubber
) -> Iterator[Any]:
    doc = load_document(path, max_bytes)
    if isinstance(doc, Quarantine) or not isinstance(doc.get("trajectory"), list):
        counts.quarantined_files += 1
        yield doc if isinstance(doc, Quarantine) else Quarantine(
            file=str(path), line_no=0, reason="no 'trajectory' list (not a SWE-agent file)")
        return
    acc = _Acc(unique_key(path.name.removesuffix(".traj"), keys), scrub)
    _swe_head(acc, doc.get("history"))
    steps = [s for s in doc["trajectory"] if isinstance(s, dict)]
    state = _dict(steps[0].get("state")) if steps else {}
    root = str(state.get("working_dir") or "/testbed")
    for n, step in enumerate(steps):
        call = from_swe_agent_action(str(step.get("action", "")), f"{acc.key}-call-{n}", root)
        text = str(step.get("response") or step.get("thought") or "")
        head = str(step.get("action", "")).split(None, 1)[:1]
        acc.act(text, [call] if head else [], "", Usage(), head[0] if head else None)
        if head:
            acc.observe(str(step.get("observation") or ""), False, call.id)
    info = _dict(doc.get("info"))
    stats = _dict(info.get("model_stats"))
    total = Usage(input_tokens=int(stats.get("tokens_sent") or 0),
                  output_tokens=int(stats.get("tokens_received") or 0),
                  cost_usd=float(stats.get("instance_cost") or 0.0))
    meta = {"exit_status": info.get("exit_status"), "api_calls": stats.get("api_calls"),
            "submission": scrub.text(str(info.get("submission") or "")), "root": root}
    yield from _finish(acc, "swe-agent", path, counts, total, meta)
