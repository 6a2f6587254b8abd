"""``--executor aws-batch`` for validation and rollouts, end to end on this machine.

The submitter writes its manifests to the local S3 server and submits to moto's Batch; the
children run here as the service would run its containers (``LocalBatchClient``: one
``swemill aws batch-child`` process per index, the job's environment, its retry strategy).
The children get a cache of their own, as a fresh container has: they build the sample's
environment from its source spec and check it is the one the run validated against.
The runs must equal the local executor's, task for task and trajectory for trajectory.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import pytest

from swemill.agent.rollout import run_rollouts
from swemill.agent.rollout_config import RolloutConfig
from swemill.core.records import Golden, Task
from swemill.executors.aws_batch import DEFINITION_ENV, QUEUE_ENV, AwsBatchExecutor
from swemill.store import Store
from swemill.store.layout import snapshot_key
from swemill.validate.tasks_config import TasksConfig
from swemill.validate.validator import run_tasks
from swemill_testkit.executors import LocalBatchClient
from swemill_testkit.store import LocalS3

from .conftest import batch_queue

SETTINGS = {QUEUE_ENV: "swemill-stages", DEFINITION_ENV: "swemill-stages-worker"}


@pytest.fixture(scope="module")
def batch(s3: LocalS3) -> Any:
    return batch_queue(s3, "swemill-stages")


@pytest.fixture(scope="module")
def container_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cache the 'containers' have: not the submitter's, so they build their own env."""
    return tmp_path_factory.mktemp("container-cache")


def _executor(store: Store, batch: Any, s3: LocalS3, cache: Path) -> AwsBatchExecutor:
    client = LocalBatchClient(batch, {**s3.env(), "SWEMILL_CACHE": str(cache)}, workers=2)
    ex = AwsBatchExecutor.from_env(store, job_name="swemill-test", client=client,
                                   env={**SETTINGS, "SWEMILL_BATCH_POLL_SECONDS": "0.05"})
    ex.timeout_seconds = 60
    return ex


def _members(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: (tar.extractfile(m).read() if m.isfile() else b"")  # type: ignore[union-attr]
                for m in tar.getmembers() if not m.name.removeprefix("./").startswith(".git")}


def _written(store: Store, run_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                 dict[str, Any]]:
    tasks = sorted((t.model_dump(mode="json", exclude={"created_at"})
                    for t in store.read_records("tasks", run_id, Task)),
                   key=lambda t: t["instance_id"])
    for t in tasks:  # the snapshot archive's .git differs between any two runs
        t["metadata"].pop("snapshot_sha256", None)
    goldens = sorted((g.model_dump(mode="json") for g in store.read_records("golden", run_id,
                                                                             Golden)),
                     key=lambda g: g["instance_id"])
    snaps = {t["instance_id"]: _members(store.get_bytes(snapshot_key(run_id, t["instance_id"])))
             for t in tasks}
    return tasks, goldens, snaps


pytestmark = [pytest.mark.slow, pytest.mark.network]


def test_tasks_on_batch_equal_local_and_children_build_their_env(
        tmp_path: Path, shared_cache: Path, container_cache: Path, s3: LocalS3, s3_store: Store,
        batch: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEMILL_CACHE", str(shared_cache))
    config = TasksConfig(max_tasks=2, workers=2, seed=3, strategies=["procedural"], audit=0)
    local = Store(str(tmp_path / "local"))
    want = run_tasks("sample", local, "t1", config)
    ex = _executor(s3_store, batch, s3, container_cache)
    got = run_tasks("sample", s3_store, "t1", config.model_copy(update={"executor": "aws-batch"}),
                    executor=ex)
    assert want.tasks == 2 and got.tasks == want.tasks
    assert _written(s3_store, "t1") == _written(local, "t1")
    # every chunk went through a child process, each of which wrote one final result
    client: LocalBatchClient = ex.client
    runs = [c for per_job in client.children.values() for c in per_job]
    assert runs and all(code == 0 for _, _, code in runs)
    results = [r for job in s3_store.list_keys("batch")
               for r in s3_store.list_keys(f"batch/{job}/results")]
    assert len(results) == len(runs)
    # the containers built the sample's environment in their own cache
    assert any((container_cache / "envs").iterdir())


def test_rollouts_on_batch_equal_local(tmp_path: Path, shared_cache: Path, container_cache: Path,
                                       s3: LocalS3, s3_store: Store, batch: Any,
                                       monkeypatch: pytest.MonkeyPatch,
                                       same_rollouts: Any) -> None:
    monkeypatch.setenv("SWEMILL_CACHE", str(shared_cache))
    local = Store(str(tmp_path / "local"))
    run_tasks("sample", local, "t1", TasksConfig(max_tasks=2, workers=2, seed=0,
                                                 strategies=["procedural"], audit=0))
    s3_store.fs.put(str(tmp_path / "local") + "/", s3_store.root + "/", recursive=True)
    config = RolloutConfig(policy="oracle,noisy-oracle:0.5", samples=2, workers=2)
    want = run_rollouts(local, "t1", config, run_id="ro")
    got = run_rollouts(s3_store, "t1", config.model_copy(update={"executor": "aws-batch"}),
                       run_id="ro", executor=_executor(s3_store, batch, s3, container_cache))
    same_rollouts(local, want, s3_store, got, "ro")
    # nothing of this machine went into the manifests: no store keys, no cache path
    manifests = [f"batch/{job}/{name}" for job in s3_store.list_keys("batch")
                 for name in s3_store.list_keys(f"batch/{job}") if name.startswith("manifest-")]
    assert manifests
    for key in manifests:
        text = s3_store.read_text(key)
        assert s3.env()["AWS_SECRET_ACCESS_KEY"] not in text and str(shared_cache) not in text
