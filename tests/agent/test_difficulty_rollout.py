"""Difficulty per task on the validator's tasks of the sample: proxies on every task, solve
rate / pass@k / label after rollouts (the noisy oracle, so tasks differ), and the corpus's
``--difficulty`` selection and curriculum order over those labels."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from itertools import combinations

import pyarrow.parquet as pq
import pytest

from swemill.agent.rollout import run_rollouts
from swemill.core.errors import CorpusError
from swemill.core.records import PreferencePair, Trajectory
from swemill.corpus.assemble import CorpusConfig
from swemill.corpus.report import write_report
from swemill.corpus.split import SplitConfig
from swemill.corpus.stage import run_corpus
from swemill.store import Store
from swemill.validate.difficulty import (
    DIFFICULTY_STAGE,
    LABELS,
    TaskDifficulty,
    load_difficulty,
    proxy_label,
    proxy_points,
    solve_label,
)

from .conftest import SampleTasks


def _lines_changed(patch: str) -> int:
    return sum(1 for ln in patch.splitlines()
               if ln[:1] in "+-" and not ln.startswith(("+++ ", "--- ")))


def test_every_task_carries_its_proxies(sample_tasks: SampleTasks) -> None:
    for task in sample_tasks.tasks:
        p = task.metadata["difficulty"]
        bug = sample_tasks.goldens[task.instance_id].bug_patch
        assert p["lines_changed"] == _lines_changed(bug)
        assert p["n_fail_to_pass"] == len(task.FAIL_TO_PASS) == task.n_fail_to_pass
        assert p["strategy"] == task.strategy
        assert 0.0 <= p["informativeness"] <= 1.0
        assert p["points"] == proxy_points(p["lines_changed"], p["n_fail_to_pass"],
                                           p["informativeness"], task.strategy)
        assert p["label"] == proxy_label(p["points"])
    # a run without rollouts: no table, every label from the proxies
    store = sample_tasks.store
    assert not store.complete_shards(DIFFICULTY_STAGE, sample_tasks.run_id)
    known = load_difficulty(store, sample_tasks.run_id)
    assert set(known) == {t.instance_id for t in sample_tasks.tasks}
    for task in sample_tasks.tasks:
        d = known[task.instance_id]
        assert (d.label_source, d.solve_rate, d.samples, d.pass_at_k) == ("proxies", None, 0, [])
        assert d.label == task.metadata["difficulty"]["label"]


def _counted(outcomes: list[bool], k: int) -> float:
    subsets = list(combinations(outcomes, k))
    return sum(any(s) for s in subsets) / len(subsets)


def _rows(store: Store, run_id: str, stage: str) -> list[dict]:
    return store.read_records(stage, run_id) if store.complete_shards(stage, run_id) else []


def _task_ids(store: Store, run_id: str) -> Counter[str]:
    return Counter(r["task_id"] for stage in ("corpus/sft", "corpus/dpo")
                   for r in _rows(store, run_id, stage))


def _corpus(store: Store, run_id: str, difficulty: str, curriculum: bool = False) -> None:
    run_corpus(store, run_id, CorpusConfig(dedup=False, difficulty=difficulty,
                                           curriculum=curriculum,
                                           split=SplitConfig(holdout_fraction=0.0)))


@pytest.mark.slow
def test_rollouts_measure_difficulty_and_the_corpus_selects_by_it(
        sample_tasks: SampleTasks, fresh_store: Store) -> None:
    run = sample_tasks.run_id
    run_rollouts(fresh_store, run, sample_tasks.config("noisy-oracle:0.5", samples=4, workers=2))
    # the columns, as any Parquet reader sees them
    (part,) = [k for k in fresh_store.list_keys(f"{DIFFICULTY_STAGE}/run_id={run}")
               if k.endswith(".parquet")]
    columns = pq.read_schema(fresh_store.path(f"{DIFFICULTY_STAGE}/run_id={run}/{part}")).names
    assert {"instance_id", "solve_rate", "samples", "resolved", "policy", "pass_at_k", "label",
            "label_source", "lines_changed", "n_fail_to_pass", "informativeness",
            "strategy"} <= set(columns)
    rows = {r.instance_id: r for r in fresh_store.read_records(DIFFICULTY_STAGE, run,
                                                               TaskDifficulty)}
    trajs = fresh_store.read_records("trajectories", run, Trajectory)
    assert set(rows) == {t.instance_id for t in sample_tasks.tasks}
    for task in sample_tasks.tasks:
        row = rows[task.instance_id]
        outcomes = [bool(t.outcome and t.outcome.resolved) for t in trajs
                    if t.task_id == task.instance_id]
        assert len(outcomes) == 4
        assert (row.samples, row.resolved) == (4, sum(outcomes))
        assert row.solve_rate == sum(outcomes) / 4 and row.policy == "noisy-oracle:0.5"
        assert row.pass_at_k == pytest.approx([_counted(outcomes, k) for k in range(1, 5)])
        assert (row.label, row.label_source) == (solve_label(row.solve_rate), "rollouts")
        assert row.proxy_label == task.metadata["difficulty"]["label"]
    labels = {iid: r.label for iid, r in rows.items()}
    assert len(set(labels.values())) >= 2, labels  # the selection below must keep and drop

    inputs = [t.task_id for t in trajs] + [
        p.task_id for p in fresh_store.read_records("pairs", run, PreferencePair)]
    _corpus(fresh_store, run, "all")
    every = _task_ids(fresh_store, run)
    assert set(every) == set(labels)
    for label in LABELS:
        want = Counter({iid: n for iid, n in every.items() if labels[iid] == label})
        if not want:
            with pytest.raises(CorpusError, match="difficulty="):
                _corpus(fresh_store, run, label)
            continue
        _corpus(fresh_store, run, label)
        assert _task_ids(fresh_store, run) == want
        counts = fresh_store.read_manifest(run).counts
        dropped = sum(counts[s].get("dropped_difficulty", 0) for s in ("corpus.sft", "corpus.dpo"))
        # every input row of the other labels' tasks, before admission or any filter
        assert dropped == sum(1 for t in inputs if labels[t] != label)
        assert {r["difficulty"] for stage in ("corpus/sft", "corpus/dpo")
                for r in _rows(fresh_store, run, stage)} == {label}

    _corpus(fresh_store, run, "all", curriculum=True)
    orders = [[LABELS.index(r["difficulty"]) for r in _rows(fresh_store, run, stage)]
              for stage in ("corpus/sft", "corpus/dpo")]
    assert all(o == sorted(o) for o in orders) and len({i for o in orders for i in o}) >= 2

    html = fresh_store.read_text(write_report(fresh_store, run))
    assert "<h2>Difficulty per strategy</h2>" in html
    for strategy in {t.strategy for t in sample_tasks.tasks}:
        mine = [labels[t.instance_id] for t in sample_tasks.tasks if t.strategy == strategy]
        cells = [mine.count(label) for label in LABELS] + [len(mine)]  # all measured
        assert (f"<tr><th>{strategy}</th>" + "".join(f"<td class='n'>{n}</td>" for n in cells)
                + "</tr>") in html


def test_the_cli_refuses_an_unknown_difficulty(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "swemill", "corpus", "--run", "r", "--out",
                           str(tmp_path), "--difficulty", "impossible"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 2
    assert "unknown --difficulty 'impossible'" in proc.stderr and "Traceback" not in proc.stderr
