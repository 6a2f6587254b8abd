"""Trajectories as ATIF documents (Agent Trajectory Interchange Format, v1.x), and a schema
check written from the format's public description.

One document per trajectory: ``schema_version``, ``session_id``, ``agent`` (name, version,
model), ``steps`` (numbered from 1; ``source`` system / user / agent; an agent step carries
its ``message``, ``reasoning_content``, ``tool_calls`` with ``tool_call_id``,
``function_name`` and ``arguments``, the ``observation`` whose ``results`` are keyed to those
calls by ``source_call_id``, and per-step ``metrics``: prompt, completion and cached tokens,
cost), and ``final_metrics`` (totals and the step count). swemill's grading rides in the
root's ``extra``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from swemill import __version__
from swemill.core.records import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Trajectory,
)

__all__ = ["SCHEMA_VERSION", "AtifDocument", "to_atif", "check_atif"]

SCHEMA_VERSION = "ATIF-v1.4"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AtifAgent(_Strict):
    name: str
    version: str
    model_name: str | None = None
    extra: dict[str, Any] | None = None


class AtifToolCall(_Strict):
    tool_call_id: str = Field(min_length=1)
    function_name: str = Field(min_length=1)
    arguments: dict[str, Any]


class AtifResult(_Strict):
    source_call_id: str | None = None
    content: str | None = None
    extra: dict[str, Any] | None = None


class AtifObservation(_Strict):
    results: list[AtifResult]


class AtifStepMetrics(_Strict):
    prompt_tokens: int | None = Field(None, ge=0)
    completion_tokens: int | None = Field(None, ge=0)
    cached_tokens: int | None = Field(None, ge=0)
    cost_usd: float | None = Field(None, ge=0)
    extra: dict[str, Any] | None = None


class AtifStep(_Strict):
    step_id: int = Field(ge=1)
    timestamp: str | None = None
    source: Literal["system", "user", "agent"]
    model_name: str | None = None
    message: str
    reasoning_content: str | None = None
    tool_calls: list[AtifToolCall] | None = None
    observation: AtifObservation | None = None
    metrics: AtifStepMetrics | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _agent_only(self) -> AtifStep:
        agent_fields = (self.model_name, self.reasoning_content, self.tool_calls, self.metrics)
        if self.source != "agent" and any(f is not None for f in agent_fields):
            raise ValueError(f"step {self.step_id}: only agent steps carry model_name, "
                             "reasoning_content, tool_calls and metrics")
        ids = {c.tool_call_id for c in self.tool_calls or []}
        if len(ids) != len(self.tool_calls or []):
            raise ValueError(f"step {self.step_id}: tool_call_id values repeat")
        for r in self.observation.results if self.observation else []:
            if r.source_call_id is not None and r.source_call_id not in ids:
                raise ValueError(f"step {self.step_id}: observation for unknown call "
                                 f"{r.source_call_id!r}")
        return self


class AtifFinalMetrics(_Strict):
    total_prompt_tokens: int | None = Field(None, ge=0)
    total_completion_tokens: int | None = Field(None, ge=0)
    total_cached_tokens: int | None = Field(None, ge=0)
    total_cost_usd: float | None = Field(None, ge=0)
    total_steps: int | None = Field(None, ge=0)
    extra: dict[str, Any] | None = None


class AtifDocument(_Strict):
    schema_version: str = Field(pattern=r"^ATIF-v1\.\d+$")
    session_id: str
    agent: AtifAgent
    steps: list[AtifStep] = Field(min_length=1)
    notes: str | None = None
    final_metrics: AtifFinalMetrics | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _numbered(self) -> AtifDocument:
        got = [s.step_id for s in self.steps]
        if got != list(range(1, len(got) + 1)):
            raise ValueError(f"step_id must run 1..{len(got)} in order, got {got[:5]}...")
        if self.final_metrics and self.final_metrics.total_steps not in (None, len(got)):
            raise ValueError("final_metrics.total_steps differs from the number of steps")
        return self


def check_atif(doc: dict[str, Any]) -> AtifDocument:
    """The document parsed and checked (pydantic's ValidationError names what is wrong)."""
    return AtifDocument.model_validate(doc)


def _text(m: Message) -> str:
    return "".join(b.text for b in m.content if isinstance(b, TextBlock))


def _agent_step(step_id: int, m: Message, model: str | None) -> dict[str, Any]:
    step: dict[str, Any] = {"step_id": step_id, "source": "agent", "message": _text(m)}
    if model:
        step["model_name"] = model
    thinking = "".join(b.text for b in m.content if isinstance(b, ThinkingBlock))
    if thinking:
        step["reasoning_content"] = thinking
    calls = [b.call for b in m.content if isinstance(b, ToolUseBlock)]
    if calls:
        step["tool_calls"] = [{"tool_call_id": c.id or f"call_{step_id}_{i}",
                               "function_name": c.name, "arguments": dict(c.args)}
                              for i, c in enumerate(calls)]
    if m.usage is not None:
        step["metrics"] = {"prompt_tokens": m.usage.input_tokens,
                           "completion_tokens": m.usage.output_tokens,
                           "cached_tokens": m.usage.cache_read_tokens,
                           "cost_usd": m.usage.cost_usd}
    return step


def _observe(step: dict[str, Any], results: list[ToolResultBlock]) -> None:
    known = {c["tool_call_id"] for c in step.get("tool_calls", [])}
    obs = step.setdefault("observation", {"results": []})
    for r in results:
        entry: dict[str, Any] = {"content": r.content}
        if r.call_id in known:
            entry["source_call_id"] = r.call_id
        if r.is_error:
            entry["extra"] = {"is_error": True}
        obs["results"].append(entry)


def to_atif(traj: Trajectory) -> dict[str, Any]:
    """One trajectory as an ATIF document (a plain dict, ready for JSON)."""
    model = traj.policy.partition(":")[2] or traj.policy
    steps: list[dict[str, Any]] = []
    last_agent: dict[str, Any] | None = None
    for m in traj.messages:
        if m.role == "assistant":
            last_agent = _agent_step(len(steps) + 1, m, model)
            steps.append(last_agent)
            continue
        results = [b for b in m.content if isinstance(b, ToolResultBlock)]
        if results and last_agent is not None:
            _observe(last_agent, results)
        text = _text(m)
        if text or (m.role in ("system", "user") and not results):
            source = "system" if m.role == "system" else "user"
            steps.append({"step_id": len(steps) + 1, "source": source, "message": text})
        last_agent = None if text else last_agent
    outcome = traj.outcome
    u = traj.usage
    return {
        "schema_version": SCHEMA_VERSION,
        "session_id": traj.trajectory_id,
        "agent": {"name": "swemill", "version": __version__, "model_name": model,
                  "extra": {"policy": traj.policy, "synthetic": traj.synthetic}},
        "steps": steps,
        "final_metrics": {"total_prompt_tokens": u.input_tokens,
                          "total_completion_tokens": u.output_tokens,
                          "total_cached_tokens": u.cache_read_tokens,
                          "total_cost_usd": u.cost_usd, "total_steps": len(steps)},
        "extra": {"task_id": traj.task_id, "source": traj.source,
                  "resolved": outcome.resolved if outcome else None,
                  "grade": outcome.grade if outcome else None,
                  "reward": outcome.signals.get("reward") if outcome else None,
                  "admission": traj.admission, "flags": list(traj.flags),
                  "license_tier": traj.license_tier},
    }
