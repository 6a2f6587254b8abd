"""The submitter against moto's Batch (containers disabled) on the local server."""

from __future__ import annotations

from typing import Any

import pytest

from swemill.aws.batch_child import run_child
from swemill.core.errors import ConfigError
from swemill.executors.aws_batch import AwsBatchExecutor, chunk_plan, manifest_key
from swemill.executors.process_pool import LocalExecutor
from swemill.store import Store
from swemill_testkit.executors import square
from swemill_testkit.store import LocalS3

from .conftest import batch_queue


@pytest.fixture(scope="module")
def batch(s3: LocalS3) -> Any:
    return batch_queue(s3, "swemill")


def test_chunk_plan() -> None:
    assert chunk_plan(25_000) == [(0, 10_000), (10_000, 10_000), (20_000, 5_000)]
    assert chunk_plan(0) == []
    with pytest.raises(ConfigError):
        chunk_plan(5, max_array=1)


def test_submit_wait_collect(batch: Any, s3_store: Store) -> None:
    items = list(range(7))
    executor = AwsBatchExecutor(s3_store, job_queue="swemill", job_definition="swemill-worker",
                                client=batch, max_array=3, poll_seconds=0.1,
                                timeout_seconds=30)
    sub = executor.submit(square, items, retries=2)
    assert [(start, size) for start, size, _ in sub.jobs] == [(0, 3), (3, 3), (6, 1)]
    jobs = batch.describe_jobs(jobs=[j for _, _, j in sub.jobs])["jobs"]
    by_name = {j["jobName"]: j for j in jobs}
    assert by_name["swemill-00000000"]["arrayProperties"]["size"] == 3
    assert "arrayProperties" not in by_name["swemill-00000006"] or \
        "size" not in by_name["swemill-00000006"]["arrayProperties"]
    env = {e["name"]: e["value"] for e in by_name["swemill-00000003"]["container"]["environment"]}
    assert env["SWEMILL_BATCH_ROOT"] == sub.root and env["SWEMILL_BATCH_START"] == "3"
    lone = {e["name"]: e["value"] for e in by_name["swemill-00000006"]["container"]["environment"]}
    assert lone["SWEMILL_BATCH_INDEX"] == "0"
    status = executor.wait(sub)
    assert set(status.values()) == {"SUCCEEDED"}
    # moto runs no container: nothing wrote results, so every item is a recorded failure.
    missing = executor.collect(sub)
    assert all(not r.ok and r.error == "no result: the child never finished" for r in missing)
    # Now do what the containers would: one child per index, environment as submitted.
    job = Store(sub.root, storage_options=s3_store.storage_options)
    for start, size, _ in sub.jobs:
        for pos in range(size):
            index_env = {"SWEMILL_BATCH_START": str(start)}
            index_env["AWS_BATCH_JOB_ARRAY_INDEX" if size > 1 else "SWEMILL_BATCH_INDEX"] = str(pos)
            assert run_child(job, index_env).exit_code == 0
    done = executor.collect(sub)
    local = LocalExecutor(workers=0).map(square, items)
    assert [(r.ok, r.value) for r in done] == [(r.ok, r.value) for r in local]
    assert job.read_jsonl(manifest_key(6)) == [
        {"index": 6, "fn": "swemill_testkit.executors:square", "item": {"data": 6}}]


def test_bad_settings_fail_at_construction(s3_store: Store) -> None:
    with pytest.raises(ConfigError, match="job queue and a job definition"):
        AwsBatchExecutor(s3_store, job_queue="", job_definition="d")
    with pytest.raises(ConfigError, match="2..10000"):
        AwsBatchExecutor(s3_store, job_queue="q", job_definition="d", max_array=20_000)
