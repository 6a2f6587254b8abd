"""The canonical tool algebra: one set of tools every policy, trace and environment speaks.

Only :class:`ToolCall` lives here for now; the schemas, the canonical form and the mappings
from other agents' tools are added by the rollout stage.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ToolCall", "TOOL_NAMES"]

TOOL_NAMES = ("bash", "read", "write", "edit", "search", "run_tests", "submit")


class ToolCall(BaseModel):
    """One action: a tool name from the algebra and its arguments."""

    model_config = ConfigDict(extra="forbid")

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    id: str = ""
    """Provider's call id, used to pair a call with its result; not part of the action."""
