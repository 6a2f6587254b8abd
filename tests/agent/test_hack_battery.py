"""The reward-hack battery, end to end: every hack kind earns nothing that reaches training data.

All kinds of :mod:`tests.agent.hack_policies` run, next to the oracle, as candidates of one
rollout over a task of the sample (the real rollout stage: workspace, sandbox, monitor,
grader, pairs), then the real corpus stage. Each kind must be graded unresolved or flagged,
and none may become an SFT row or the ``chosen`` side of a pair. The oracle on the same task
must still be solved and admitted, so the path is not idle.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from swemill.agent.rollout import PAIRS_STAGE, run_rollouts
from swemill.agent.sampling import DecisionPoint, pairs_at
from swemill.core.records import PreferencePair, Task, ToolResultBlock, Trajectory
from swemill.corpus.stage import load_corpus_tables, run_corpus
from swemill.store import Store
from swemill.suite.runner import PLUGIN_MODULE

from .conftest import SampleTasks
from .hack_policies import HACKS, write_policy_files

pytestmark = pytest.mark.slow

RUN = "hack-battery"


@dataclass
class Battery:
    by_kind: dict[str, Trajectory]
    oracle: Trajectory
    submit: Trajectory
    """The same task given up at once (grade 0): what a hack would be preferred to."""
    sft_ids: set[str]
    chosen_ids: set[str]
    task: Task

    def would_be_chosen(self, traj: Trajectory) -> bool:
        """Chosen over the run that gave up, had the rollout paired just those two (it keeps
        the widest gaps, so the oracle's pairs may crowd a hack's out of the stored ones)."""
        prefix = traj.messages[:traj.metadata["prefix_len"]]
        pairs = pairs_at(DecisionPoint(0, prefix, [traj, self.submit]), self.task)
        return any(p.metadata["chosen_trajectory"] == traj.trajectory_id for p in pairs)

    def row(self, kind: str) -> tuple[str, float | None, bool, str, bool, bool]:
        t = self.by_kind[kind]
        grade = t.outcome.grade if t.outcome else None
        resolved = bool(t.outcome and t.outcome.resolved)
        chosen = t.trajectory_id in self.chosen_ids or self.would_be_chosen(t)
        return (kind, grade, resolved, ",".join(t.flags) or "-", t.trajectory_id in self.sft_ids,
                chosen)


@pytest.fixture(scope="module")
def battery(sample_tasks: SampleTasks, tmp_path_factory: pytest.TempPathFactory) -> Battery:
    import shutil

    root = tmp_path_factory.mktemp("battery") / "store"
    shutil.copytree(sample_tasks.root, root)
    store = Store.open(str(root))
    specs = write_policy_files(root.parent / "policies")
    kind_of = {spec: kind for kind, spec in specs.items()}
    policies = ",".join(["oracle", "scripted:submit", *specs.values()])
    config = sample_tasks.config(policies, max_tasks=1, workers=2,
                                 test_timeout_s=120.0, command_timeout_s=60.0)
    run_rollouts(store, sample_tasks.run_id, config, run_id=RUN)
    run_corpus(store, RUN)
    trajs = store.read_records("trajectories", RUN, Trajectory)
    pairs = {p.pair_id: p for p in store.read_records(PAIRS_STAGE, RUN, PreferencePair)}
    tables = load_corpus_tables(store, RUN)
    sft_ids = {r["trajectory_id"] for r in tables.sft + tables.sft_holdout}
    dpo_ids = {r["pair_id"] for r in tables.dpo + tables.dpo_holdout}
    chosen = {p.metadata["chosen_trajectory"] for p in pairs.values()}  # stored pairs, and
    chosen |= {pairs[i].metadata["chosen_trajectory"] for i in dpo_ids}  # those in the corpus
    by_kind = {kind_of[t.policy]: t for t in trajs if t.policy in kind_of}
    [oracle] = [t for t in trajs if t.policy == "oracle"]
    [submit] = [t for t in trajs if t.policy == "scripted:submit"]
    task = next(t for t in sample_tasks.tasks if t.instance_id == oracle.task_id)
    result = Battery(by_kind, oracle, submit, sft_ids, chosen, task)
    if log := os.environ.get("SWEMILL_BATTERY_LOG"):  # the grading logs, for a person to read
        Path(log).write_text("\n".join(f"== {k}\n{t.outcome.log if t.outcome else t.error}"
                                       for k, t in sorted(by_kind.items())))
    print("\nkind | grade | resolved | flags | in SFT | chosen")
    for kind in sorted(by_kind):
        print(" | ".join(str(x) for x in result.row(kind)))
    return result


def test_the_battery_has_at_least_fifteen_kinds(battery: Battery) -> None:
    assert len(HACKS) >= 15
    assert sorted(battery.by_kind) == sorted(HACKS)  # every kind ran and was recorded


@pytest.mark.parametrize("kind", sorted(HACKS))
def test_each_hack_is_unresolved_or_flagged_and_never_trained_on(battery: Battery,
                                                                  kind: str) -> None:
    traj = battery.by_kind[kind]
    assert traj.outcome is not None, (kind, traj.error)  # graded, not an error that hides it
    assert not traj.outcome.resolved or traj.flags, battery.row(kind)
    assert traj.admission != "sft"
    assert traj.trajectory_id not in battery.sft_ids
    assert traj.trajectory_id not in battery.chosen_ids
    assert not battery.would_be_chosen(traj)


@pytest.mark.parametrize("kind", sorted(HACKS))
def test_each_layer_alone_catches_every_kind(battery: Battery, kind: str) -> None:
    """Stronger than the acceptance rule: the grader alone leaves each hack unresolved with
    grade 0, and the monitor alone flags each one."""
    traj = battery.by_kind[kind]
    assert traj.outcome is not None and traj.outcome.grade == 0.0
    assert not traj.outcome.resolved
    assert traj.flags


def test_the_oracle_next_to_them_is_solved_and_reaches_sft(battery: Battery) -> None:
    out = battery.oracle.outcome
    assert out is not None and out.grade == 1.0 and out.resolved and battery.oracle.flags == []
    assert battery.oracle.trajectory_id in battery.sft_ids
    assert battery.oracle.trajectory_id in battery.chosen_ids  # chosen over the hacks


def test_the_environment_stays_read_only(battery: Battery, sample_tasks: SampleTasks) -> None:
    traj = battery.by_kind["site_packages"]
    results = [b for m in traj.messages for b in m.content if isinstance(b, ToolResultBlock)]
    writes = results[:2]
    assert all(r.is_error and ("Read-only" in r.content or "Permission denied" in r.content)
               for r in writes), [r.content for r in writes]
    # every environment in the cache (other tests may have built more than the battery's)
    sites = list(Path(sample_tasks.cache, "envs").glob("*/venv/lib/python*/site-packages"))
    assert any((site / f"{PLUGIN_MODULE}.py").is_file() for site in sites)
    for site in sites:
        assert not (site / "zz_evil.pth").exists()
        plugin = site / f"{PLUGIN_MODULE}.py"
        assert not plugin.exists() or "# tampered" not in plugin.read_text()
