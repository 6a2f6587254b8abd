"""The loop's record keeping: saved after every step, and a crash still leaves the record."""

from __future__ import annotations

from typing import Any

import pytest

from swemill.agent.env import TaskEnv
from swemill.agent.harness import Limits, collect_trajectory
from swemill.core.records import Message, Task, Trajectory
from swemill.core.tools import ToolCall
from swemill.policies.policy import PolicyReply
from swemill.policies.scripted import ScriptedPolicy

from .conftest import SampleTasks


class _Crashes(ScriptedPolicy):
    """Plays two actions, then fails in a way no one planned for."""

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyReply:
        if self._turn(messages) == 2:
            raise RuntimeError("policy process died")
        return super().act(messages, tools)


def test_every_step_is_saved_and_a_crash_leaves_the_record(sample_tasks: SampleTasks,
                                                          task: Task) -> None:
    saved: list[Trajectory] = []
    policy = _Crashes([ToolCall("bash", {"command": "ls"}),
                       ToolCall("write", {"path": "note.txt", "content": "x"})])
    env = TaskEnv(sample_tasks.env_config(), store=sample_tasks.store)
    with pytest.raises(RuntimeError, match="died"):
        collect_trajectory(env, task, policy, Limits(),
                           on_step=lambda t: saved.append(t.model_copy(deep=True)))
    env.close()
    assert [sum(m.role == "assistant" for m in t.messages) for t in saved] == [1, 2, 2]
    last = saved[-1]
    assert last.messages[-1].role == "tool" and "wrote 1 bytes" in last.messages[-1].content[0]\
        .content  # type: ignore[union-attr]


def test_a_text_only_turn_is_answered_and_the_run_continues(sample_tasks: SampleTasks,
                                                           task: Task) -> None:
    policy = ScriptedPolicy(["Let me think.", ToolCall("submit", {})])
    env = TaskEnv(sample_tasks.env_config(), store=sample_tasks.store)
    traj = collect_trajectory(env, task, policy, Limits())
    env.close()
    assert [m.role for m in traj.messages] == ["system", "user", "assistant", "user",
                                               "assistant", "tool"]
    assert traj.metadata["stop_reason"] == "submitted" and traj.outcome is not None
    assert traj.outcome.grade == 0.0 and traj.metadata["turns"] == 2
