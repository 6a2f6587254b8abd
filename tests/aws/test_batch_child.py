"""The Batch child against the local S3 server: every index of a manifest, reruns, bad input.

The acceptance path runs the real command (``swemill aws batch-child``) in a subprocess
with ``AWS_BATCH_JOB_ARRAY_INDEX`` set, as Batch would; the bad-input cases call the same
entry function in-process with the environment passed in.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from swemill.aws.batch_child import BatchChildError, run_child
from swemill.executors.aws_batch import (
    AwsBatchExecutor,
    BatchSubmission,
    manifest_key,
    read_result,
    result_key,
)
from swemill.executors.process_pool import LocalExecutor
from swemill.store import Store
from swemill_testkit.executors import fail_if_negative, read_object, square, transient_once
from swemill_testkit.store import LocalS3


def _executor(store: Store, max_array: int = 10_000) -> AwsBatchExecutor:
    # No client is built: these tests write manifests and run children, they do not submit.
    return AwsBatchExecutor(store, job_queue="q", job_definition="d", max_array=max_array)


def _start_child(s3: LocalS3, job: Store, index: int, start: int = 0) -> subprocess.Popen:
    env = {**os.environ, **s3.env(), "SWEMILL_BATCH_ROOT": job.url,
           "SWEMILL_BATCH_START": str(start), "AWS_BATCH_JOB_ARRAY_INDEX": str(index)}
    cmd = [sys.executable, "-m", "swemill", "aws", "batch-child", "--json"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _child(s3: LocalS3, job: Store, index: int, start: int = 0) -> tuple[int, str, str]:
    proc = _start_child(s3, job, index, start)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def _env(start: int, pos: int, **extra: str) -> dict[str, str]:
    return {"SWEMILL_BATCH_START": str(start), "AWS_BATCH_JOB_ARRAY_INDEX": str(pos), **extra}


@pytest.mark.slow
def test_every_index_equals_local_and_rerun_does_not_duplicate(
    s3: LocalS3, s3_store: Store
) -> None:
    items = [3, -1, 0, 7, 12]
    executor = _executor(s3_store, max_array=3)
    job = executor.write_manifest(fail_if_negative, items)
    assert job.list_keys("") == ["job.json", manifest_key(0), manifest_key(3)]
    # Every child at once, as an array job's children run.
    procs = [_start_child(s3, job, pos, start) for start, size in ((0, 3), (3, 2))
             for pos in range(size)]
    for proc in procs:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
    batch = executor.collect(BatchSubmission(job.url, len(items)))
    local = LocalExecutor(workers=2).map(fail_if_negative, items)
    assert [(r.ok, r.value, r.error) for r in batch] == [(r.ok, r.value, r.error) for r in local]
    first = job.read_json(result_key(3))
    assert set(first["timings"]) == {"process_to_start_s", "start_to_env_ready_s",
                                     "env_ready_to_done_s", "total_s"}
    assert first["timings"]["process_to_start_s"] > 0  # the interpreter's own start-up
    # Run index 3 again: the final result is kept, not redone or duplicated.
    code, out, _ = _child(s3, job, 0, 3)
    assert code == 0 and '"skipped"' in out
    assert job.read_json(result_key(3)) == first
    assert job.list_keys("results") == [f"{i:08d}.json" for i in range(5)]


def test_pydantic_items_and_results_round_trip(s3_store: Store) -> None:
    from swemill.core.records import RunManifest

    item = RunManifest(run_id="r1", command="x")
    job = _executor(s3_store).write_manifest(_echo_model, [item, item])
    assert run_child(job, _env(0, 1)).status == "done"
    assert read_result(job, 1).value == item


def _echo_model(m: Any) -> Any:
    return m


def test_transient_failure_retries_until_the_last_attempt(s3_store: Store, tmp_path: Any) -> None:
    items = [{"marker": str(tmp_path / "m"), "value": 5}]
    job = _executor(s3_store).write_manifest(transient_once, items, retries=1)
    first = run_child(job, _env(0, 0, AWS_BATCH_JOB_ATTEMPT="1"))
    assert (first.status, first.exit_code) == ("retry", 1)  # Batch will run it again
    assert job.read_json(result_key(0))["final"] is False
    second = run_child(job, _env(0, 0, AWS_BATCH_JOB_ATTEMPT="2"))
    assert (second.status, second.exit_code) == ("done", 0)
    assert read_result(job, 0).value == 5 and read_result(job, 0).attempts == 2


def test_transient_failure_on_last_attempt_is_final(s3_store: Store, tmp_path: Any) -> None:
    items = [{"marker": str(tmp_path / "m"), "value": 5}]
    job = _executor(s3_store).write_manifest(transient_once, items, retries=0)
    out = run_child(job, _env(0, 0))
    assert (out.status, out.exit_code) == ("failed", 0)
    assert run_child(job, _env(0, 0)).status == "skipped"


def test_index_beyond_manifest(s3_store: Store) -> None:
    job = _executor(s3_store).write_manifest(square, [1, 2])
    out = run_child(job, _env(0, 5))
    assert (out.status, out.exit_code) == ("bad_input", 2)
    assert out.error and "index 5 is beyond the manifest" in out.error
    assert job.read_json(result_key(5))["final"] is True  # recorded, not retried


def test_missing_manifest_line(s3_store: Store) -> None:
    job = _executor(s3_store).write_manifest(square, [1, 2, 3])
    lines = job.read_text(manifest_key(0)).splitlines()
    job.write_text(manifest_key(0), "\n".join([lines[0], lines[2]]) + "\n")  # line 1 lost
    out = run_child(job, _env(0, 1))
    assert out.status == "bad_input"
    assert out.error and "holds item 2, not 1" in out.error
    assert read_result(job, 1).error == f"BatchChildError: {out.error.split(': ', 1)[1]}"
    blank = _executor(s3_store).write_manifest(square, [1, 2, 3])
    blank.write_text(manifest_key(0), lines[0] + "\n\n" + lines[2] + "\n")
    assert "line 1 of" in (run_child(blank, _env(0, 1)).error or "")
    assert "missing (blank)" in (read_result(blank, 1).error or "")


def test_malformed_manifest(s3_store: Store) -> None:
    job = _executor(s3_store).write_manifest(square, [1, 2])
    job.write_text(manifest_key(0), '{"index": 0, "fn": "swemill_testkit.executors:square"\n'
                   '{"index": 1, "item": {"data": 2}}\n')
    first, second = run_child(job, _env(0, 0)), run_child(job, _env(0, 1))
    assert first.exit_code == second.exit_code == 2
    assert first.error and "not JSON" in first.error
    assert second.error and "lacks index/fn/item" in second.error


def test_manifest_that_vanished(s3_store: Store) -> None:
    job = _executor(s3_store).write_manifest(square, [1, 2])
    job.delete(manifest_key(0))
    out = run_child(job, _env(0, 0))
    assert out.status == "bad_input" and out.error and "gone or unreadable" in out.error
    assert read_result(job, 0).ok is False


def test_input_object_that_vanished_is_a_recorded_failure(s3: LocalS3, s3_store: Store) -> None:
    s3_store.write_text("inputs/a.txt", "hello")
    s3_store.write_text("inputs/b.txt", "world")
    items = [{"root": s3_store.url, "key": f"inputs/{n}.txt",
              "storage_options": s3.storage_options} for n in "ab"]
    job = _executor(s3_store).write_manifest(read_object, items)
    s3_store.delete("inputs/b.txt")
    assert run_child(job, _env(0, 0)).status == "done"
    out = run_child(job, _env(0, 1))
    assert (out.status, out.exit_code) == ("failed", 0)  # the item failed; not retried
    assert out.error and out.error.startswith("StoreError") and "not found" in out.error
    assert read_result(job, 0).value == "hello"


def test_no_array_index_is_one_clear_error(s3_store: Store) -> None:
    job = _executor(s3_store).write_manifest(square, [1])
    with pytest.raises(BatchChildError, match="AWS_BATCH_JOB_ARRAY_INDEX is not set"):
        run_child(job, {})
    with pytest.raises(BatchChildError, match="not a whole number"):
        run_child(job, {"AWS_BATCH_JOB_ARRAY_INDEX": "x"})


def test_lambda_cannot_be_shipped(s3_store: Store) -> None:
    from swemill.core.errors import ConfigError

    with pytest.raises(ConfigError, match="module-level function"):
        _executor(s3_store).write_manifest(lambda x: x, [1])
