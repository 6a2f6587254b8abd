"""The sample's validated tasks (built once per session by tests/agent's fixture) and a driver
that plays a swemill policy against any ``step`` function, locally or over HTTP."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.agent.conftest import SampleTasks, sample_tasks  # noqa: F401 - the shared fixture

from swemill.core.records import Message, TextBlock, ToolResultBlock, ToolUseBlock
from swemill.policies.policy import Policy

__all__ = ["SampleTasks", "play"]


def play(policy: Policy, opening: dict[str, Any], step: Callable[[dict[str, Any]], dict[str, Any]],
         max_turns: int = 50) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run ``policy`` from a reset observation (as JSON) through ``step(call) -> StepResult
    JSON`` until done; returns the last result and every result."""
    messages = [Message(role=m["role"], content=[TextBlock(text=m["content"])])
                for m in opening["messages"]]
    results: list[dict[str, Any]] = []
    for _ in range(max_turns):
        reply = policy.act(messages, opening["tools"])
        [call] = reply.message.tool_calls
        messages.append(Message(role="assistant", content=[ToolUseBlock(call=call)]))
        res = step({"name": call.name, "arguments": call.args, "id": call.id})
        results.append(res)
        obs = res["observation"]
        messages.append(Message(role="tool", content=[ToolResultBlock(
            call_id=obs["call_id"], content=obs["content"], is_error=obs["is_error"])]))
        if res["done"]:
            return res, results
    raise AssertionError(f"the policy did not finish in {max_turns} turns")
