"""The Glue trace-ingestion job equals ``swemill traces ingest`` row for row (order aside)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from swemill.core.errors import IngestError
from swemill.spark.traces_job import ingest_spark
from swemill.store import Store
from swemill.traces.ingest import ingest
from swemill_testkit.fake_sessions import generate_corpus

from .conftest import rows_of

pytestmark = pytest.mark.slow
DATA = Path(__file__).parents[1] / "traces" / "data"
STAGES = ("traces", "trajectories", "quarantine")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("traces-in")
    generate_corpus(root, 400_000, seed=3, turns=6)
    for f in DATA.iterdir():
        shutil.copy(f, root / f.name)
    (root / "notes.txt").write_text("not a trace\n")  # a quarantined file
    (root / "broken.jsonl").write_text('{"type": "user", "message": \n{}\n')
    return root


def _counts(store: Store, run_id: str) -> dict[str, Any]:
    return store.read_manifest(run_id).counts


def test_spark_equals_local(spark: Any, inputs: Path, tmp_path: Path) -> None:
    local, remote = Store(str(tmp_path / "local")), Store(str(tmp_path / "spark"))
    ingest([inputs], local, "r1")
    result = ingest_spark(spark, [str(inputs)], remote, "r1", partitions=3)
    assert result.shards["traces"] == 3  # really spread over partitions
    for stage in STAGES:
        want = rows_of(local, stage, "r1")
        assert want, stage
        assert rows_of(remote, stage, "r1") == want, stage
    assert _counts(remote, "r1") == _counts(local, "r1")
    assert remote.read_manifest("r1").status == "complete"


def test_spark_submit_entrypoint(tmp_path: Path) -> None:
    """The job as Glue/EMR start it: a script handed to spark-submit, extra args ignored."""
    import swemill.spark.traces_job as job

    submit = Path(sys.executable).parent / "spark-submit"
    out = tmp_path / "submitted"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run(
        [str(submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false", job.__file__,
         "--out", str(out), "--run-id", "g1", "--JOB_NAME", "swemill-ingest", "--input", str(DATA)],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    local = Store(str(tmp_path / "local"))
    ingest([DATA], local, "g1")
    assert rows_of(Store(str(out)), "trajectories", "g1") == rows_of(local, "trajectories", "g1")


def test_files_that_share_a_key_stay_together(spark: Any, tmp_path: Path) -> None:
    """calc__calc-7.traj and calc__calc-7.traj.json both make session key calc__calc-7:
    locally the second one becomes calc__calc-7#2; spread over partitions it must too."""
    local, remote = Store(str(tmp_path / "local")), Store(str(tmp_path / "spark"))
    ingest([DATA], local, "k1")
    ingest_spark(spark, [str(DATA)], remote, "k1", partitions=3)
    ids = sorted(t["trajectory_id"] for t in local.read_records("trajectories", "k1"))
    assert any("#2" in i for i in ids)  # the premise: a real collision
    assert rows_of(remote, "trajectories", "k1") == rows_of(local, "trajectories", "k1")


def test_missing_input_is_one_clear_error(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(IngestError, match="no such file or directory"):
        ingest_spark(spark, [str(tmp_path / "absent")], Store(str(tmp_path / "o")), "r1")
