"""The values an environment session speaks, as pydantic records (they are also the server's
JSON bodies and its OpenAPI schema).

Only what a rollout policy is shown today may appear here: the system prompt and the task's
statement (with the FAIL_TO_PASS names, as :func:`~swemill.agent.harness.task_messages` shows
them), the tool schemas, and the tools' outputs. The reward and :class:`StepInfo` carry the
grader's numbers, never its log, the golden patch or the test lists.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Observation", "StepInfo", "StepResult", "TaskCard", "SessionState", "ToolCallIn",
           "StopReason",
           "OpenRequest", "StepRequest"]

StopReason = Literal["submitted", "step_limit", "closed"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolCallIn(_Model):
    """One action, as a trainer sends it (OpenAI's ``function`` shape: name + arguments)."""

    name: str = Field(description="A tool of the algebra: bash, read, write, edit, search, "
                                  "run_tests, submit.")
    arguments: dict[str, Any] = Field(default_factory=dict,
                                      description="The tool's arguments (its JSON schema).")
    id: str = Field("", description="The caller's call id, echoed in the observation.")


class OpenRequest(_Model):
    """``POST /sessions``: which task, and optionally fewer steps than the server allows."""

    task_id: str = Field(description="An instance_id from GET /tasks.")
    max_steps: int | None = Field(None, ge=1, description="At most the server's limit.")


class StepRequest(_Model):
    """``POST /sessions/{id}/step`` (OpenEnv's shape: the action under ``action``)."""

    action: ToolCallIn


class Observation(_Model):
    """What the policy sees after reset (``messages`` + ``tools``) or after a step."""

    content: str = Field(description="The tool's output (after reset: the task statement).")
    is_error: bool = False
    call_id: str = ""
    messages: list[dict[str, str]] = Field(
        default_factory=list, description="After reset only: the opening chat messages "
        "(system prompt, task statement) in OpenAI's role/content shape.")
    tools: list[dict[str, Any]] = Field(
        default_factory=list, description="After reset only: the tools as OpenAI function "
        "schemas.")


class StepInfo(_Model):
    """The step's bookkeeping and, once graded, the grader's numbers (no names, no log)."""

    steps: int
    max_steps: int
    stop: StopReason | None = None
    graded: bool = False
    resolved: bool | None = None
    grade: float | None = None
    """The grader's grade: the masked FAIL_TO_PASS pass fraction, 0 on a regression."""
    f2p_fraction: float | None = None
    """FAIL_TO_PASS tests passing / all of them (the masked pass fraction)."""
    regression: bool | None = None
    flags: list[str] = Field(default_factory=list)
    """Hack-monitor findings on the actions and the final change set (informational)."""
    grading_s: float | None = None


class StepResult(_Model):
    observation: Observation
    reward: float = Field(description="1.0 when the grader resolves the task, else 0.0; "
                                      "0.0 before the episode ends.")
    done: bool
    info: StepInfo


class TaskCard(_Model):
    """A task as the policy-visible list shows it."""

    instance_id: str
    repo: str
    n_fail_to_pass: int
    n_pass_to_pass: int


class SessionState(_Model):
    session_id: str
    task_id: str
    steps: int
    max_steps: int
    done: bool
    reward: float | None = None
    info: StepInfo
    idle_s: float
