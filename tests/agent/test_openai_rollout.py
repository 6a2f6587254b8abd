"""Rollouts through the ``openai:`` policy against the package's fake server on loopback.

Real HTTP, the real OpenAI SDK, real sandboxes and real grading; only the model is scripted.
"""

from __future__ import annotations

import socket

import pytest

from swemill.agent.rollout import run_rollouts
from swemill.core.errors import PolicyError
from swemill.core.records import Task, Trajectory
from swemill.policies.scripted import OraclePolicy
from swemill.store import Store
from swemill_testkit.fake_server import (
    FakeOpenAIServer,
    FakeReply,
    FakeToolCall,
    errors_then,
    tool_reply,
)

from .conftest import SampleTasks


def _only(store: Store, run_id: str) -> Trajectory:
    [traj] = store.read_records("trajectories", run_id, Trajectory)
    return traj


def _first(sample_tasks: SampleTasks) -> Task:
    return sample_tasks.tasks[0]  # run_rollouts orders tasks by id; max_tasks=1 takes this one


def test_a_scripted_model_solves_a_task_over_http(sample_tasks: SampleTasks,
                                                  fresh_store: Store) -> None:
    task = _first(sample_tasks)
    # the golden fix as the oracle would type it without reading first: hunk text edits
    calls = OraclePolicy(sample_tasks.goldens[task.instance_id].golden_patch).plan([])
    script = [tool_reply(c.name, c.args) for c in calls]
    with FakeOpenAIServer(script, price_in=1.0, price_out=2.0) as srv:
        result = run_rollouts(fresh_store, sample_tasks.run_id, sample_tasks.config(
            f"openai:fake-coder@{srv.base_url}", max_tasks=1))
        requests = len(srv.requests)
    traj = _only(fresh_store, sample_tasks.run_id)
    assert requests == len(calls) and traj.metadata["turns"] == len(calls)
    assert traj.outcome is not None and traj.outcome.grade == 1.0, traj.outcome
    assert traj.admission == "sft" and not traj.synthetic and traj.flags == []
    assert traj.usage.input_tokens > 0 and traj.usage.cost_usd > 0
    assert traj.metadata["cost_source"] == "provider"
    assert result.cost_usd == pytest.approx(traj.usage.cost_usd)
    assert fresh_store.read_manifest(sample_tasks.run_id).cost_usd == pytest.approx(
        traj.usage.cost_usd)
    # every tool call got its result, paired by the provider's call id
    used = [b.call.id for m in traj.messages for b in m.content if b.type == "tool_use"]
    answered = [b.call_id for m in traj.messages for b in m.content if b.type == "tool_result"]
    assert used == answered and len(used) == len(calls)


def test_malformed_tool_calls_are_recorded_and_the_run_goes_on(sample_tasks: SampleTasks,
                                                               fresh_store: Store) -> None:
    script = [
        FakeReply(tool_calls=[FakeToolCall("bash", '{"command": "ls"')]),  # not JSON
        tool_reply("read", {"path": 5}),  # JSON, but the wrong type
        tool_reply("bash", {"command": "ls inventory"}),
        tool_reply("submit"),
    ]
    with FakeOpenAIServer(script) as srv:
        run_rollouts(fresh_store, sample_tasks.run_id, sample_tasks.config(
            f"openai:fake@{srv.base_url}", max_tasks=1))
        second_request = srv.requests[1].body["messages"]
    traj = _only(fresh_store, sample_tasks.run_id)
    errors = traj.metadata["format_errors"]
    assert len(errors) == 2
    assert "not valid JSON" in errors[0] and "read.path" in errors[1]
    assert traj.metadata["stop_reason"] == "submitted" and traj.outcome is not None
    assert "could not be used" in second_request[-1]["content"]  # the model was told
    assert any("items.py" in b.content for m in traj.messages for b in m.content
               if b.type == "tool_result")


def test_server_errors_are_retried_then_the_run_succeeds(sample_tasks: SampleTasks,
                                                         fresh_store: Store) -> None:
    script = [*errors_then(2, status=500), *errors_then(1, status=429, retry_after=0),
              tool_reply("submit")]
    with FakeOpenAIServer(script) as srv:
        result = run_rollouts(fresh_store, sample_tasks.run_id, sample_tasks.config(
            f"openai:fake@{srv.base_url}", max_tasks=1, retry_base_s=0.01))
        assert len(srv.requests) == 4
    traj = _only(fresh_store, sample_tasks.run_id)
    assert traj.error is None and traj.metadata["stop_reason"] == "submitted"
    assert result.counts["failed"] == 0


def test_an_unreachable_server_fails_each_trajectory_and_the_run_goes_on(
        sample_tasks: SampleTasks, fresh_store: Store) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    result = run_rollouts(fresh_store, sample_tasks.run_id, sample_tasks.config(
        f"openai:fake@http://127.0.0.1:{port}/v1", max_tasks=2, retries=2, retry_base_s=0.01))
    trajs = fresh_store.read_records("trajectories", sample_tasks.run_id, Trajectory)
    assert len(trajs) == 2 and result.counts["failed"] == 2
    for t in trajs:
        assert t.metadata["stop_reason"] == "policy_error" and t.outcome is None
        assert "cannot reach" in (t.error or "") and t.admission == "withheld"


def test_a_model_that_never_submits_is_stopped_and_graded(sample_tasks: SampleTasks,
                                                          fresh_store: Store) -> None:
    with FakeOpenAIServer([tool_reply("bash", {"command": "true"})], repeat_last=True) as srv:
        run_rollouts(fresh_store, sample_tasks.run_id, sample_tasks.config(
            f"openai:fake@{srv.base_url}", max_tasks=1, max_turns=3))
    traj = _only(fresh_store, sample_tasks.run_id)
    assert traj.metadata["stop_reason"] == "max_turns" and traj.metadata["turns"] == 3
    assert traj.error is None and traj.outcome is not None and traj.outcome.grade == 0.0


def test_bad_policy_input_is_one_clear_error(sample_tasks: SampleTasks, fresh_store: Store,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    run = sample_tasks.run_id
    with pytest.raises(PolicyError, match="unknown policy spec"):
        run_rollouts(fresh_store, run, sample_tasks.config("gpt4:turbo"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(PolicyError, match="OPENAI_API_KEY"):
        run_rollouts(fresh_store, run, sample_tasks.config("openai:gpt-4o"))
    with pytest.raises(PolicyError, match="no price known"):
        run_rollouts(fresh_store, run, sample_tasks.config(
            "openai:my-model@http://127.0.0.1:9/v1", max_usd=1.0))
    assert not fresh_store.list_keys(f"trajectories/run_id={run}")  # nothing half-written


def test_the_token_limit_is_reserved_before_each_call(sample_tasks: SampleTasks,
                                                      fresh_store: Store) -> None:
    with FakeOpenAIServer([tool_reply("bash", {"command": "true"})], repeat_last=True) as srv:
        run_rollouts(fresh_store, sample_tasks.run_id, sample_tasks.config(
            f"openai:fake@{srv.base_url}", max_tasks=1, max_tokens=6000,
            max_output_tokens=100))
        calls = len(srv.requests)
    traj = _only(fresh_store, sample_tasks.run_id)
    used = traj.usage.input_tokens + traj.usage.output_tokens
    assert traj.metadata["stop_reason"] == "max_tokens" and traj.error is None
    assert 1 <= calls == traj.metadata["turns"] and used <= 6000
    assert traj.outcome is not None  # its own limit: graded as it stands
