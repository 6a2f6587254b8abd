"""Deterministic policies that ship with swemill: for tests, demos and synthetic data.

- :class:`ScriptedPolicy` plays a fixed list of actions (``scripted:NAME`` picks a built-in
  list, ``scripted:@FILE.json`` loads one).
- :class:`OraclePolicy` applies a task's golden fix through ordinary tool calls: it ``read``s
  every file it must change (a long file's clipped output page by page, with ranged reads),
  then ``edit``s / ``write``s / removes them, runs the tests and submits. It receives the
  golden patch when it is built, in the process that runs it; nothing golden is ever placed
  where a sandboxed policy could read it.
- :class:`NoisyOraclePolicy` does the same but, with probability P (decided once per seed),
  applies a plausible wrong fix: a hunk left out, or a hunk off by a line.

Every action depends only on the history, so a forked conversation continues correctly.
All of them are ``synthetic``: rows they produce are marked so in the data and the card.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

from swemill.core.errors import PolicyError
from swemill.core.records import Golden, Message, TextBlock, ToolResultBlock, ToolUseBlock
from swemill.core.tools import ToolCall
from swemill.policies.patchplan import FileChange, file_calls, parse_patch, perturb
from swemill.policies.policy import PolicyReply
from swemill.policies.scripted_builtin import BUILTIN_SCRIPTS

__all__ = ["ScriptedPolicy", "OraclePolicy", "NoisyOraclePolicy", "strip_line_numbers"]


class _Synthetic:
    synthetic = True
    family = "scripted"
    name: str
    spec: str

    def worst_case_cost(self, messages: list[Message], tools: list[dict[str, Any]]) -> float:
        return 0.0

    def worst_case_tokens(self, messages: list[Message], tools: list[dict[str, Any]]) -> int:
        return 0

    async def aact(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyReply:
        return self.act(messages, tools)  # type: ignore[attr-defined]

    @staticmethod
    def _turn(messages: list[Message]) -> int:
        return sum(1 for m in messages if m.role == "assistant")

    def _reply(self, action: ToolCall | str, turn: int) -> PolicyReply:
        if isinstance(action, str):
            block: Any = TextBlock(text=action)
        else:
            call_id = action.id or f"{self.name.split(':')[0]}_{turn}"
            block = ToolUseBlock(call=action.model_copy(update={"id": call_id}))
        return PolicyReply(message=Message(role="assistant", content=[block]),
                           cost_source="none")


class ScriptedPolicy(_Synthetic):
    """Turn k of the conversation plays ``actions[k]`` (a tool call, or plain text)."""

    def __init__(self, actions: list[ToolCall | str], name: str = "scripted") -> None:
        self.actions = list(actions)
        self.name = name
        self.spec = name

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyReply:
        turn = self._turn(messages)
        if turn >= len(self.actions):
            raise PolicyError(f"policy {self.spec!r}: script of {len(self.actions)} actions "
                              f"exhausted at turn {turn}")
        return self._reply(self.actions[turn], turn)


_NUMBERED = re.compile(r"^\s*(\d+)(?:\t|→|: |\| ?)")


def strip_line_numbers(text: str) -> str:
    """Undo ``cat -n``-style numbering if every line carries consecutive numbers."""
    lines = text.split("\n")
    body = lines[:-1] if lines and lines[-1] == "" else lines
    matches = [_NUMBERED.match(line) for line in body]
    if not body or not all(matches):
        return text
    numbers = [int(m.group(1)) for m in matches if m]
    if numbers != list(range(numbers[0], numbers[0] + len(numbers))):
        return text
    out = [line[m.end():] for line, m in zip(body, matches, strict=True) if m]
    return "\n".join(out) + ("\n" if len(body) < len(lines) else "")


_CLIP = re.compile(r"\n\[\.\.\. \d+ characters left out \.\.\.\]\n")
"""The marker :func:`swemill.agent.actions.clip` puts between a long output's head and tail."""
_CAT_N = re.compile(r"^ *(\d+)\t")
_MAX_PAGES = 200


class _Pages:
    """A file's lines as ``read`` results show them (``cat -n`` numbering): a whole read that
    was clipped gives its head and tail (the line cut at either side of the marker is not
    taken), ranged reads the rest."""

    def __init__(self) -> None:
        self.lines: dict[int, str] = {}
        self.last: int | None = None
        """The file's last line number (from a whole read's tail), once known."""
        self.trailing = False
        self.head_lines = 0

    def add(self, content: str, *, whole: bool) -> bool:
        """Take one result's complete lines; False when a whole read was not clipped (it is
        the file by itself) or the output is not numbered as ``read`` numbers it."""
        parts = _CLIP.split(content, maxsplit=1)
        if whole and len(parts) == 1:
            return False
        segments = [parts[0].split("\n")[:-1]] if len(parts) == 2 else [content.split("\n")]
        if len(parts) == 2:
            segments.append(parts[1].split("\n")[1:])
        found: list[dict[int, str]] = []
        for segment in segments:
            numbered: dict[int, str] = {}
            for line in segment:
                m = _CAT_N.match(line)
                if m:
                    numbered[int(m.group(1))] = line[m.end():]
                elif line:
                    return False
            found.append(numbered)
        if whole:
            self.head_lines = len(found[0])
            if not found[-1]:
                return False
            self.last = max(found[-1])
            self.trailing = content.endswith("\n")
        for numbered in found:
            self.lines.update(numbered)
        return True

    def first_missing(self) -> int | None:
        if self.last is None:
            return None
        return next((n for n in range(1, self.last + 1) if n not in self.lines), None)

    def text(self) -> str | None:
        if self.last is None or self.first_missing() is not None:
            return None
        body = "\n".join(self.lines[n] for n in range(1, self.last + 1))
        return body + ("\n" if self.trailing else "")


def _results_by_id(messages: list[Message]) -> dict[str, ToolResultBlock]:
    return {b.call_id: b for m in messages for b in m.content if isinstance(b, ToolResultBlock)}


class OraclePolicy(_Synthetic):
    """Applies ``golden_patch`` with read / edit / write / bash calls, then tests and submits."""

    def __init__(self, golden_patch: str, *, name: str = "oracle", run_tests: bool = True) -> None:
        self.name = name
        self.spec = name
        self.changes: list[FileChange] = self._changes(parse_patch(golden_patch))
        self.run_tests = run_tests

    def _changes(self, changes: list[FileChange]) -> list[FileChange]:
        return changes

    def _reads(self) -> list[ToolCall]:
        paths = [c.source if c.kind == "rename" else c.path
                 for c in self.changes if c.kind in ("modify", "rename")]
        return [ToolCall("read", {"path": p}, id=f"oracle_read_{i}")
                for i, p in enumerate(dict.fromkeys(paths))]

    def _content(self, path: str, reads: list[ToolCall], results: dict[str, ToolResultBlock],
                 paged: dict[str, _Pages]) -> str | None:
        if path in paged:  # its first read was clipped: whole once every page was read
            return paged[path].text()
        for call in reads:
            result = results.get(call.id)
            if call.args["path"] == path and result is not None and not result.is_error:
                return strip_line_numbers(result.content)
        return None

    def _pages(self, reads: list[ToolCall], results: dict[str, ToolResultBlock],
               ) -> tuple[list[ToolCall], dict[str, _Pages]]:
        """Ranged reads of what the first reads left out (a long file's output is clipped to
        its head and tail): one page at a time, each of as many lines as the first read's
        head showed, until every line was seen; a file whose pages stop adding lines (a
        single line longer than the output limit, a page not numbered) is left incomplete.
        With them, each clipped file's lines as read so far."""
        out: list[ToolCall] = []
        paged: dict[str, _Pages] = {}
        for first in reads:
            path = first.args["path"]
            result = results.get(first.id)
            if result is None or result.is_error:
                continue
            pages = _Pages()
            if not pages.add(result.content, whole=True):
                continue
            paged[path] = pages
            size = max(1, pages.head_lines)
            for n in range(_MAX_PAGES):
                start = pages.first_missing()
                if start is None:
                    break
                end = min(pages.last or start, start + size - 1)
                call = ToolCall("read", {"path": path, "start_line": start, "end_line": end},
                                id=f"oracle_page_{first.id.rsplit('_', 1)[-1]}_{n}")
                out.append(call)
                page = results.get(call.id)
                if page is None:
                    return out, paged  # its result comes next turn
                seen = len(pages.lines)
                if page.is_error or not pages.add(page.content, whole=False) or (
                        len(pages.lines) == seen):
                    break
        return out, paged

    def plan(self, messages: list[Message]) -> list[ToolCall]:
        """All actions, given the read results found in ``messages`` so far."""
        results = _results_by_id(messages)
        reads = self._reads()
        pages, paged = self._pages(reads, results)
        actions = [*reads, *pages]
        if pages and pages[-1].id not in results:
            return actions  # the rest depends on that page
        for change in self.changes:
            source = change.source if change.kind == "rename" else change.path
            content = self._content(source or change.path, reads, results, paged)
            actions += file_calls(change, content)
        if self.run_tests:
            actions.append(ToolCall("run_tests", {}))
        actions.append(ToolCall("submit", {}))
        return actions

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyReply:
        turn = self._turn(messages)
        actions = self.plan(messages)
        if turn >= len(actions):
            raise PolicyError(f"policy {self.spec!r}: already submitted (turn {turn})")
        return self._reply(actions[turn], turn)


class NoisyOraclePolicy(OraclePolicy):
    """With probability ``p`` (drawn once from ``seed``) applies a wrong fix; see ``wrong``."""

    def __init__(self, golden_patch: str, p: float, seed: int | str = 0, *,
                 name: str | None = None, run_tests: bool = True) -> None:
        if not 0.0 <= p <= 1.0:
            raise PolicyError(f"noisy-oracle probability must be within [0, 1], got {p}")
        self.p = p
        self.seed = seed
        self._rng = random.Random(f"noisy-oracle:{seed}")
        self.wrong = self._rng.random() < p
        super().__init__(golden_patch, name=name or f"noisy-oracle:{p:g}", run_tests=run_tests)

    def _changes(self, changes: list[FileChange]) -> list[FileChange]:
        return perturb(changes, self._rng) if self.wrong else changes


def _golden_patch(spec: str, ctx: dict[str, Any]) -> str:
    golden = ctx.get("golden")
    patch = ctx.get("golden_patch") or (golden.golden_patch if isinstance(golden, Golden) else None)
    if not patch:
        raise PolicyError(f"policy {spec!r} needs the task's golden patch (golden_patch=...)")
    return str(patch)


def oracle_from_spec(spec: str, rest: str, **ctx: Any) -> OraclePolicy:
    return OraclePolicy(_golden_patch(spec, ctx))


def noisy_oracle_from_spec(spec: str, rest: str, **ctx: Any) -> NoisyOraclePolicy:
    try:
        p = float(rest)
    except ValueError:
        raise PolicyError(f"policy spec {spec!r}: use noisy-oracle:P with P in [0, 1]") from None
    return NoisyOraclePolicy(_golden_patch(spec, ctx), p, ctx.get("seed", 0))


def _action_from_json(item: Any, where: str) -> ToolCall | str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict) and isinstance(item.get("name"), str):
        return ToolCall(item["name"], item.get("args") or {})
    if isinstance(item, dict) and isinstance(item.get("text"), str):
        return str(item["text"])
    raise PolicyError(f"{where}: each action must be a string or {{'name', 'args'}}, got {item!r}")


def scripted_from_spec(spec: str, rest: str, **ctx: Any) -> ScriptedPolicy:
    if rest.startswith("@"):
        path = Path(rest[1:])
        try:
            items = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise PolicyError(f"policy {spec!r}: cannot load {path}: {exc}") from exc
        if not isinstance(items, list):
            raise PolicyError(f"policy {spec!r}: {path} must hold a JSON list of actions")
        return ScriptedPolicy([_action_from_json(x, str(path)) for x in items], name=spec)
    if rest not in BUILTIN_SCRIPTS:
        known = ", ".join(sorted(BUILTIN_SCRIPTS))
        raise PolicyError(f"unknown script {rest!r} in {spec!r}: use one of {known} or @FILE.json")
    return ScriptedPolicy(list(BUILTIN_SCRIPTS[rest]), name=spec)
