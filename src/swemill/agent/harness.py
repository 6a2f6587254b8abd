"""The agent loop: a policy acts in a :class:`TaskEnv` until it submits or a limit stops it.

Every model call goes through :func:`~swemill.policies.budget.call_with_budget`: the worst case is
reserved in the task's budget and the run's before the call, the real cost settled after, so
no number of concurrent workers can pass the run's dollar limit. Transient provider errors are
retried inside the policy (:mod:`swemill.policies.retry`); what still fails ends this one
trajectory with its reason. A malformed tool call is a *format error*: it is recorded, the
model is told, and the run goes on. ``on_step`` receives the trajectory after every step and
once more at the end (also when something raised), so a crash leaves the record.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from swemill.agent.admission import admit
from swemill.agent.env import TaskEnv
from swemill.agent.monitor import HackMonitor
from swemill.core.errors import BudgetExceeded, PolicyError, SwemillError
from swemill.core.records import (
    Message,
    Task,
    TextBlock,
    ToolResultBlock,
    Trajectory,
    Usage,
)
from swemill.core.tools import tool_schemas, validate_call
from swemill.policies.budget import Budget, call_with_budget
from swemill.policies.policy import Policy

__all__ = ["Limits", "StopReason", "collect_trajectory", "failed_trajectory", "task_messages",
           "SYSTEM_PROMPT"]

StopReason = Literal["submitted", "max_turns", "max_tokens", "wall_time", "task_budget",
                     "budget", "policy_error", "env_error", "grading_error"]
GRADED_STOPS = frozenset({"submitted", "max_turns", "max_tokens", "wall_time", "task_budget"})
"""Stops after which the workspace is graded as it is (the policy ran out of its own limits)."""

SYSTEM_PROMPT = """\
You are a software engineer fixing a bug in a Python repository at {workdir}.
Use the tools: bash, read, write, edit (exact string replacement), search (grep), run_tests
(the task's tests, or the ids you name), and submit when the fix is done. Paths are relative
to the repository root. Change the code, not the tests: test files and test configuration
are restored before grading."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-trajectory limits; None means no limit of that kind."""

    max_turns: int = 50
    """Model calls (assistant turns)."""
    max_tokens: int | None = None
    """Input + output tokens over the whole trajectory (reserved before each call)."""
    wall_s: float | None = 1800.0
    max_usd: float | None = None
    """Dollars for this task; the run's limit is the ``budget`` passed in."""
    show_tests: bool = True
    """Name the FAIL_TO_PASS tests in the first message."""


def task_messages(task: Task, workdir: str, show_tests: bool = True) -> list[Message]:
    """The shared opening: the system prompt and the task as the user states it."""
    text = task.problem_statement.strip()
    if show_tests and task.FAIL_TO_PASS:
        text += "\n\nAfter your fix these tests must pass:\n" + "\n".join(
            f"- {t}" for t in task.FAIL_TO_PASS)
    return [Message(role="system", content=[TextBlock(text=SYSTEM_PROMPT.format(
                workdir=workdir))]),
            Message(role="user", content=[TextBlock(text=text)])]


def _tokens(u: Usage) -> int:
    return u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens


def _budget_stop(exc: BudgetExceeded, task_budget: Budget) -> StopReason:
    level = getattr(exc, "budget_name", None)
    if level != task_budget.name:
        return "budget"
    return "max_tokens" if "token" in str(exc) else "task_budget"


class _Run:
    """One trajectory's mutable state; the loop below stays short."""

    def __init__(self, env: TaskEnv, policy: Policy, traj: Trajectory,
                 on_step: Callable[[Trajectory], None] | None) -> None:
        self.env, self.policy, self.traj, self.on_step = env, policy, traj, on_step
        self.monitor = HackMonitor()
        self.format_errors: list[str] = []
        self.turns = 0
        self.acted = False

    def save(self) -> None:
        if self.on_step is not None:
            self.on_step(self.traj)

    def apply(self, reply_message: Message, format_errors: list[str]) -> bool:
        """Carry out the reply's calls; True once the policy has submitted."""
        messages = self.traj.messages
        messages.append(reply_message)
        results: list[ToolResultBlock] = []
        submitted = False
        for call in reply_message.tool_calls:
            if submitted:
                results.append(ToolResultBlock(call_id=call.id, content="not run: already "
                                               "submitted", is_error=True))
                continue
            problems = validate_call(call)
            if problems:
                self.format_errors += problems
                results.append(ToolResultBlock(call_id=call.id, is_error=True,
                                               content="invalid tool call: " + "; ".join(problems)))
                continue
            self.monitor.observe(call, self.turns - 1, current=self.env.current_text)
            obs = self.env.step(call)
            self.acted = True
            results.append(ToolResultBlock(call_id=call.id, content=obs.content,
                                           is_error=obs.is_error))
            submitted = obs.done
        if results:
            messages.append(Message(role="tool", content=list(results)))
        self.format_errors += format_errors
        if format_errors:
            note = "Your tool call could not be used: " + "; ".join(format_errors)
            messages.append(Message(role="user", content=[TextBlock(text=note)]))
        elif not reply_message.tool_calls:
            messages.append(Message(role="user", content=[TextBlock(
                text="Continue with a tool call; call submit when the fix is done.")]))
        return submitted

    def finish(self, stop: StopReason, error: str | None) -> None:
        traj, meta = self.traj, self.traj.metadata
        traj.error = error
        if stop in GRADED_STOPS and (self.acted or stop == "submitted"):
            try:
                outcome, changes = self.env.submit(turns=self.turns,
                                                   tokens=_tokens(traj.usage))
            except SwemillError as exc:
                stop, traj.error = "grading_error", f"grading failed: {exc}"
            else:
                self.monitor.scan_changes(changes.paths, changes.added)
                traj.outcome = outcome
                meta["patch"] = changes.diff
        meta.update(stop_reason=stop, turns=self.turns, format_errors=self.format_errors,
                    monitor=[{"kind": f.kind, "step": f.step, "detail": f.detail}
                             for f in self.monitor.flags])
        traj.flags = sorted(set(self.monitor.counts()))
        traj.admission = admit(traj)


def _new(task: Task, spec: str, synthetic: bool, trajectory_id: str | None,
         metadata: dict[str, Any]) -> Trajectory:
    return Trajectory(trajectory_id=trajectory_id or uuid.uuid4().hex, task_id=task.instance_id,
                      source="rollout", policy=spec, synthetic=synthetic,
                      license_tier=task.license_tier, metadata=metadata)


def failed_trajectory(task: Task, spec: str, error: str, trajectory_id: str | None = None,
                      stop: StopReason = "env_error", *, synthetic: bool = False) -> Trajectory:
    """The record of a trajectory that could not start (no workspace, no policy)."""
    traj = _new(task, spec, synthetic, trajectory_id, {"stop_reason": stop, "turns": 0})
    traj.error, traj.admission = error, "withheld"
    return traj


def collect_trajectory(env: TaskEnv, task: Task, policy: Policy, limits: Limits,
                       budget: Budget | None = None,
                       on_step: Callable[[Trajectory], None] | None = None, *,
                       prefix: list[Message] | None = None, trajectory_id: str | None = None,
                       on_turn: Callable[[int, list[Message]], None] | None = None,
                       metadata: dict[str, Any] | None = None) -> Trajectory:
    """Run ``policy`` on ``task`` in ``env`` and return the graded trajectory.

    Without ``prefix`` the env is reset to the task first. With one, ``env`` must already be
    in the state the prefix left (a fork, for sampling) and the policy continues from there.
    ``on_turn(turn, messages)`` is called before each model call (the sampler forks there).
    """
    traj = _new(task, policy.spec, policy.synthetic, trajectory_id,
                {"family": policy.family, **(metadata or {})})
    run = _Run(env, policy, traj, on_step)
    started = time.monotonic()
    try:
        if prefix is None:
            try:
                env.reset(task)
            except SwemillError as exc:
                run.finish("env_error", f"workspace: {exc}")
                return traj
            traj.messages = task_messages(task, env.workdir, limits.show_tests)
        else:
            traj.messages = list(prefix)
            traj.metadata["prefix_len"] = len(prefix)
        task_budget = (budget or Budget()).child(limits.max_usd, limits.max_tokens,
                                                 name=f"task:{traj.trajectory_id}")
        tools = tool_schemas()
        stop: StopReason = "max_turns"
        error: str | None = None
        while True:
            if run.turns >= limits.max_turns:
                stop = "max_turns"
                break
            if limits.wall_s is not None and time.monotonic() - started > limits.wall_s:
                stop = "wall_time"
                break
            if on_turn is not None:
                on_turn(run.turns, traj.messages)
            try:
                reply = call_with_budget(policy, task_budget, traj.messages, tools)
            except BudgetExceeded as exc:
                stop, error = _budget_stop(exc, task_budget), str(exc)
                break
            except PolicyError as exc:
                stop, error = "policy_error", str(exc)
                break
            run.turns += 1
            traj.usage = traj.usage + reply.usage
            traj.metadata["cost_source"] = reply.cost_source
            done = run.apply(reply.message, reply.format_errors)
            run.save()
            if done:
                stop = "submitted"
                break
        if stop in ("max_turns", "max_tokens", "wall_time", "task_budget"):
            error = None  # the policy's own limits: graded as it stands, not an error
        run.finish(stop, error)
        traj.metadata["wall_s"] = round(time.monotonic() - started, 3)
        return traj
    finally:
        run.save()
