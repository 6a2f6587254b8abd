"""Fakes for testing executors: work functions importable by name (as remote backends
need) and :class:`LocalBatchClient`, an AWS Batch client whose containers run here.

The work functions take plain-JSON items so the same calls run on every backend, AWS Batch
included.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from swemill.executors.executor import TransientError
from swemill.store import Store

__all__ = ["square", "fail_if_negative", "crash_once", "transient_once", "read_object",
           "crash_always", "LocalBatchClient"]


def square(x: int) -> int:
    return x * x


def fail_if_negative(x: int) -> int:
    if x < 0:
        raise ValueError(f"negative input {x}")
    return x * x


def _first_time(marker: str) -> bool:
    """True exactly once per marker path (creation is atomic with O_EXCL)."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def crash_once(item: dict[str, Any]) -> Any:
    """The first call kills its own process (SIGKILL, like the OOM killer); later calls work."""
    if _first_time(item["marker"]):
        os.kill(os.getpid(), signal.SIGKILL)
    return item["value"]


def crash_always(item: dict[str, Any]) -> Any:
    os.kill(os.getpid(), signal.SIGKILL)
    return item["value"]  # not reached


def transient_once(item: dict[str, Any]) -> Any:
    """The first call raises a transient error; later calls return the value."""
    if _first_time(item["marker"]):
        raise TransientError(f"transient failure (marker {Path(item['marker']).name})")
    return item["value"]


def read_object(item: dict[str, Any]) -> str:
    """Read one object from a store (a vanished object is a StoreError, not retried)."""
    store = Store(item["root"], storage_options=item.get("storage_options"))
    return store.read_text(item["key"])


class LocalBatchClient:
    """A Batch client for tests: jobs go to ``client`` (moto's Batch, which checks the
    request against the API), and each submitted job's children then run here, as the
    service would run its containers: one ``swemill aws batch-child`` process per array
    index, with the job's environment overrides, ``AWS_BATCH_JOB_ARRAY_INDEX`` and
    ``AWS_BATCH_JOB_ATTEMPT`` set, retried per the job's retry strategy (exit 2 ends a
    child's attempts). ``describe_jobs`` answers from those runs: ``SUCCEEDED`` when every
    child's last attempt exited 0, else ``FAILED``. ``env`` is added to every child's
    environment (the store's endpoint and keys, the cache a container would have)."""

    def __init__(self, client: Any, env: Mapping[str, str] | None = None, *,
                 workers: int = 2, timeout_s: float = 900.0) -> None:
        self.client, self.env, self.workers, self.timeout_s = client, dict(env or {}), \
            workers, timeout_s
        self.status: dict[str, str] = {}
        self.children: dict[str, list[tuple[int, int, int]]] = {}
        """job id -> (array index, attempt, exit code) of every child process run."""
        self._lock = threading.Lock()

    def submit_job(self, **args: Any) -> dict[str, Any]:
        reply = self.client.submit_job(**args)
        job_id = reply["jobId"]
        size = int(args.get("arrayProperties", {}).get("size", 0))
        attempts = int(args.get("retryStrategy", {}).get("attempts", 1))
        overrides = args.get("containerOverrides", {})
        env = {e["name"]: e["value"] for e in overrides.get("environment", [])}
        command = list(overrides.get("command") or ["swemill", "aws", "batch-child"])
        if command[0] == "swemill":  # the image's entry point, as this interpreter runs it
            command = [sys.executable, "-m", "swemill", *command[1:]]
        indices = list(range(size)) if size else [None]
        with ThreadPoolExecutor(max(1, self.workers)) as pool:
            codes = list(pool.map(lambda i: self._child(job_id, command, env, i, attempts),
                                  indices))
        with self._lock:
            self.status[job_id] = "SUCCEEDED" if all(c == 0 for c in codes) else "FAILED"
        return reply

    def _child(self, job_id: str, command: list[str], env: dict[str, str], index: int | None,
               attempts: int) -> int:
        code = 1
        for attempt in range(1, attempts + 1):
            child_env = {**os.environ, **self.env, **env, "AWS_BATCH_JOB_ID": job_id,
                         "AWS_BATCH_JOB_ATTEMPT": str(attempt)}
            if index is not None:
                child_env["AWS_BATCH_JOB_ARRAY_INDEX"] = str(index)
            proc = subprocess.run(command, env=child_env, capture_output=True, text=True,
                                  timeout=self.timeout_s)
            code = proc.returncode
            with self._lock:
                self.children.setdefault(job_id, []).append((index or 0, attempt, code))
            if code in (0, 2):
                break
        return code

    def describe_jobs(self, jobs: list[str]) -> dict[str, Any]:
        with self._lock:
            return {"jobs": [{"jobId": j, "status": self.status.get(j, "SUBMITTED")}
                             for j in jobs]}
