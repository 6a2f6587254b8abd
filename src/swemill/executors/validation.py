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
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice

from swemill.core.errors import ConfigError, ValidationError
from swemill.core.records import Baseline, Candidate
from swemill.executors.base import Executor
from swemill.repo.envbuild import RepoEnv
from swemill.sandbox import Limits
from swemill.validate.check import CheckContext, Checked, check_candidate
from swemill.validate.pool import Progress, StreamResult, WorkerPool
from swemill.validate.worker import Worker, open_base

__all__ = ["ValidateChunk", "validate_chunk", "ExecutorPool", "executor_for_tasks"]


@dataclass(frozen=True, slots=True)
class ValidateChunk:
    """Everything a remote worker needs to validate ``candidates`` (all picklable)."""

    env: RepoEnv
    head: str
    baseline: Baseline
    timeout_factor: float
    timeout_margin_s: float
    backend: str
    limits: Limits
    preimport: tuple[str, ...]
    candidates: tuple[Candidate, ...]


def validate_chunk(chunk: ValidateChunk) -> list[Checked]:
    """Validate a chunk on a fresh base sandbox and one warm worker; results in order."""
    ctx = CheckContext(chunk.baseline, chunk.head, chunk.timeout_factor, chunk.timeout_margin_s)
    base = open_base(chunk.env, backend=chunk.backend, limits=chunk.limits)
    try:
        worker = Worker(chunk.env, base, chunk.head, chunk.preimport)
        try:
            out = []
            for cand in chunk.candidates:
                start = time.monotonic()
                checked = check_candidate(ctx, worker, cand)
                checked.wall_s = time.monotonic() - start
                out.append(checked)
            return out
        finally:
            worker.close()
    finally:
        base.close()


def executor_for_tasks(name: str, workers: int) -> Executor:
    """The executor ``swemill tasks --executor NAME`` validates on."""
    if name == "ray":
        from swemill.executors.ray_tasks import RayExecutor

        return RayExecutor(init_cpus=workers)
    if name == "aws-batch":
        raise ConfigError(
            "tasks: the aws-batch executor cannot validate candidates yet (a chunk carries "
            "the local environment build); use local or ray"
        )
    raise ConfigError(f"tasks: unknown executor {name!r}; choose local or ray")


class ExecutorPool(WorkerPool):
    """Validates candidate chunks on ``executor`` (``n`` chunks in flight per wave)."""

    def __init__(self, executor: Executor, env: RepoEnv, head: str, ctx: CheckContext, *,
                 n: int, backend: str, limits: Limits, preimport: tuple[str, ...] = (),
                 chunk_size: int = 4, retries: int = 1) -> None:
        super().__init__(env, head, ctx, n=n, backend=backend, limits=limits,
                         preimport=preimport)
        self.executor, self.chunk_size, self.retries = executor, chunk_size, retries

    def _item(self, cands: list[Candidate]) -> ValidateChunk:
        return ValidateChunk(self.env, self.head, self.ctx.baseline, self.ctx.timeout_factor,
                             self.ctx.timeout_margin_s, self._backend, self._limits,
                             tuple(self._preimport), tuple(cands))

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
                for k, checked in enumerate(res.value or []):
                    results[start + k] = checked
            while done_prefix in results and accepted_prefix < target:
                accepted_prefix += results[done_prefix].verdict.accepted
                done_prefix += 1
            if progress is not None:
                progress(done_prefix, accepted_prefix)
        return StreamResult([results[i] for i in range(done_prefix)],
                            len(results) - done_prefix)

    @property
    def restarts(self) -> int:
        return 0

    def close(self) -> None:
        """Nothing is held between waves: every chunk closed its own sandboxes."""


