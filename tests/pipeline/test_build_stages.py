"""One stage at a time, as an orchestrator runs the build: state in the manifest, order kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from swemill.core.errors import ConfigError, StoreError
from swemill.core.records import Baseline, CandidateRecord
from swemill.pipeline import BuildConfig, BuildEvent, run_build
from swemill.store import Store


@pytest.fixture
def cache(build_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SWEMILL_CACHE", str(build_cache))  # the session's environments
    return build_cache


@pytest.mark.slow
def test_gate_and_env_alone_leave_a_running_run_that_resumes_in_order(cache: Path,
                                                                      tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    events: list[BuildEvent] = []
    result = run_build(None, root, stages=["env", "gate"], progress=events.append)
    m = result.manifest
    assert m.status == "running" and m.finished_at is None
    assert m.metadata["build"]["stages"] == {"gate": "complete", "env": "complete"}
    assert [(e.stage, e.kind) for e in events if e.kind != "update"] == [
        ("gate", "start"), ("gate", "done"), ("env", "start"), ("env", "done")]
    store = Store.open(root)
    assert store.exists(f"gate/run_id={m.run_id}/verdicts.jsonl")
    assert m.counts["env"]["tests"] > 60 and m.counts["gate"]["out"] == 1
    env_keys = store.list_keys("envs")
    assert len(env_keys) == 1 and store.exists(f"envs/{env_keys[0]}/baseline.json")
    # The corpus cannot run before the tasks and rollouts; the run is left as it was.
    with pytest.raises(ConfigError, match="stage tasks of run .* is not complete"):
        run_build(None, root, resume=True, run_id=m.run_id, stages=["corpus"])
    assert store.read_manifest(m.run_id).status == "running"
    # Running gate again skips it (complete, its verdicts still there).
    again = run_build(None, root, resume=True, run_id=m.run_id, stages=["gate"])
    assert again.skipped == ["gate"]


def test_a_new_run_must_start_with_the_gate(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="stage gate of run .* is not complete"):
        run_build(None, str(tmp_path / "root"), stages=["tasks"])
    assert not (tmp_path / "root" / "manifests").exists()


def test_unknown_stage_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown stage 'train'"):
        run_build(None, str(tmp_path / "root"), stages=["train"])


@pytest.mark.slow
def test_the_tasks_stage_takes_the_baseline_the_env_stage_recorded(cache: Path,
                                                                    tmp_path: Path) -> None:
    """The tasks stage reads the verdict and the baseline back from the store instead of
    running the suite again: a recorded coverage map narrowed to one function (the cached
    baseline next to the environment still has all of them) aims every candidate at it."""
    root = str(tmp_path / "root")
    config = BuildConfig(max_tasks=1, strategies=("procedural",), workers=2, audit=0)
    run = run_build(None, root, config, stages=["gate", "env"]).run_id
    store = Store.open(root)
    (env_dir,) = store.list_keys("envs")
    key = f"envs/{env_dir}/baseline.json"
    recorded = Baseline.model_validate(store.read_json(key))
    store.write_json(key, recorded.model_copy(update={"env_key": "someone+else@0123456789ab"})
                     .model_dump(mode="json"))
    with pytest.raises(StoreError, match="recorded baseline is of someone\\+else"):
        run_build(None, root, resume=True, run_id=run, stages=["tasks"])
    target, tests = max(recorded.coverage.items(), key=lambda kv: len(kv[1]))
    narrowed = recorded.model_copy(update={"coverage": {target: tests}})
    store.write_json(key, narrowed.model_dump(mode="json"))
    run_build(None, root, resume=True, run_id=run, stages=["tasks"])
    rows = store.read_records("candidates", run, CandidateRecord)
    assert len(recorded.coverage) > 10 and rows
    assert {f"{r.file}::{r.symbol}" for r in rows} == {target}
