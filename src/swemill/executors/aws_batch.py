"""AWS Batch array jobs: the manifest on S3, one child per line, one result object per item.

Layout under the job's folder (a store root, normally ``<root>/batch/<job>``)::

    job.json                      fn, total, chunk size, attempts
    manifest-<start>.jsonl        one line per item: {"index", "fn", "item"} (<= 10,000 lines)
    results/<index>.json          written once per item by ``swemill aws batch-child``

Each chunk of up to ``max_array`` items is one array job (AWS caps an array at 10,000
children; a chunk of one item is a plain job, since an array needs two). The child finds its
line from ``AWS_BATCH_JOB_ARRAY_INDEX`` plus the chunk's start. The job's retry strategy
exits at once on code 2 (bad input: retrying cannot help) and retries anything else, Spot
reclaims included; a result that exists and is final is never redone.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from swemill.core.errors import ConfigError, MissingDependency, StoreError
from swemill.executors.codec import decode, encode, fn_ref
from swemill.executors.executor import ItemResult, check_retries, log_map
from swemill.store import Store

__all__ = [
    "AwsBatchExecutor",
    "BatchSubmission",
    "MAX_ARRAY",
    "BAD_INPUT_EXIT",
    "chunk_plan",
    "manifest_key",
    "result_key",
    "JOB_KEY",
    "QUEUE_ENV",
    "DEFINITION_ENV",
]

MAX_ARRAY = 10_000
BAD_INPUT_EXIT = 2
JOB_KEY = "job.json"
QUEUE_ENV = "SWEMILL_BATCH_JOB_QUEUE"
DEFINITION_ENV = "SWEMILL_BATCH_JOB_DEFINITION"
POLL_ENV = "SWEMILL_BATCH_POLL_SECONDS"
_DONE = {"SUCCEEDED", "FAILED"}


def manifest_key(start: int) -> str:
    return f"manifest-{start:08d}.jsonl"


def result_key(index: int) -> str:
    return f"results/{index:08d}.json"


def chunk_plan(total: int, max_array: int = MAX_ARRAY) -> list[tuple[int, int]]:
    """``(start, size)`` of each job: ``chunk_plan(25_000) == [(0, 10000), (10000, 10000),
    (20000, 5000)]``."""
    if not 2 <= max_array <= MAX_ARRAY:
        raise ConfigError(f"an array job holds 2..{MAX_ARRAY} children, not {max_array}")
    return [(s, min(max_array, total - s)) for s in range(0, total, max_array)]


@dataclass(slots=True)
class BatchSubmission:
    """What was submitted: the job folder and one (start, size, job id) per chunk."""

    root: str
    total: int
    jobs: list[tuple[int, int, str]] = field(default_factory=list)


class AwsBatchExecutor:
    """Submit items as array jobs to ``job_queue`` with ``job_definition`` and wait for them.

    ``store`` is where the job folders go (``batch/<job_name>-<token>/`` under it); the worker
    image must reach it and import the work function by name.
    """

    name = "aws-batch"

    def __init__(self, store: Store, *, job_queue: str, job_definition: str,
                 job_name: str = "swemill", client: Any = None, max_array: int = MAX_ARRAY,
                 poll_seconds: float = 30.0, timeout_seconds: float | None = None) -> None:
        if not job_queue or not job_definition:
            raise ConfigError("the aws-batch executor needs a job queue and a job definition")
        chunk_plan(0, max_array)  # validates max_array now, not at submit time
        self.store, self.job_queue, self.job_definition = store, job_queue, job_definition
        self.job_name, self.max_array = job_name, max_array
        self.poll_seconds, self.timeout_seconds = poll_seconds, timeout_seconds
        self._client = client

    @classmethod
    def from_env(cls, store: Store, *, job_name: str = "swemill", client: Any = None,
                 env: Mapping[str, str] | None = None) -> AwsBatchExecutor:
        """The executor ``--executor aws-batch`` uses: the queue and the job definition come
        from ``SWEMILL_BATCH_JOB_QUEUE`` and ``SWEMILL_BATCH_JOB_DEFINITION`` (the stack's
        ``JobQueue`` and ``JobDefinition`` outputs), the poll interval from
        ``SWEMILL_BATCH_POLL_SECONDS`` (default 30)."""
        env = os.environ if env is None else env
        queue, definition = env.get(QUEUE_ENV, ""), env.get(DEFINITION_ENV, "")
        if not queue or not definition:
            raise ConfigError(f"--executor aws-batch needs {QUEUE_ENV} and {DEFINITION_ENV} set "
                              "(the stack's JobQueue and JobDefinition outputs)")
        if store.is_local:
            raise ConfigError(f"--executor aws-batch: Batch containers cannot see the folder "
                              f"{store.url}; write the run to an s3:// root (--out)")
        try:
            poll = float(env.get(POLL_ENV) or 30.0)
        except ValueError as exc:
            raise ConfigError(f"{POLL_ENV}={env.get(POLL_ENV)!r} is not a number") from exc
        return cls(store, job_queue=queue, job_definition=definition, job_name=job_name,
                   client=client, poll_seconds=poll)

    @classmethod
    def for_stage(cls, *, workers: int, store: Store, job_name: str) -> AwsBatchExecutor:
        """:meth:`from_env`: the queue sets the parallelism, not ``workers``."""
        return cls.from_env(store, job_name=job_name)

    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                import boto3
            except ImportError as exc:
                raise MissingDependency("aws-batch needs boto3: install 'swemill[aws]'") from exc
            self._client = boto3.client("batch")
        return self._client

    def map(
        self, fn: Callable[[Any], Any], items: Sequence[Any], *, retries: int = 2
    ) -> list[ItemResult[Any]]:
        start = time.monotonic()
        submission = self.submit(fn, items, retries=retries)
        self.wait(submission)
        results = self.collect(submission)
        log_map(f"{self.name} {submission.root}", fn, results, time.monotonic() - start)
        return results

    def write_manifest(self, fn: Callable[[Any], Any], items: Sequence[Any], *,
                       retries: int = 2) -> Store:
        """Write ``job.json`` and the chunk manifests to a new job folder; returns it."""
        check_retries(retries)
        ref = fn_ref(fn)
        job_id = f"{self.job_name}-{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
        job = Store(self.store.url_for(f"batch/{job_id}"),
                    storage_options=self.store.storage_options)
        lines = [{"index": i, "fn": ref, "item": encode(item)} for i, item in enumerate(items)]
        for start, size in chunk_plan(len(items), self.max_array):
            job.write_jsonl(manifest_key(start), lines[start:start + size])
        job.write_json(JOB_KEY, {"fn": ref, "total": len(items), "max_array": self.max_array,
                                 "attempts": retries + 1})
        return job

    def submit(self, fn: Callable[[Any], Any], items: Sequence[Any], *,
               retries: int = 2) -> BatchSubmission:
        job = self.write_manifest(fn, items, retries=retries)
        submission = BatchSubmission(job.url, len(items))
        for start, size in chunk_plan(len(items), self.max_array):
            env = [{"name": "SWEMILL_BATCH_ROOT", "value": job.url},
                   {"name": "SWEMILL_BATCH_START", "value": str(start)}]
            if size == 1:  # an array needs two children; a lone item is a plain job
                env.append({"name": "SWEMILL_BATCH_INDEX", "value": "0"})
            args: dict[str, Any] = {
                "jobName": f"{self.job_name}-{start:08d}",
                "jobQueue": self.job_queue,
                "jobDefinition": self.job_definition,
                "containerOverrides": {
                    "command": ["swemill", "aws", "batch-child"], "environment": env},
                "retryStrategy": {"attempts": retries + 1, "evaluateOnExit": [
                    {"onExitCode": str(BAD_INPUT_EXIT), "action": "EXIT"},
                    {"onReason": "*", "action": "RETRY"}]},
                "tags": {"swemill:job": job.url},
            }
            if size > 1:
                args["arrayProperties"] = {"size": size}
            reply = self.client.submit_job(**args)
            submission.jobs.append((start, size, reply["jobId"]))
        return submission

    def wait(self, submission: BatchSubmission) -> dict[str, str]:
        """Poll until every job has SUCCEEDED or FAILED; returns job id -> status."""
        deadline = None if self.timeout_seconds is None else time.monotonic() + self.timeout_seconds
        ids = [job_id for _, _, job_id in submission.jobs]
        while True:
            status = {}
            for n in range(0, len(ids), 100):  # DescribeJobs takes 100 ids at most
                for job in self.client.describe_jobs(jobs=ids[n:n + 100])["jobs"]:
                    status[job["jobId"]] = job["status"]
            if all(status.get(i) in _DONE for i in ids):
                return status
            if deadline is not None and time.monotonic() > deadline:
                raise StoreError(f"batch jobs {ids} did not finish in {self.timeout_seconds}s")
            time.sleep(self.poll_seconds)

    def collect(self, submission: BatchSubmission) -> list[ItemResult[Any]]:
        """One result per item; an item whose child never wrote one is a recorded failure."""
        job = Store(submission.root, storage_options=self.store.storage_options)
        return [read_result(job, i) for i in range(submission.total)]


def read_result(job: Store, index: int) -> ItemResult[Any]:
    key = result_key(index)
    if not job.exists(key):
        return ItemResult(index, False, None, "no result: the child never finished", False, 0)
    raw = job.read_json(key)
    value = decode(raw["value"]) if raw.get("ok") else None
    return ItemResult(index, bool(raw.get("ok")), value, raw.get("error"),
                      bool(raw.get("transient")), int(raw.get("attempts", 1)),
                      float(raw.get("seconds", 0.0)), dict(raw.get("timings", {})))
