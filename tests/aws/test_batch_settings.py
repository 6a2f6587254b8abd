"""``--executor aws-batch`` refuses what cannot work, in one line, before any work starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from swemill.agent.shards import executor_for_rollouts
from swemill.core.errors import ConfigError
from swemill.core.records import Task
from swemill.executors.aws_batch import DEFINITION_ENV, QUEUE_ENV, AwsBatchExecutor
from swemill.repo.sources import is_portable
from swemill.store import Store
from swemill.validate.chunks import executor_for_tasks

SETTINGS = {QUEUE_ENV: "q", DEFINITION_ENV: "d"}


def _swemill(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in (QUEUE_ENV, DEFINITION_ENV)}
    return subprocess.run([sys.executable, "-m", "swemill", *args], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path,
                          env={**base, "SWEMILL_CACHE": str(tmp_path / "cache"), **env})


def _one_line(proc: subprocess.CompletedProcess[str], needle: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], proc.stderr


def test_portable_sources() -> None:
    assert all(is_portable(s) for s in ("sample", "pypi:toolz==1.0.0",
                                        "https://github.com/o/r", "git@github.com:o/r.git"))
    assert not any(is_portable(s) for s in ("/srv/repo", "./repo", "file:///srv/repo.git"))


def test_settings_come_from_the_environment(tmp_path: Path) -> None:
    remote = Store("s3://bucket/root")
    ex = AwsBatchExecutor.from_env(remote, env={**SETTINGS, "SWEMILL_BATCH_POLL_SECONDS": "2"})
    assert (ex.job_queue, ex.job_definition, ex.poll_seconds) == ("q", "d", 2.0)
    with pytest.raises(ConfigError, match=QUEUE_ENV):
        AwsBatchExecutor.from_env(remote, env={DEFINITION_ENV: "d"})
    with pytest.raises(ConfigError, match="s3:// root"):
        AwsBatchExecutor.from_env(Store(str(tmp_path)), env=SETTINGS)
    with pytest.raises(ConfigError, match="not a number"):
        AwsBatchExecutor.from_env(remote, env={**SETTINGS, "SWEMILL_BATCH_POLL_SECONDS": "x"})


def test_local_sources_cannot_go_to_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in SETTINGS.items():
        monkeypatch.setenv(key, value)
    remote = Store("s3://bucket/root")
    with pytest.raises(ConfigError, match="cannot fetch '/srv/repo'"):
        executor_for_tasks("aws-batch", 2, remote, "/srv/repo")
    assert executor_for_tasks("aws-batch", 2, remote, "sample").name == "aws-batch"
    task = Task.model_construct(instance_id="x", metadata={"source": "/srv/repo"})
    with pytest.raises(ConfigError, match="rollouts.*cannot fetch '/srv/repo'"):
        executor_for_rollouts("aws-batch", 2, remote, [task])


def test_tasks_cli_without_settings_is_one_line_before_any_work(tmp_path: Path) -> None:
    proc = _swemill(tmp_path, "tasks", "sample", "--out", str(tmp_path / "out"),
                    "--executor", "aws-batch")
    _one_line(proc, QUEUE_ENV)
    assert not (tmp_path / "cache").exists()  # nothing was resolved or built


def test_tasks_cli_to_a_local_folder_is_one_line(tmp_path: Path) -> None:
    proc = _swemill(tmp_path, "tasks", "sample", "--out", str(tmp_path / "out"),
                    "--executor", "aws-batch", **SETTINGS)
    _one_line(proc, "s3:// root")


def test_unknown_executor_is_one_line(tmp_path: Path) -> None:
    proc = _swemill(tmp_path, "tasks", "sample", "--out", str(tmp_path / "out"),
                    "--executor", "k8s")
    _one_line(proc, "local, ray or aws-batch")


def test_build_on_batch_to_a_local_folder_is_one_line_and_starts_no_run(tmp_path: Path) -> None:
    proc = _swemill(tmp_path, "build", "sample", "--out", str(tmp_path / "out"),
                    "--executor", "aws-batch", **SETTINGS)
    _one_line(proc, "s3:// root")
    assert not (tmp_path / "out" / "manifests").exists()
