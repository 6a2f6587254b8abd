"""``swemill rollout`` as a user runs it: a real process, a real store, one line on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from swemill.core.records import Task, Trajectory
from swemill.store import Store
from swemill.store.layout import shard_name
from swemill.validate.difficulty import LABELS, TaskDifficulty

from .conftest import SampleTasks


def _swemill(cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SWEMILL_CACHE": str(cache), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "swemill", "rollout", *args], env=env,
                          capture_output=True, text=True, timeout=600)


def _one_error_line(proc: subprocess.CompletedProcess[str], needle: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], proc.stderr


@pytest.mark.slow
def test_rollout_from_another_root_writes_the_run_there(sample_tasks: SampleTasks,
                                                        tmp_path: Path) -> None:
    out = tmp_path / "out"
    cfg = tmp_path / "rollout.yaml"
    cfg.write_text("policy: scripted:submit\nmax_tasks: 1\nworkers: 1\n")
    proc = _swemill(sample_tasks.cache, "--tasks", str(sample_tasks.root), "--config", str(cfg),
                    "--policy", "oracle", "--out", str(out), "--json")  # the flag wins
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["run_id"] == sample_tasks.run_id and summary["counts"]["sft"] == 1
    store = Store.open(str(out), check=False)
    # the tasks came along (the corpus reads them next to the trajectories)
    assert len(store.read_records("tasks", sample_tasks.run_id, Task)) == len(sample_tasks.tasks)
    [traj] = store.read_records("trajectories", sample_tasks.run_id, Trajectory)
    assert traj.outcome is not None and traj.outcome.grade == 1.0
    # one task rolled out (the oracle solves it: easy), the others labelled by their proxies
    rows = {d.instance_id: d for d in store.read_records("difficulty", sample_tasks.run_id,
                                                         TaskDifficulty)}
    assert len(rows) == len(sample_tasks.tasks) and summary["difficulty"]["measured"] == 1
    assert sum(summary["difficulty"].get(k, 0) for k in LABELS) == len(sample_tasks.tasks)
    solved = rows[traj.task_id or ""]
    assert (solved.label, solved.label_source, solved.solve_rate, solved.policy) == (
        "easy", "rollouts", 1.0, "oracle")
    for task in sample_tasks.tasks:
        if task.instance_id != traj.task_id:
            row = rows[task.instance_id]
            assert (row.label_source, row.samples, row.solve_rate) == ("proxies", 0, None)
            assert row.label == task.metadata["difficulty"]["label"]
    again = _swemill(sample_tasks.cache, "--tasks", sample_tasks.run_id, "--policy", "oracle",
                     "--out", str(out), "--max-tasks", "1")
    _one_error_line(again, "--resume")


@pytest.mark.slow
@pytest.mark.parametrize(("args", "needle"), [
    (["--policy", "teleport:x"], "unknown policy spec"),
    (["--policy", "oracle", "--select", "sometimes"], "--select"),
    (["--policy", "oracle", "--select", "fractional"], "--samples 2"),
    (["--config", "{tmp}/bad.yaml"], "bogus: Extra inputs are not permitted"),
    ([], "no policy"),
])
def test_bad_input_is_one_line(sample_tasks: SampleTasks, tmp_path: Path, args: list[str],
                               needle: str) -> None:
    out = tmp_path / "out"
    store = Store.open(str(out))
    store.write_records("tasks", "r1", shard_name(0, 1), sample_tasks.tasks[:1])
    (tmp_path / "bad.yaml").write_text("policy: oracle\nbogus: 1\n")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    _one_error_line(_swemill(sample_tasks.cache, "--tasks", "r1", "--out", str(out), *args),
                    needle)


def test_tasks_that_are_nowhere_is_one_line(sample_tasks: SampleTasks, tmp_path: Path) -> None:
    proc = _swemill(sample_tasks.cache, "--tasks", "no-such-run", "--policy", "oracle",
                    "--out", str(tmp_path / "out"))
    _one_error_line(proc, "neither a run id")
