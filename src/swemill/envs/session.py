"""One episode of one task: ``reset() -> Observation``, ``step(call) -> StepResult``.

A session's workspace is a fork of the task's prepared one
(:class:`~swemill.envs.env_pool.EnvPool`). Actions go through :meth:`TaskEnv.step`, the same
tools a rollout policy has. The episode is graded once, when the policy calls ``submit`` or
when the step limit is reached, by
:meth:`TaskEnv.submit`: the pristine snapshot plus the carried source change, in a fresh
sandbox, judged by :func:`~swemill.agent.grading.grade_run`. The reward is 1.0 when the grader
resolves the task and the hack monitor flagged nothing in the episode, 0.0 otherwise (a
flagged trajectory is never an SFT row or a ``chosen`` side either, so RL does not pay for what
the corpus refuses); the verdict, the flags and the masked pass fraction ride in ``info``.

The opening is the one a rollout policy gets (:func:`~swemill.agent.harness.task_messages`):
the statement and, as today, the FAIL_TO_PASS names; nothing else of the task.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from swemill.agent.env import TaskEnv
from swemill.agent.harness import task_messages
from swemill.agent.monitor import HackMonitor
from swemill.core.errors import SessionError, SwemillError
from swemill.core.records import Task
from swemill.core.tools import ToolCall, tool_schemas
from swemill.envs.env_pool import EnvPool
from swemill.envs.schema import (
    Observation,
    SessionState,
    StepInfo,
    StepResult,
    StopReason,
    ToolCallIn,
)
from swemill.store import Store

__all__ = ["Session", "open_session", "as_call"]


def as_call(call: ToolCall | ToolCallIn | Mapping[str, Any]) -> ToolCall:
    """A tool call from any of the shapes a trainer sends (``arguments`` or ``args``)."""
    if isinstance(call, ToolCall):
        return call
    if isinstance(call, ToolCallIn):
        return ToolCall(call.name, dict(call.arguments), id=call.id)
    args = call.get("arguments", call.get("args")) or {}
    if not isinstance(args, dict):
        raise SessionError("a tool call's arguments must be a JSON object")
    return ToolCall(str(call.get("name", "")), dict(args), id=str(call.get("id", "")))


class Session:
    """See the module docstring. Thread-safe: concurrent calls on one session run in turn."""

    def __init__(self, pool: EnvPool, task_id: str, *, max_steps: int = 50,
                 session_id: str | None = None, show_tests: bool = True,
                 owns_pool: bool = False) -> None:
        if max_steps < 1:
            raise SessionError(f"max_steps must be at least 1 (got {max_steps})")
        self.pool, self.task = pool, pool.task(task_id)
        self.session_id = session_id or uuid.uuid4().hex
        self.max_steps, self.show_tests, self.owns_pool = max_steps, show_tests, owns_pool
        self._env: TaskEnv | None = None
        self._lock = threading.Lock()
        self._monitor = HackMonitor()
        self.steps = 0
        self.done = False
        self.reward: float | None = None
        self.info = StepInfo(steps=0, max_steps=max_steps)
        self.last_used = time.monotonic()

    def reset(self) -> Observation:
        """A fresh fork of the task's prepared workspace; returns the opening observation."""
        with self._lock:
            self._drop_env()
            self._env = self.pool.fork(self.task.instance_id)
            self._monitor = HackMonitor()
            self.steps, self.done, self.reward = 0, False, None
            self.info = StepInfo(steps=0, max_steps=self.max_steps)
            self.last_used = time.monotonic()
            opening = task_messages(self.task, self._env.workdir, self.show_tests)
            messages = [{"role": m.role, "content": m.text} for m in opening]
            return Observation(content=messages[-1]["content"], messages=messages,
                               tools=tool_schemas())

    def step(self, call: ToolCall | ToolCallIn | Mapping[str, Any]) -> StepResult:
        """Carry out one call; grade on ``submit`` or when this step reaches the limit."""
        action = as_call(call)
        with self._lock:
            env = self._env
            if env is None:
                raise SessionError(f"session {self.session_id} is not reset")
            if self.done:
                raise SessionError(f"session {self.session_id}: the episode is over "
                                   "(reset it or open another)")
            self.last_used = time.monotonic()
            self.steps += 1
            self._monitor.observe(action, self.steps - 1, current=env.current_text)
            obs = env.step(action)
            observation = Observation(content=obs.content, is_error=obs.is_error,
                                      call_id=action.id)
            stop: StopReason | None = None
            if obs.done:
                stop = "submitted"
            elif self.steps >= self.max_steps:
                stop = "step_limit"
            info = StepInfo(steps=self.steps, max_steps=self.max_steps, stop=stop)
            reward = 0.0
            if stop is not None:
                reward, info = self._grade(env, info)
                self.done, self.reward = True, reward
            self.info = info
            self.last_used = time.monotonic()
            return StepResult(observation=observation, reward=reward, done=self.done, info=info)

    def _grade(self, env: TaskEnv, info: StepInfo) -> tuple[float, StepInfo]:
        started = time.monotonic()
        try:
            outcome, changes = env.submit(turns=self.steps)
        except SwemillError as exc:
            raise SessionError(f"session {self.session_id}: grading failed: {exc}") from exc
        self._monitor.scan_changes(changes.paths, changes.added)
        info = info.model_copy(update={
            "graded": True, "resolved": outcome.resolved, "grade": outcome.grade,
            "f2p_fraction": outcome.signals.get("f2p_fraction", 0.0),
            "regression": outcome.regression, "flags": sorted(self._monitor.counts()),
            "grading_s": round(time.monotonic() - started, 3)})
        return (1.0 if outcome.resolved and self._monitor.clean else 0.0), info

    def state(self) -> SessionState:
        return SessionState(session_id=self.session_id, task_id=self.task.instance_id,
                            steps=self.steps, max_steps=self.max_steps, done=self.done,
                            reward=self.reward, info=self.info,
                            idle_s=round(time.monotonic() - self.last_used, 3))

    def idle_s(self) -> float:
        """Seconds since the last call ended; 0 while a call runs (a long test run is not
        idleness)."""
        return 0.0 if self._lock.locked() else time.monotonic() - self.last_used

    def _drop_env(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None

    def close(self) -> None:
        with self._lock:
            self._drop_env()
            self.done = True
            if self.info.stop is None:
                self.info = self.info.model_copy(update={"stop": "closed"})
        if self.owns_pool:
            self.pool.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_session(task: str | Task, store: Store, *, run_id: str | None = None,
                 pool: EnvPool | None = None, max_steps: int = 50,
                 show_tests: bool = True) -> Session:
    """A session of ``task`` (an id of ``run_id``'s tasks, or a :class:`Task`). With ``pool``,
    the session shares that pool's prepared workspaces; without, it gets a pool of its own,
    closed with it. Call :meth:`Session.reset` to start the episode."""
    owns = pool is None
    if pool is None:
        if isinstance(task, Task):
            pool = EnvPool(store, [task])
        elif run_id is None:
            raise SessionError(f"task {task!r}: give run_id (the run whose tasks hold it) "
                               "or a pool")
        else:
            pool = EnvPool.of_run(store, run_id)
    task_id = task.instance_id if isinstance(task, Task) else task
    return Session(pool, task_id, max_steps=max_steps, show_tests=show_tests, owns_pool=owns)
