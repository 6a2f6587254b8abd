"""``swemill aws run-stage``: one stage through the build driver; retried, it skips."""

from __future__ import annotations

from pathlib import Path

import pytest

from swemill.aws.run_stage import run_stage
from swemill.core.errors import ConfigError
from swemill.store import Store


def test_first_stage_starts_the_run_and_a_retry_skips(tmp_path: Path) -> None:
    store = Store(str(tmp_path))
    summary = run_stage("gate", store, "r1", "sample")
    assert summary is not None and summary["allowed"] == 1
    manifest = store.read_manifest("r1")
    assert manifest.metadata["build"]["stages"]["gate"] == "complete"
    assert store.exists("gate/run_id=r1/verdicts.jsonl")
    assert run_stage("gate", store, "r1", "sample") is None  # Step Functions retried it
    store.delete("gate/run_id=r1/verdicts.jsonl")
    assert run_stage("gate", store, "r1", "sample") is not None  # its output went: redone


def test_later_stage_needs_the_run(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="stage gate of run r1 is not complete"):
        run_stage("tasks", Store(str(tmp_path)), "r1", "sample")
    with pytest.raises(ConfigError, match="unknown stage"):
        run_stage("deploy", Store(str(tmp_path)), "r1", "sample")


def test_executor_is_checked_before_the_stage_runs(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="unknown executor 'k8s'"):
        run_stage("gate", Store(str(tmp_path)), "r1", "sample", executor="k8s")
    monkeypatch.delenv("SWEMILL_BATCH_JOB_QUEUE", raising=False)
    with pytest.raises(ConfigError, match="SWEMILL_BATCH_JOB_QUEUE"):
        run_stage("gate", Store(str(tmp_path)), "r1", "sample", executor="aws-batch")
    assert not Store(str(tmp_path)).list_keys("manifests")  # no run was started
    # a runtime setting: a stage of a run started locally may fan out on another executor
    assert run_stage("gate", Store(str(tmp_path)), "r1", "sample") is not None
    monkeypatch.setenv("SWEMILL_BATCH_JOB_QUEUE", "q")
    monkeypatch.setenv("SWEMILL_BATCH_JOB_DEFINITION", "d")
    with pytest.raises(ConfigError, match="s3:// root"):
        run_stage("env", Store(str(tmp_path)), "r1", "sample", executor="aws-batch")
