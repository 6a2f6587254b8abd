"""Acceptance on the bundled sample: every strategy yields tasks, and an independent, cold,
full-suite audit of every task finds no false FAIL_TO_PASS / PASS_TO_PASS claim.

Also: snapshots hold no history of the fix and no bytecode; ``tasks/`` holds no golden text;
the manifest counts every candidate; the same seed gives the same tasks whatever the number
of workers; a resumed run redoes nothing.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swemill.core.records import CandidateRecord, Golden, Task
from swemill.repo.envbuild import build_env
from swemill.repo.sources import resolve_source
from swemill.store import Store
from swemill.validate.tasks_config import TasksConfig
from swemill.validate.validator import run_tasks

from .conftest import independent_audit

pytestmark = [pytest.mark.slow, pytest.mark.network]


@pytest.fixture(scope="module")
def sample_run(shared_cache: Path, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[dict[str, Any]]:
    store = Store(str(tmp_path_factory.mktemp("store")))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SWEMILL_CACHE", str(shared_cache))
        config = TasksConfig(max_tasks=6, workers=2, seed=0, audit=2)
        result = run_tasks("sample", store, "s1", config)
        env = build_env(resolve_source("sample"))
        yield {"store": store, "result": result, "env": env, "cache": shared_cache}


def test_every_strategy_yields_tasks(sample_run: dict[str, Any]) -> None:
    result = sample_run["result"]
    for name in ("procedural", "pr-mirror", "combine"):
        assert result.yields[name].tasks >= 1, (name, result.yields[name])
    assert result.tasks == 6 and len(set(result.instance_ids)) == 6
    assert result.audited == 2
    tasks = sample_run["store"].read_records("tasks", "s1", Task)
    assert sorted(t.instance_id for t in tasks) == sorted(result.instance_ids)
    assert all(t.license_tier == "redistributable" and t.metadata["source"] == "sample"
               for t in tasks)


def test_independent_audit_finds_no_false_claims(sample_run: dict[str, Any]) -> None:
    store, env = sample_run["store"], sample_run["env"]
    tasks = store.read_records("tasks", "s1", Task)
    goldens = {g.instance_id: g for g in store.read_records("golden", "s1", Golden)}
    for task in tasks:
        assert task.FAIL_TO_PASS and task.PASS_TO_PASS
        false_f2p, false_p2p = independent_audit(store, task, goldens[task.instance_id], env)
        assert (false_f2p, false_p2p) == ([], []), task.instance_id


def test_snapshots_hold_no_fix_history_and_no_bytecode(sample_run: dict[str, Any],
                                                       tmp_path: Path) -> None:
    store = sample_run["store"]
    goldens = {g.instance_id: g for g in store.read_records("golden", "s1", Golden)}
    for task in store.read_records("tasks", "s1", Task):
        data = store.get_bytes(task.snapshot)
        dest = tmp_path / task.instance_id
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            names = tar.getnames()
            tar.extractall(dest, filter="data")
        assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
        log = subprocess.run(["git", "-C", str(dest), "log", "--all", "--format=%H"],
                             capture_output=True, text=True, check=True).stdout.split()
        assert len(log) == 1  # one fresh commit: no history that contains the fix
        # the snapshot is the broken tree: the golden patch applies to it, forwards
        check = subprocess.run(["git", "-C", str(dest), "apply", "--check", "-"],
                               input=goldens[task.instance_id].golden_patch, text=True,
                               capture_output=True)
        assert check.returncode == 0, check.stderr


def test_tasks_prefix_holds_no_golden_text(sample_run: dict[str, Any]) -> None:
    store = sample_run["store"]
    root = Path(store.root)
    task_bytes = b"".join(p.read_bytes() for p in (root / "tasks").rglob("*") if p.is_file())
    for g in store.read_records("golden", "s1", Golden):
        added = [ln[1:].strip() for ln in g.golden_patch.splitlines()
                 if ln.startswith("+") and not ln.startswith("+++") and len(ln.strip()) > 12]
        assert added, g.instance_id
        assert not any(a.encode() in task_bytes for a in added), g.instance_id
        assert g.bug_patch.encode() not in task_bytes


def test_manifest_counts_every_candidate(sample_run: dict[str, Any]) -> None:
    manifest = sample_run["store"].read_manifest("s1")
    result = sample_run["result"]
    total = manifest.counts["tasks"]
    assert total["out"] == 6 and total["in"] == result.candidates
    dropped = sum(v for k, v in total.items() if k.startswith("dropped_"))
    assert total["in"] == total["valid"] + dropped
    assert manifest.counts["tasks.procedural"]["out"] >= 1
    assert manifest.license_tiers == {"redistributable": 6}
    assert manifest.timings_s["tasks"] > 0
    # candidates/ holds the same candidates, one row each: the written ones are the tasks
    rows = sample_run["store"].read_records("candidates", "s1", CandidateRecord)
    assert len(rows) == total["in"] and len({r.instance_id for r in rows}) == len(rows)
    assert sorted(r.instance_id for r in rows if r.verdict == "written") == \
        sorted(result.instance_ids)
    assert sum(r.verdict != "dropped" for r in rows) == total["valid"]
    for name, y in result.yields.items():
        mine = [r for r in rows if r.strategy == name]
        assert [r.position for r in mine] == list(range(y.candidates))
        assert Counter(r.reason for r in mine if r.verdict == "dropped") == Counter(y.drops)
    assert all(r.file and r.symbol and r.detail for r in rows if r.verdict == "dropped")


def test_same_seed_same_tasks_whatever_the_workers(sample_run: dict[str, Any],
                                                   tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEMILL_CACHE", str(sample_run["cache"]))
    got = []
    for workers in (1, 2):
        store = Store(str(tmp_path / f"w{workers}"))
        cfg = TasksConfig(strategies=["procedural"], max_tasks=3, workers=workers, seed=7,
                          audit=0)
        run_tasks("sample", store, "d", cfg)
        got.append(sorted((t.instance_id, tuple(t.FAIL_TO_PASS), tuple(t.PASS_TO_PASS))
                          for t in store.read_records("tasks", "d", Task)))
    assert got[0] == got[1] and len(got[0]) == 3
    other = Store(str(tmp_path / "seed8"))
    run_tasks("sample", other, "d", TasksConfig(strategies=["procedural"], max_tasks=3,
                                                workers=2, seed=8, audit=0))
    assert sorted(t.instance_id for t in other.read_records("tasks", "d", Task)) != \
        [i for i, _, _ in got[0]]


def test_resume_redoes_nothing(sample_run: dict[str, Any],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEMILL_CACHE", str(sample_run["cache"]))
    store = sample_run["store"]
    again = run_tasks("sample", store, "s1", TasksConfig(max_tasks=6, workers=2, audit=0),
                      resume=True)
    assert again.resumed == ["procedural", "pr-mirror", "combine"]
    assert sorted(again.instance_ids) == sorted(sample_run["result"].instance_ids)
    assert len(store.read_records("tasks", "s1", Task)) == 6
