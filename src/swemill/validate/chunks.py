"""Candidate validation on an executor: one work item = one chunk of candidates.

:class:`ExecutorPool` is a drop-in for :class:`swemill.validate.pool.WorkerPool` in
``run_tasks``. It pulls candidates in strategy order, sends waves of chunks to the
executor (a chunk opens the repository's base sandbox and one warm worker, checks its
candidates with :func:`swemill.validate.check.check_candidate`, closes them), and keeps the
same contract: the counted result is the contiguous prefix of candidates up to the
``target``-th accepted one, so the same seed gives the same tasks on every executor.

A chunk pays a cold start (base sandbox + warm server), which the local thread pool pays
once per run; chunks of ``chunk_size`` candidates amortise it. Baselines at other commits
(pr-mirror) are measured once per chunk rather than once per run.

A chunk is a pydantic model, so it travels as JSON to machines that share nothing with the
submitter (AWS Batch). It names the run's source spec and the environment it validated
against; a worker that does not have that environment at its path builds it from the
source in its own cache (a container's cold start) and checks that it built the same one
(same key, same commit), so every worker judges candidates against the run's baseline.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import islice

from pydantic import BaseModel, ConfigDict

from swemill.core.errors import ConfigError, EnvBuildError, SourceError, ValidationError
from swemill.core.progress import Progress
from swemill.core.records import Baseline, Candidate
from swemill.executors import Executor, stage_executor
from swemill.repo.cache import cache_root
from swemill.repo.envbuild import RepoEnv, build_env
from swemill.repo.sources import require_portable, resolve_source
from swemill.sandbox import Limits
from swemill.store import Store
from swemill.validate.check import CheckContext, Checked, check_candidate
from swemill.validate.pool import StreamResult, WorkerPool
from swemill.validate.worker import Worker, open_base

__all__ = ["ValidateChunk", "ChunkResult", "validate_chunk", "ExecutorPool",
           "executor_for_tasks"]


class ValidateChunk(BaseModel):
    """Everything a remote worker needs to validate ``candidates`` (picklable, and JSON)."""

    model_config = ConfigDict(frozen=True)

    source: str
    """The run's source spec; a worker without ``env`` builds the environment from it."""
    env: RepoEnv
    head: str
    baseline: Baseline
    timeout_factor: float
    timeout_margin_s: float
    backend: str
    limits: Limits
    preimport: tuple[str, ...]
    candidates: tuple[Candidate, ...]
    head_image: bool = True
    repeat: int = 3
    near_misses: int = 2


class ChunkResult(BaseModel):
    """A chunk's verdicts in candidate order, and how long the worker took to get ready."""

    checked: list[Checked]
    env_ready_s: float = 0.0
    """Seconds to have the environment here (0 where it already was; a build otherwise)."""


def _env_here(chunk: ValidateChunk) -> RepoEnv:
    """The chunk's environment on this machine: where it was built, or rebuilt here."""
    if chunk.env.python.exists() and chunk.env.path.is_relative_to(cache_root()):
        return chunk.env  # this worker shares the submitter's cache (local, Ray on one host)
    try:
        env = build_env(resolve_source(chunk.source), recipe=chunk.env.recipe)
    except SourceError as exc:  # e.g. a git host or the package index unreachable from here
        raise EnvBuildError(f"worker cannot fetch {chunk.source!r}: {exc}") from exc
    if (env.key, env.commit) != (chunk.env.key, chunk.env.commit):
        raise EnvBuildError(
            f"worker built environment {env.key} at {env.commit[:12]} from {chunk.source!r}, "
            f"but the run validates against {chunk.env.key} at {chunk.env.commit[:12]}: the "
            "source changed or the worker image differs (Python version, swemill version)")
    return env


def validate_chunk(chunk: ValidateChunk) -> ChunkResult:
    """Validate a chunk on a fresh base sandbox and one warm worker; results in order."""
    start = time.monotonic()
    env = _env_here(chunk)
    env_ready_s = time.monotonic() - start
    ctx = CheckContext(chunk.baseline, chunk.head, chunk.timeout_factor, chunk.timeout_margin_s,
                       repeat=chunk.repeat, near_misses=chunk.near_misses)
    base = open_base(env, backend=chunk.backend, limits=chunk.limits)
    try:
        worker = Worker(env, base, chunk.head, chunk.preimport, image=chunk.head_image)
        try:
            out = []
            for cand in chunk.candidates:
                start = time.monotonic()
                checked = check_candidate(ctx, worker, cand)
                checked.wall_s = time.monotonic() - start
                out.append(checked)
            return ChunkResult(checked=out, env_ready_s=round(env_ready_s, 3))
        finally:
            worker.close()
    finally:
        base.close()


def executor_for_tasks(name: str, workers: int, store: Store, source: str) -> Executor:
    """The executor ``swemill tasks --executor NAME`` validates on (local validation runs on
    :class:`~swemill.validate.pool.WorkerPool`'s threads, not on an executor)."""
    if name == "local":
        raise ConfigError("tasks: the local executor validates on the worker pool itself")
    if name == "aws-batch":
        require_portable(source, "tasks")
    return stage_executor(name, workers=workers, store=store, job_name="swemill-tasks",
                          what="tasks: ")


class ExecutorPool(WorkerPool):
    """Validates candidate chunks on ``executor`` (``n`` chunks in flight per wave)."""

    def __init__(self, executor: Executor, env: RepoEnv, head: str, ctx: CheckContext, *,
                 n: int, backend: str, limits: Limits, source: str,
                 preimport: tuple[str, ...] = (), chunk_size: int = 4,
                 retries: int = 1, image: bool = True) -> None:
        super().__init__(env, head, ctx, n=n, backend=backend, limits=limits,
                         preimport=preimport, image=image)
        self.executor, self.chunk_size, self.retries = executor, chunk_size, retries
        self.source = source

    def _item(self, cands: list[Candidate]) -> ValidateChunk:
        return ValidateChunk(
            source=self.source, env=self.env, head=self.head, baseline=self.ctx.baseline,
            timeout_factor=self.ctx.timeout_factor, timeout_margin_s=self.ctx.timeout_margin_s,
            backend=self._backend, limits=self._limits, preimport=tuple(self._preimport),
            head_image=self.image, repeat=self.ctx.repeat, near_misses=self.ctx.near_misses,
            candidates=tuple(cands))

    def _wave(self, candidates: Iterator[Candidate], first: int
              ) -> list[tuple[int, list[Candidate]]]:
        wave, nxt = [], first
        for _ in range(self.n):
            chunk = list(islice(candidates, self.chunk_size))
            if not chunk:
                break
            wave.append((nxt, chunk))
            nxt += len(chunk)
        return wave

    def stream(self, candidates: Iterator[Candidate], target: int,
               progress: Progress | None = None) -> StreamResult:
        results: dict[int, Checked] = {}
        nxt = done_prefix = accepted_prefix = 0
        while accepted_prefix < target:
            wave = self._wave(candidates, nxt)
            if not wave:
                break
            nxt = wave[-1][0] + len(wave[-1][1])
            outs = self.executor.map(validate_chunk, [self._item(c) for _, c in wave],
                                     retries=self.retries)
            for (start, _), res in zip(wave, outs, strict=True):
                if not res.ok:
                    raise ValidationError(
                        f"validating candidates {start}.. on {self.executor.name} failed "
                        f"after {res.attempts} attempt(s): {res.error}")
                for k, checked in enumerate(res.value.checked if res.value else []):
                    results[start + k] = checked
            while done_prefix in results and accepted_prefix < target:
                accepted_prefix += results[done_prefix].verdict.accepted
                done_prefix += 1
            if progress is not None:
                progress(f"{accepted_prefix} accepted", done_prefix, 0)
        return StreamResult([results[i] for i in range(done_prefix)],
                            len(results) - done_prefix)

    @property
    def restarts(self) -> int:
        return 0

    def close(self) -> None:
        """Nothing is held between waves: every chunk closed its own sandboxes."""


