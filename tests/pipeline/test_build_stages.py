"""One stage at a time, as an orchestrator runs the build: state in the manifest, order kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from swemill.core.errors import ConfigError
from swemill.pipeline import BuildEvent, run_build
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
