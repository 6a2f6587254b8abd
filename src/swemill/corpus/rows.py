"""Records -> corpus rows: SFT and DPO rows in TRL's conversational format, world-model tuples.

Format decisions (the dataset card repeats them for users):

* ``messages`` is a list of ``{role, content, reasoning_content, tool_calls, tool_call_id,
  name}`` with one fixed Arrow type for every row. Keys a message does not use are null (Arrow
  gives every struct every field), so templates should test ``message.tool_calls`` for
  truthiness rather than ``'tool_calls' in message``.
* A tool call is OpenAI-shaped, ``{id, type: "function", function: {name, arguments}}``.
  ``arguments`` and the ``tools`` column are stored as Arrow's canonical JSON type (UTF-8 JSON
  text, Parquet JSON logical type): the schema stays the same whatever the arguments are,
  ``datasets`` (>= 4.8, ``Json`` feature) decodes them to dicts/lists, which is what
  ``apply_chat_template(messages, tools=...)`` and TRL's trainers expect, and any other
  Parquet reader sees the JSON text.
* Thinking never goes into ``content``: it is kept in ``reasoning_content`` (the field
  reasoning-model templates read) or dropped with ``reasoning=False``.
* Tool results become one ``tool`` message each, with ``tool_call_id`` and the tool's
  ``name``, in the order of the calls they answer; a user turn's own text follows them.
* Rows are shaped for training (:func:`shape_sft`, :func:`shape_pair`): empty assistant
  messages are removed; an SFT row opens with a system or user turn and ends on an assistant
  turn (a final answer, or tool calls followed by all their results); a DPO row's ``prompt``
  is everything the two sides share (up to the assistant turn where they first differ, with
  tool-call ids renumbered in order so ids alone never make sides differ), and ``chosen`` and
  ``rejected`` are only the continuations, each non-empty and ending on an assistant turn.
  ``divergence_depth`` is the prompt's length in messages. What cannot be shaped is dropped
  with a counted reason.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import pyarrow as pa

from swemill.core.records import (
    Message,
    PreferencePair,
    Task,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Trajectory,
)
from swemill.core.tools import ToolCall, tool_schemas

__all__ = [
    "MESSAGE_TYPE",
    "SFT_SCHEMA",
    "DPO_SCHEMA",
    "WM_SCHEMA",
    "tools_json",
    "chat_messages",
    "sft_row",
    "dpo_row",
    "wm_rows",
    "prompt_messages",
    "shape_sft",
    "shape_pair",
]

_S = pa.string()
TOOL_CALL_TYPE = pa.struct([
    ("id", _S), ("type", _S), ("function", pa.struct([("name", _S), ("arguments", pa.json_())])),
])
MESSAGE_TYPE = pa.struct([
    ("role", _S), ("content", _S), ("reasoning_content", _S),
    ("tool_calls", pa.list_(TOOL_CALL_TYPE)), ("tool_call_id", _S), ("name", _S),
])
_CONV = pa.list_(MESSAGE_TYPE)
_PROVENANCE = [
    ("task_id", _S), ("repo", _S), ("strategy", _S), ("source", _S), ("policy", _S),
    ("license_tier", _S), ("synthetic", pa.bool_()), ("solve_rate", pa.float64()),
    ("difficulty", _S),
]
SFT_SCHEMA = pa.schema([
    ("trajectory_id", _S), *_PROVENANCE, ("grade", pa.float64()), ("resolved", pa.bool_()),
    ("messages", _CONV), ("tools", pa.json_()),
])
DPO_SCHEMA = pa.schema([
    ("pair_id", _S), *_PROVENANCE, ("state_id", _S), ("preference_source", _S),
    ("chosen_score", pa.float64()), ("rejected_score", pa.float64()),
    ("prompt", _CONV), ("chosen", _CONV), ("rejected", _CONV), ("tools", pa.json_()),
    ("divergence_depth", pa.int64()),
])
WM_SCHEMA = pa.schema([
    ("trajectory_id", _S), ("task_id", _S), ("step", pa.int64()), ("observation", _S),
    ("action", pa.json_()), ("next_observation", _S), ("reward", pa.float64()),
    ("done", pa.bool_()), ("is_error", pa.bool_()), ("synthetic", pa.bool_()),
    ("license_tier", _S),
])


def tools_json(schemas: list[dict[str, Any]] | None = None) -> str:
    """The ``tools`` column: the tool algebra's JSON schemas as JSON text."""
    if schemas is None:
        return _algebra_tools_json()
    return json.dumps(schemas, ensure_ascii=False)


@functools.cache
def _algebra_tools_json() -> str:
    # Generating the schemas costs ~3 ms; every row carries the same text.
    return json.dumps(tool_schemas(), ensure_ascii=False)


def _args_json(call: ToolCall) -> str:
    return json.dumps(call.args, ensure_ascii=False, sort_keys=True)


def _msg(role: str, content: str, **extra: Any) -> dict[str, Any]:
    out = {"role": role, "content": content, "reasoning_content": None, "tool_calls": None,
           "tool_call_id": None, "name": None}
    out.update(extra)
    return out


def _assistant(m: Message, reasoning: bool, ids: dict[str, str]) -> dict[str, Any]:
    calls = []
    for i, b in enumerate(b for b in m.content if isinstance(b, ToolUseBlock)):
        call_id = b.call.id or f"call_{len(ids)}_{i}"
        ids[call_id] = b.call.name
        calls.append({"id": call_id, "type": "function",
                      "function": {"name": b.call.name, "arguments": _args_json(b.call)}})
    thinking = "\n".join(b.text for b in m.content if isinstance(b, ThinkingBlock))
    return _msg("assistant", m.text, tool_calls=calls or None,
                reasoning_content=(thinking or None) if reasoning else None)


def chat_messages(messages: list[Message], *, reasoning: bool = True) -> list[dict[str, Any]]:
    """Canonical messages -> TRL/OpenAI conversational dicts (one fixed set of keys)."""
    out: list[dict[str, Any]] = []
    ids: dict[str, str] = {}  # call id -> tool name, to name each tool message
    for m in messages:
        if m.role == "assistant":
            out.append(_assistant(m, reasoning, ids))
            continue
        for b in m.content:
            if isinstance(b, ToolResultBlock):
                out.append(_msg("tool", b.content, tool_call_id=b.call_id,
                                name=ids.get(b.call_id)))
        has_text = any(isinstance(b, TextBlock) for b in m.content)
        if m.role in ("system", "user") and (has_text or not m.content):
            out.append(_msg(m.role, m.text))
    return out


def prompt_messages(row_messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a policy is shown before it acts: system messages and the first user message."""
    out = []
    for m in row_messages:
        if m["role"] == "system":
            out.append(m)
        elif m["role"] == "user":
            out.append(m)
            break
        else:
            break
    return out


def _provenance(task_id: str | None, task: Task | None, meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "repo": task.repo if task else (meta.get("repo") or None),
        "strategy": task.strategy if task else (meta.get("strategy") or None),
        # the fraction of the task's rollouts that solved it (curriculum selection), when known
        "solve_rate": _rate(meta.get("solve_rate", task.solve_rate if task else None)),
        # easy / medium / hard: the task's proxy label here; the corpus stage puts the
        # label of the run's difficulty table (solve rate first) in its place
        "difficulty": (task.metadata.get("difficulty") or {}).get("label") if task else None,
    }


def _rate(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def sft_row(
    traj: Trajectory, task: Task | None = None, *, tools: str | None = None,
    reasoning: bool = True,
) -> dict[str, Any]:
    """One SFT row (columns of :data:`SFT_SCHEMA`)."""
    outcome = traj.outcome
    return {
        "trajectory_id": traj.trajectory_id,
        **_provenance(traj.task_id, task, traj.metadata),
        "source": traj.source,
        "policy": traj.policy,
        "license_tier": traj.license_tier,
        "synthetic": traj.synthetic,
        "grade": outcome.grade if outcome else None,
        "resolved": outcome.resolved if outcome else None,
        "messages": chat_messages(traj.messages, reasoning=reasoning),
        "tools": tools if tools is not None else tools_json(),
    }


def dpo_row(
    pair: PreferencePair, task: Task | None = None, *, tools: str | None = None,
    reasoning: bool = True, policy: str = "",
) -> dict[str, Any]:
    """One DPO row (columns of :data:`DPO_SCHEMA`): prompt is the shared history."""
    prompt = chat_messages(pair.prompt, reasoning=reasoning)
    # A continuation's tool messages must find their call's name in the shared history.
    history = pair.prompt
    return {
        "pair_id": pair.pair_id,
        **_provenance(pair.task_id, task, pair.metadata),
        "source": str(pair.metadata.get("source", "")) or pair.preference_source,
        "policy": policy or str(pair.metadata.get("policy", "")),
        "license_tier": pair.license_tier,
        "synthetic": pair.synthetic,
        "state_id": pair.state_id,
        "preference_source": pair.preference_source,
        "chosen_score": pair.chosen_score,
        "rejected_score": pair.rejected_score,
        "prompt": prompt,
        "chosen": chat_messages(history + pair.chosen, reasoning=reasoning)[len(prompt):],
        "rejected": chat_messages(history + pair.rejected, reasoning=reasoning)[len(prompt):],
        "tools": tools if tools is not None else tools_json(),
        "divergence_depth": len(prompt),
    }


def _empty(m: dict[str, Any]) -> bool:
    return m["role"] == "assistant" and not (m["content"] or m["tool_calls"]
                                             or m["reasoning_content"])


def _answered(rows: list[dict[str, Any]]) -> bool:
    """Whether ``rows`` end on an assistant turn: a final answer, or tool calls followed by
    every one of their results."""
    if not rows:
        return False
    last = rows[-1]
    if last["role"] == "assistant":
        return not last["tool_calls"]
    if last["role"] != "tool":
        return False
    i = len(rows) - 1
    while i >= 0 and rows[i]["role"] == "tool":
        i -= 1
    if i < 0 or rows[i]["role"] != "assistant" or not rows[i]["tool_calls"]:
        return False
    return {c["id"] for c in rows[i]["tool_calls"]} <= {m["tool_call_id"] for m in rows[i + 1:]}


def _trim_end(rows: list[dict[str, Any]], *, results: bool) -> list[dict[str, Any]]:
    """Drop trailing turns until the rows end on an assistant turn (with ``results``, tool
    calls answered by all their results count as that end)."""
    rows = list(rows)
    while rows:
        if rows[-1]["role"] == "assistant" and not rows[-1]["tool_calls"]:
            break
        if results and _answered(rows):
            break
        if not results and rows[-1]["role"] == "assistant":
            break
        rows.pop()
    return rows


def shape_sft(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str | None]:
    """An SFT row's messages shaped to train (see the module notes), or a drop reason."""
    rows = [m for m in messages if not _empty(m)]
    first = next((m["role"] for m in rows if m["role"] != "system"), None)
    if first != "user":
        return rows, "no_user_turn"
    rows = _trim_end(rows, results=True)
    if not any(m["role"] == "assistant" for m in rows):
        return rows, "no_assistant_turn"
    return rows, None


def _renumber(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool-call ids renumbered in order of appearance (results follow their calls)."""
    ids: dict[str, str] = {}
    out = []
    for m in rows:
        if m["tool_calls"]:
            calls = []
            for c in m["tool_calls"]:
                ids[c["id"]] = new = f"call_{len(ids)}"
                calls.append({**c, "id": new})
            m = {**m, "tool_calls": calls}
        elif m["role"] == "tool" and m["tool_call_id"] in ids:
            m = {**m, "tool_call_id": ids[m["tool_call_id"]]}
        out.append(m)
    return out


def shape_pair(row: dict[str, Any]) -> str | None:
    """Shape a DPO row in place (see the module notes); returns a drop reason, or None."""
    prompt = [m for m in row["prompt"] if not _empty(m)]
    n = len(prompt)
    chosen = _renumber(prompt + [m for m in row["chosen"] if not _empty(m)])[n:]
    rejected = _renumber(prompt + [m for m in row["rejected"] if not _empty(m)])[n:]
    prompt = _renumber(prompt)
    shared = 0
    while shared < min(len(chosen), len(rejected)) and chosen[shared] == rejected[shared]:
        shared += 1
    # the continuations start at an assistant turn: back up to the last one both share
    while shared > 0 and not (shared < len(chosen) and chosen[shared]["role"] == "assistant"):
        shared -= 1
    prompt, chosen, rejected = prompt + chosen[:shared], chosen[shared:], rejected[shared:]
    chosen, rejected = _trim_end(chosen, results=False), _trim_end(rejected, results=False)
    row.update(prompt=prompt, chosen=chosen, rejected=rejected, divergence_depth=len(prompt))
    if not any(m["role"] == "user" for m in prompt):
        return "no_prompt"
    if not chosen or not rejected:
        return "empty_side"
    if chosen == rejected:
        return "chosen_equals_rejected"
    return None


def _observation(m: Message) -> tuple[str, bool]:
    """The text a non-assistant turn shows the agent, and whether any tool result failed."""
    parts = [b.content if isinstance(b, ToolResultBlock) else b.text
             for b in m.content if isinstance(b, ToolResultBlock | TextBlock)]
    error = any(isinstance(b, ToolResultBlock) and b.is_error for b in m.content)
    return "\n".join(parts), error


def _action(m: Message) -> str:
    calls = [{"name": c.name, "args": c.args} for c in m.tool_calls]
    return json.dumps({"text": m.text, "tool_calls": calls}, ensure_ascii=False, sort_keys=True)


def wm_rows(traj: Trajectory) -> list[dict[str, Any]]:
    """(observation, action, next_observation, reward) per assistant turn, failures included.

    The observation is what the agent saw last (the task, or its last tool results), the next
    observation what its action produced. Reward is 0 until the last step, which carries the
    trajectory's grade (null when ungraded).
    """
    steps: list[dict[str, Any]] = []
    last_obs = ""
    for i, m in enumerate(traj.messages):
        if m.role != "assistant":
            if not steps:  # the opening: system prompt and task, seen together
                text, _ = _observation(m)
                last_obs = "\n".join(p for p in (last_obs, text) if p)
            continue  # later turns are the previous step's next_observation
        following = []
        error = False
        for nxt in traj.messages[i + 1:]:
            if nxt.role == "assistant":
                break
            text, err = _observation(nxt)
            following.append(text)
            error = error or err
        steps.append({
            "trajectory_id": traj.trajectory_id, "task_id": traj.task_id, "step": len(steps),
            "observation": last_obs, "action": _action(m), "next_observation": "\n".join(following),
            "reward": 0.0, "done": False, "is_error": error, "synthetic": traj.synthetic,
            "license_tier": traj.license_tier,
        })
        last_obs = "\n".join(following)
    if steps:
        steps[-1]["done"] = True
        steps[-1]["reward"] = traj.outcome.grade if traj.outcome else None
    return steps
