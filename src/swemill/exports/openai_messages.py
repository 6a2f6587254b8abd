"""Trajectories as OpenAI chat-completions rows: ``messages`` (system, user, assistant turns
with ``tool_calls``, one ``tool`` message per result keyed by ``tool_call_id``) and a
``tools`` column of function schemas, the shape public SWE trajectory datasets use; and a
schema check written from OpenAI's description of those messages."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from swemill.core.records import Trajectory
from swemill.core.tools import tool_schemas
from swemill.policies.openai_format import to_openai_messages

__all__ = ["MessagesRow", "to_messages_row", "check_messages_row"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FunctionCall(_Strict):
    name: str = Field(min_length=1)
    arguments: str
    """A JSON-encoded object, as the API sends it."""

    @model_validator(mode="after")
    def _json_object(self) -> FunctionCall:
        if not isinstance(json.loads(self.arguments), dict):
            raise ValueError("function.arguments must encode a JSON object")
        return self


class ToolCallOut(_Strict):
    id: str = Field(min_length=1)
    type: Literal["function"]
    function: FunctionCall


class ChatMessage(_Strict):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None
    tool_calls: list[ToolCallOut] | None = None
    tool_call_id: str | None = None

    @model_validator(mode="after")
    def _shape(self) -> ChatMessage:
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs tool_call_id")
        if self.role != "tool" and self.tool_call_id is not None:
            raise ValueError("only tool messages carry tool_call_id")
        if self.role != "assistant" and self.tool_calls is not None:
            raise ValueError("only assistant messages carry tool_calls")
        if self.content is None and not self.tool_calls:
            raise ValueError("content may be null only beside tool_calls")
        return self


class FunctionTool(_Strict):
    type: Literal["function"]
    function: dict[str, Any]

    @model_validator(mode="after")
    def _named(self) -> FunctionTool:
        if not self.function.get("name") or self.function.get("parameters", {}).get(
                "type") != "object":
            raise ValueError("a function tool needs a name and object parameters")
        return self


class MessagesRow(_Strict):
    trajectory_id: str
    task_id: str | None
    policy: str
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[FunctionTool]
    reward: float | None
    resolved: bool | None
    admission: str

    @model_validator(mode="after")
    def _answered(self) -> MessagesRow:
        """Every tool message answers a call made before it; every tool is declared."""
        made: set[str] = set()
        names = {t.function["name"] for t in self.tools}
        for m in self.messages:
            for c in m.tool_calls or []:
                if c.function.name not in names and not c.function.name.startswith("other:"):
                    raise ValueError(f"call of undeclared tool {c.function.name!r}")
                made.add(c.id)
            if m.role == "tool" and m.tool_call_id not in made:
                raise ValueError(f"tool message for unknown call {m.tool_call_id!r}")
        return self


def to_messages_row(traj: Trajectory) -> dict[str, Any]:
    outcome = traj.outcome
    return {"trajectory_id": traj.trajectory_id, "task_id": traj.task_id,
            "policy": traj.policy, "messages": to_openai_messages(traj.messages),
            "tools": tool_schemas(),
            "reward": outcome.signals.get("reward") if outcome else None,
            "resolved": outcome.resolved if outcome else None, "admission": traj.admission}


def check_messages_row(row: dict[str, Any]) -> MessagesRow:
    return MessagesRow.model_validate(row)
