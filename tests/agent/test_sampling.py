"""Depth-1 sampling at a later decision point: forks, shared history, divergence, pairs."""

from __future__ import annotations

import pytest

from swemill.agent.env import TaskEnv
from swemill.agent.harness import Limits
from swemill.agent.sampling import first_action_key, sample_task
from swemill.core.records import Task
from swemill.policies.scripted import NoisyOraclePolicy, OraclePolicy

from .conftest import SampleTasks


@pytest.mark.slow
def test_branches_continue_from_the_first_samples_state(sample_tasks: SampleTasks,
                                                         task: Task) -> None:
    golden = sample_tasks.goldens[task.instance_id].golden_patch
    wrong = NoisyOraclePolicy(golden, 1.0, seed=1)
    env = TaskEnv(sample_tasks.env_config(), store=sample_tasks.store)
    res = sample_task(env, task, [OraclePolicy(golden), wrong], Limits(), branch_turns=[1])
    first, second = res.samples
    assert first.outcome and first.outcome.grade == 1.0
    assert second.outcome and second.outcome.grade < 1.0
    [branch] = res.branches
    assert branch.parent_id == first.trajectory_id and branch.policy == wrong.name
    n = branch.branch_point
    assert n is not None and branch.messages[:n] == first.messages[:n]
    # the branch starts after the first sample's read, so its first action is its own edit
    assert branch.messages[n].role == "assistant"
    assert branch.messages[n].tool_calls[0].name in ("edit", "write", "bash")
    assert [p.turn for p in res.points] == [0, 1]
    start, later = res.points
    # both read the same file first; after the read, a right and a wrong edit differ
    assert not start.diverged and later.diverged and res.divergent == 1
    assert first_action_key(first, 2) == first_action_key(second, 2)
    pairs = {p.state_id: p for p in res.pairs}
    assert set(pairs) == {f"{task.instance_id}@0", f"{task.instance_id}@1"}
    late = pairs[f"{task.instance_id}@1"]
    assert late.prompt == first.messages[:n] and late.chosen == first.messages[n:]
    assert late.metadata["rejected_trajectory"] == branch.trajectory_id
