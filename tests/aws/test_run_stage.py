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
