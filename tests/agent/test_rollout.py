"""run_rollouts over the validator's tasks of the sample: oracle, noisy oracle, resume, corpus."""

from __future__ import annotations

import pytest

from swemill.agent.rollout import PAIRS_STAGE, run_rollouts
from swemill.core.errors import ConfigError
from swemill.core.records import PreferencePair, Trajectory
from swemill.store import Store

from .conftest import SampleTasks


def _trajs(store: Store, run_id: str) -> list[Trajectory]:
    return store.read_records("trajectories", run_id, Trajectory)


@pytest.mark.slow
def test_oracle_solves_every_validated_task(sample_tasks: SampleTasks, fresh_store: Store) -> None:
    seen: list[tuple[str, int, int]] = []
    result = run_rollouts(fresh_store, sample_tasks.run_id,
                          sample_tasks.config("oracle", workers=2),
                          progress=lambda label, done, total: seen.append((label, done, total)))
    trajs = _trajs(fresh_store, sample_tasks.run_id)
    assert sorted(t.task_id for t in trajs) == [t.instance_id for t in sample_tasks.tasks]
    for t in trajs:
        assert t.outcome is not None and t.outcome.grade == 1.0, (t.task_id, t.outcome)
        assert t.outcome.resolved and not t.outcome.regression and t.flags == []
        assert t.admission == "sft" and t.synthetic and t.policy == "oracle"
        assert t.metadata["stop_reason"] == "submitted"
        assert t.outcome.log and t.metadata["patch"].startswith("--- a/")
        # the grader's lists are the validator's lists
        assert set(t.outcome.fail_to_pass) == set(
            next(x for x in sample_tasks.tasks if x.instance_id == t.task_id).FAIL_TO_PASS)
    assert result.counts["sft"] == len(trajs) and result.counts["failed"] == 0
    assert result.divergence_rate is None  # one candidate per task: nothing to compare
    manifest = fresh_store.read_manifest(sample_tasks.run_id)
    assert manifest.counts["rollouts"]["out"] == len(trajs)
    assert "oracle" in manifest.policies and "tasks" in str(manifest.counts)
    assert seen[-1][1:] == (len(trajs), len(trajs))
    # nothing is left in flight once the shards are written
    assert fresh_store.list_keys(f"rollouts/run_id={sample_tasks.run_id}/inflight") == []


@pytest.mark.slow
def test_noisy_oracle_pairs_always_prefer_the_higher_grade(sample_tasks: SampleTasks,
                                                          fresh_store: Store) -> None:
    config = sample_tasks.config("noisy-oracle:0.5", samples=4, workers=2)
    result = run_rollouts(fresh_store, sample_tasks.run_id, config)
    pairs = fresh_store.read_records(PAIRS_STAGE, sample_tasks.run_id, PreferencePair)
    trajs = {t.trajectory_id: t for t in _trajs(fresh_store, sample_tasks.run_id)}
    assert pairs, "with P=0.5 and 4 samples some task gets both a right and a wrong fix"
    for p in pairs:
        assert p.preference_source == "execution" and p.synthetic
        assert p.chosen_score is not None and p.rejected_score is not None
        assert p.chosen_score > p.rejected_score
        chosen = trajs[p.metadata["chosen_trajectory"]]
        rejected = trajs[p.metadata["rejected_trajectory"]]
        assert chosen.outcome and rejected.outcome
        assert chosen.outcome.grade == p.chosen_score > rejected.outcome.grade
        assert chosen.flags == []
        n = len(p.prompt)
        assert chosen.messages[:n] == p.prompt == rejected.messages[:n]
        assert p.chosen == chosen.messages[n:] and p.rejected == rejected.messages[n:]
    samples = list(trajs.values())
    assert len(samples) == 4 * len(sample_tasks.tasks)
    for task in sample_tasks.tasks:
        mine = [t for t in samples if t.task_id == task.instance_id]
        rate = sum(bool(t.outcome and t.outcome.resolved) for t in mine) / 4
        assert result.solve_rates[task.instance_id] == rate
        assert all(t.metadata["solve_rate"] == rate for t in mine)
    assert result.divergence_rate is not None and 0.0 <= result.divergence_rate <= 1.0


def test_select_fractional_keeps_only_sometimes_solved_tasks(sample_tasks: SampleTasks,
                                                             fresh_store: Store) -> None:
    run = sample_tasks.run_id
    always = run_rollouts(fresh_store, run, sample_tasks.config(
        "oracle", samples=2, select="fractional", max_tasks=1), run_id="always")
    assert always.solve_rates == {sample_tasks.tasks[0].instance_id: 1.0}
    assert always.counts["dropped_not_fractional"] == 1 and always.trajectories == 0
    assert not fresh_store.list_keys("trajectories/run_id=always")
    sometimes = run_rollouts(fresh_store, run, sample_tasks.config(
        "oracle,scripted:submit", select="fractional", max_tasks=1), run_id="sometimes")
    assert sometimes.solve_rates == {sample_tasks.tasks[0].instance_id: 0.5}
    trajs = _trajs(fresh_store, "sometimes")
    assert sorted(t.policy for t in trajs) == ["oracle", "scripted:submit"]
    assert all(t.metadata["solve_rate"] == 0.5 for t in trajs)
    [pair] = fresh_store.read_records(PAIRS_STAGE, "sometimes", PreferencePair)
    assert (pair.chosen_score, pair.rejected_score) == (1.0, 0.0)
    assert pair.metadata["chosen_policy"] == "oracle"


def test_resume_skips_finished_shards_and_a_rerun_is_refused(sample_tasks: SampleTasks,
                                                            fresh_store: Store) -> None:
    run = sample_tasks.run_id
    first = run_rollouts(fresh_store, run, sample_tasks.config("scripted:submit", max_tasks=1))
    assert first.shards_written == 1 and first.trajectories == 1
    with pytest.raises(ConfigError, match="--resume"):
        run_rollouts(fresh_store, run, sample_tasks.config("scripted:submit"))
    second = run_rollouts(fresh_store, run, sample_tasks.config("scripted:submit"), resume=True)
    assert second.shards_skipped == 1
    assert second.shards_written == len(sample_tasks.tasks) - 1
    trajs = _trajs(fresh_store, run)
    assert len(trajs) == len(sample_tasks.tasks)  # no shard was run twice
    assert all(t.outcome and t.outcome.grade == 0.0 and t.admission == "withheld" for t in trajs)


@pytest.mark.slow
def test_a_new_run_id_carries_the_tasks_for_the_corpus(sample_tasks: SampleTasks,
                                                      fresh_store: Store) -> None:
    from swemill.corpus.stage import run_corpus

    res = run_rollouts(fresh_store, sample_tasks.run_id, sample_tasks.config("oracle"),
                       run_id="oracle-run")
    assert res.run_id == "oracle-run" and res.counts["sft"] == len(sample_tasks.tasks)
    assert fresh_store.list_runs("tasks") == sorted([sample_tasks.run_id, "oracle-run"])
    summary = run_corpus(fresh_store, "oracle-run")
    assert summary.rows["sft"] + summary.rows["sft_holdout"] >= 1


def test_a_task_whose_workspace_cannot_be_built_fails_alone(sample_tasks: SampleTasks,
                                                           fresh_store: Store) -> None:
    from swemill.store.layout import shard_name

    good, bad = sample_tasks.tasks[:2]
    broken = [good, bad.model_copy(update={"snapshot": "snapshots/run_id=gone/x.tar.gz"})]
    fresh_store.write_records("tasks", "broken", shard_name(0, 1), broken)
    result = run_rollouts(fresh_store, "broken", sample_tasks.config("scripted:submit",
                                                                     workers=2))
    trajs = {t.task_id: t for t in _trajs(fresh_store, "broken")}
    assert result.counts["failed"] == 1 and len(trajs) == 2
    assert trajs[bad.instance_id].metadata["stop_reason"] == "env_error"
    assert "snapshot unreadable" in (trajs[bad.instance_id].error or "")
    assert trajs[good.instance_id].outcome is not None and trajs[good.instance_id].error is None
