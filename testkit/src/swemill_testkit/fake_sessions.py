"""Claude Code-shaped session logs, written the way the real program writes them.

For tests and benchmarks: one line per content block with a shared ``message.id`` and the
full ``usage`` repeated on each, ``parentUuid`` links (so rewinds make branches), compaction
(``compact_boundary`` with a null parent and ``logicalParentUuid``, then an
``isCompactSummary`` message), inline sidechains, and the non-message record types.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

__all__ = ["SessionWriter", "text", "thinking", "tool_use", "generate_corpus",
           "generate_session_file"]


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def thinking(t: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": t, "signature": "EqoBCkgIBxABGAIiQ" + "x" * 40}


def tool_use(call_id: str, name: str, inp: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": inp}


class SessionWriter:
    """Builds one session's lines; ``head`` is the uuid the next record hangs under."""

    def __init__(self, session_id: str, cwd: str = "/home/dev/proj", sidechain: bool = False,
                 agent_id: str | None = None) -> None:
        self.session_id, self.cwd, self.sidechain, self.agent_id = (
            session_id, cwd, sidechain, agent_id)
        self.lines: list[dict[str, Any]] = []
        self.head: str | None = None
        self._n = 0
        # Lines of a sidechain or sub-agent share the session id but never a uuid.
        side = "-side" if sidechain else ""
        self._prefix = session_id + side + (f"-{agent_id}" if agent_id else "")

    def _base(self, kind: str, parent: str | None) -> dict[str, Any]:
        self._n += 1
        rec: dict[str, Any] = {
            "parentUuid": parent, "isSidechain": self.sidechain, "userType": "external",
            "cwd": self.cwd, "sessionId": self.session_id, "version": "2.0.14",
            "gitBranch": "main", "type": kind, "uuid": f"{self._prefix}-u{self._n:05d}",
            "timestamp": f"2025-09-01T10:{self._n // 60 % 60:02d}:{self._n % 60:02d}.000Z",
        }
        if self.agent_id:
            rec["agentId"] = self.agent_id
        return rec

    def _add(self, rec: dict[str, Any]) -> str:
        self.lines.append(rec)
        self.head = rec["uuid"]
        return rec["uuid"]

    def user(self, content: str | list[dict[str, Any]], **extra: Any) -> str:
        rec = self._base("user", self.head)
        rec["message"] = {"role": "user", "content": content}
        rec.update(extra)
        return self._add(rec)

    def tool_result(self, call_id: str, output: str, is_error: bool = False) -> str:
        block = {"tool_use_id": call_id, "type": "tool_result", "content": output,
                 "is_error": is_error}
        return self.user([block], toolUseResult={"stdout": output, "stderr": ""})

    def assistant(self, blocks: list[dict[str, Any]], usage: dict[str, int],
                  model: str = "claude-sonnet-4-5-20250929") -> str:
        """One API response: a line per block, all with the same id, each with full usage."""
        self._n += 1
        msg_id, req_id = f"msg_{self._prefix}_{self._n:05d}", f"req_{self._prefix}_{self._n:05d}"
        for block in blocks:
            rec = self._base("assistant", self.head)
            rec["requestId"] = req_id
            rec["message"] = {
                "id": msg_id, "type": "message", "role": "assistant", "model": model,
                "content": [block], "stop_reason": None, "stop_sequence": None,
                "usage": {"input_tokens": usage.get("input_tokens", 0),
                          "cache_creation_input_tokens": usage.get("cache_write", 0),
                          "cache_read_input_tokens": usage.get("cache_read", 0),
                          "output_tokens": usage.get("output_tokens", 0),
                          "service_tier": "standard"},
            }
            self._add(rec)
        return msg_id

    def compact(self, summary: str) -> None:
        rec = self._base("system", None)
        rec.update(subtype="compact_boundary", content="Conversation compacted",
                   logicalParentUuid=self.head, compactMetadata={"trigger": "auto"})
        self._add(rec)
        self.user(summary, isCompactSummary=True, isVisibleInTranscriptOnly=True)

    def raw(self, rec: dict[str, Any]) -> None:
        """A record outside the tree (``summary``, ``file-history-snapshot``, ...)."""
        self.lines.append(rec)

    def write(self, path: Path, mode: str = "w") -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, mode, encoding="utf-8") as f:
            for rec in self.lines:
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        return path


_WORDS = (
    "the", "function", "returns", "a", "value", "parser", "config", "module", "test",
    "fixture", "error", "handler", "request", "response", "cache", "token", "buffer",
    "stream", "index", "record", "field", "schema",
)


def _prose(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def _code(rng: random.Random, lines: int) -> str:
    return "\n".join(
        f"    {rng.choice(_WORDS)}_{i} = {rng.choice(_WORDS)}({i})" for i in range(lines)
    )


def _call(w: SessionWriter, rng: random.Random, call_id: str, path: str,
          cache_read_max: int) -> None:
    """One assistant response: thinking, text and one random tool call on ``path``."""
    name, inp = rng.choice([
        ("Bash", {"command": f"pytest -q tests/test_{rng.choice(_WORDS)}.py",
                  "description": "run tests"}),
        ("Read", {"file_path": path}),
        ("Edit", {"file_path": path, "old_string": _code(rng, 3), "new_string": _code(rng, 4)}),
        ("Grep", {"pattern": rng.choice(_WORDS), "path": f"{w.cwd}/src"}),
    ])
    usage = {"input_tokens": rng.randint(5, 50), "output_tokens": rng.randint(50, 800),
             "cache_read": rng.randint(1000, cache_read_max), "cache_write": rng.randint(0, 3000)}
    w.assistant([thinking(_prose(rng, 60)), text(_prose(rng, 30)), tool_use(call_id, name, inp)],
                usage)


def _turn(w: SessionWriter, rng: random.Random, n: int) -> None:
    call_id = f"toolu_{w.session_id}_{n:04d}"
    _call(w, rng, call_id, f"{w.cwd}/src/{rng.choice(_WORDS)}.py", 40000)
    w.tool_result(call_id, _code(rng, rng.randint(20, 200)), is_error=rng.random() < 0.1)


def generate_corpus(root: Path, target_bytes: int, seed: int = 0, turns: int = 40) -> int:
    """Write ``projects/<project>/<session>.jsonl`` files until ``target_bytes``; returns
    the bytes written."""
    rng = random.Random(seed)
    written, n = 0, 0
    while written < target_bytes:
        n += 1
        w = SessionWriter(f"s{seed}-{n:06d}", cwd=f"/home/dev/proj{n % 7}")
        w.user(_prose(rng, 40))
        for t in range(turns):
            _turn(w, rng, t)
            if t == turns // 2:
                w.raw({"type": "file-history-snapshot", "messageId": w.head, "snapshot": {}})
        w.assistant([text(_prose(rng, 50))], {"input_tokens": 10, "output_tokens": 120})
        w.raw({"type": "summary", "summary": _prose(rng, 8), "leafUuid": w.head})
        path = w.write(root / "projects" / f"-home-dev-proj{n % 7}" / f"s{seed}-{n:06d}.jsonl")
        written += path.stat().st_size
    return written


def _progress(w: SessionWriter, call_id: str) -> None:
    rec = w._base("progress", w.head)
    rec.update(toolUseID=call_id, parentToolUseID=call_id,
               data={"type": "hook_progress", "hookEvent": "PostToolUse", "hookName": "fmt"})
    w.lines.append(rec)  # below the tool call, never an ancestor of the next message


def _long_turn(w: SessionWriter, rng: random.Random, n: int, hooks: bool) -> None:
    """A turn as a long session writes it: the tool output twice (the message's
    ``tool_result`` and ``toolUseResult``), a hook's progress record, sometimes a snapshot."""
    call_id = f"toolu_{w.session_id}_{n:06d}"
    _call(w, rng, call_id, f"{w.cwd}/src/{rng.choice(_WORDS)}_{n % 50}.py", 150000)
    if hooks:
        _progress(w, call_id)
    out = _code(rng, rng.randint(20, 200))
    w.tool_result(call_id, out, is_error=rng.random() < 0.1)
    if n % 25 == 0:
        w.raw({"type": "file-history-snapshot", "messageId": w.head, "isSnapshotUpdate": False,
               "snapshot": {"messageId": w.head, "trackedFileBackups": {},
                            "timestamp": "2025-09-01T10:00:00.000Z"}})


def generate_session_file(path: Path, target_bytes: int, seed: int = 0,
                          compact_every: int = 300, hooks: bool = True) -> int:
    """One long session in one file (``target_bytes`` or a little more), written as it grows
    so the writer's memory stays small; a compaction every ``compact_every`` turns, as a
    session that outlives its context window has; with ``hooks`` a hook's progress record
    below every tool call. Returns the bytes written."""
    rng = random.Random(seed)
    w = SessionWriter(f"long-{seed}", cwd="/home/dev/proj")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    w.user(_prose(rng, 40))
    n = 0
    while True:
        n += 1
        _long_turn(w, rng, n, hooks)
        if n % compact_every == 0:
            w.compact("Summary of the work so far: " + _prose(rng, 200))
        if n % 100 == 0 or n == 1:
            w.write(path, mode="a")
            w.lines.clear()
            if path.stat().st_size >= target_bytes:
                break
    w.assistant([text(_prose(rng, 50))], {"input_tokens": 10, "output_tokens": 120})
    w.raw({"type": "summary", "summary": _prose(rng, 8), "leafUuid": w.head})
    w.write(path, mode="a")
    return path.stat().st_size
