"""Records of the replay stage: what one teacher did at one state.

A :class:`TeacherReply` does not repeat the state's history (the traces stage holds it once);
it names the state. Replies are written as Parquet under ``replay/replies/run_id=<id>/`` and
pairs under ``pairs/run_id=<id>/``, where the corpus stage reads them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from swemill.core.records import Message, Usage, utcnow
from swemill.core.tools import ToolCall, validate_call

__all__ = ["TeacherReply", "ReplyStatus", "REPLIES_STAGE", "reply_from_message"]

REPLIES_STAGE = "replay/replies"
ReplyStatus = Literal["ok", "invalid_action", "error", "budget", "batch_error"]


class TeacherReply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    state_id: str
    teacher: str
    """The teacher's slug (provider + model)."""
    spec: str
    family: str
    mode: Literal["realtime", "bedrock-batch"]
    status: ReplyStatus
    message: Message | None = None
    actions: list[ToolCall] = Field(default_factory=list)
    action_keys: list[str] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    error: str = ""
    format_errors: list[str] = Field(default_factory=list)
    created_at: str = Field(default_factory=utcnow)

    @property
    def usable(self) -> bool:
        """True when the reply is an action in the algebra (or a plain-text answer)."""
        return self.status == "ok" and self.message is not None


def reply_from_message(state_id: str, teacher: str, spec: str, family: str, mode: str,
                       message: Message, usage: Usage,
                       format_errors: list[str]) -> TeacherReply:
    """Build a reply; calls outside the algebra or with bad arguments make it invalid."""
    actions = message.tool_calls
    problems = list(format_errors)
    for call in actions:
        problems += [f"{call.name}: {p}" for p in validate_call(call)]
    return TeacherReply(
        state_id=state_id, teacher=teacher, spec=spec, family=family,
        mode=mode,  # type: ignore[arg-type]
        status="invalid_action" if problems else "ok", message=message, actions=actions,
        action_keys=[c.canonical_key() for c in actions], usage=usage,
        format_errors=problems,
    )
