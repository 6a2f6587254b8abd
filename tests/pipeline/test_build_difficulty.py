"""``swemill build`` on the sample (oracle + an always-wrong noisy oracle, 2 samples per task):
the run's ``difficulty/`` table holds each task's solve rate, pass@k, policies and label, the
rows carry the label, and ``swemill corpus --difficulty`` keeps and drops by it; ``swemill
build --difficulty`` selects the build's own rows the same way."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from swemill.core.records import Task, Trajectory
from swemill.store import Store

from .conftest import needs_full_build

pytestmark = pytest.mark.slow


def test_a_build_with_rollouts_stores_difficulty_per_task(sample_build) -> None:
    store = Store.open(str(sample_build.root))
    run = sample_build.run_id
    table = pq.read_table(store.part_urls("difficulty", run)[0])
    assert {"instance_id", "solve_rate", "samples", "resolved", "policy", "pass_at_k", "label",
            "label_source", "lines_changed", "n_fail_to_pass", "informativeness",
            "strategy"} <= set(table.column_names)
    rows = {r["instance_id"]: r for r in table.to_pylist()}
    tasks = store.read_records("tasks", run, Task)
    assert set(rows) == {t.instance_id for t in tasks} and len(rows) == 3
    trajs = store.read_records("trajectories", run, Trajectory)
    for task in tasks:
        row = rows[task.instance_id]
        mine = [t for t in trajs if t.task_id == task.instance_id]
        solved = sum(bool(t.outcome and t.outcome.resolved) for t in mine)
        # the oracle solves every task, the noisy oracle at P=1.0 never does
        assert (len(mine), solved) == (2, 1)
        assert (row["samples"], row["resolved"], row["solve_rate"]) == (2, 1, 0.5)
        assert row["pass_at_k"] == [0.5, 1.0]  # 1 - C(1,k)/C(2,k)
        assert row["policy"] == ",".join(t.policy for t in sorted(
            mine, key=lambda t: t.metadata["sample"]))
        assert (row["label"], row["label_source"]) == ("medium", "rollouts")
        assert row["n_fail_to_pass"] == len(task.FAIL_TO_PASS)
        assert row["proxy_label"] == task.metadata["difficulty"]["label"]
    sft = pq.read_table(store.part_urls("corpus/sft", run)[0]).to_pylist()
    assert sft and {r["difficulty"] for r in sft} == {"medium"}
    m = store.read_manifest(run)
    assert m.counts["rollouts"]["difficulty_rows"] == 3


def test_corpus_difficulty_keeps_and_drops_the_rows_of_a_built_run(sample_build, cli,
                                                                   tmp_path: Path) -> None:
    root = tmp_path / "out"
    shutil.copytree(sample_build.root, root)
    run = sample_build.run_id
    kept = cli.run("corpus", "--run", run, "--out", str(root), "--difficulty", "medium",
                   "--curriculum", "--no-dedup", "--json", cache=sample_build.cache)
    assert kept.returncode == 0, kept.stderr[-2000:]
    out = json.loads(kept.stdout)
    assert sum(out["rows"].values()) > 0
    assert not any(k == "dropped_difficulty" for c in out["counts"].values() for k in c)
    gone = cli.run("corpus", "--run", run, "--out", str(root), "--difficulty", "easy",
                   cache=sample_build.cache)
    line = cli.error_line(gone)
    assert "empty after filtering" in line and "difficulty=" in line
    counts = Store.open(str(root)).read_manifest(run).counts
    dropped = counts["corpus.sft"]["dropped_difficulty"] + counts["corpus.dpo"][
        "dropped_difficulty"]
    assert dropped == counts["corpus.sft"]["in"] + counts["corpus.dpo"]["in"] > 0
    assert sum(out["rows"].values()) <= dropped


# With the oracle and a noisy oracle that is wrong 30% of the time, 4 samples per task, this
# seed gives the sample's three tasks both labels: medium (a noisy sample failed) and easy.
MIXED = ("--max-tasks", "3", "--strategies", "procedural", "--policy", "oracle", "--policy",
         "noisy-oracle:0.3", "--samples", "4", "--workers", "2", "--audit", "0", "--seed", "0")


@needs_full_build
def test_build_difficulty_selects_the_rows_it_writes(cli, build_cache: Path,
                                                     tmp_path: Path) -> None:
    root = tmp_path / "out"
    out = cli.build_json("sample", "--out", str(root), *MIXED, "--difficulty", "medium",
                         "--curriculum", cache=build_cache)
    store, run = Store.open(str(root)), out["run_id"]
    tasks = store.read_records("tasks", run, Task)
    for task in tasks:  # the proxies every task carries, rolled out or not
        assert {"lines_changed", "n_fail_to_pass", "informativeness", "strategy", "points",
                "label"} <= set(task.metadata["difficulty"])
    table = pq.read_table(store.part_urls("difficulty", run)[0])
    assert {"solve_rate", "pass_at_k", "label", "label_source"} <= set(table.column_names)
    labels = {r["instance_id"]: r["label"] for r in table.to_pylist()}
    assert set(labels) == {t.instance_id for t in tasks}
    assert set(labels.values()) == {"easy", "medium"}, f"{labels}: pick a seed with both"
    medium = {i for i, label in labels.items() if label == "medium"}
    rows = {name: pq.read_table(store.part_urls(f"corpus/{name}", run)[0]).to_pylist()
            for name in ("sft", "dpo")}
    for name, got in rows.items():  # only the medium tasks' rows were written
        assert got and {r["task_id"] for r in got} <= medium, name
        assert {r["difficulty"] for r in got} == {"medium"}, name
    m = store.read_manifest(run)
    assert m.config["corpus"]["difficulty"] == "medium" and m.config["corpus"]["curriculum"]
    assert m.counts["corpus.sft"]["dropped_difficulty"] > 0  # the easy tasks' rows
    # the same run's corpus without the selection has the easy tasks' rows too
    again = cli.run("corpus", "--run", run, "--out", str(root), "--json", cache=build_cache)
    assert again.returncode == 0, again.stderr[-2000:]
    sft = pq.read_table(store.part_urls("corpus/sft", run)[0]).to_pylist()
    assert {r["task_id"] for r in sft} - medium and len(sft) > len(rows["sft"])


def test_build_refuses_an_unknown_difficulty_in_one_line(cli, tmp_path: Path) -> None:
    proc = cli.run("build", "sample", "--out", str(tmp_path / "o"), "--difficulty", "hardest",
                   cache=tmp_path / "cache")
    assert "unknown difficulty 'hardest'" in cli.error_line(proc)
