"""Validate a stream of candidates on parallel workers, deterministically.

Candidates are numbered in the order the strategy yields them. Workers take them as they
come, but the result is decided by that order alone: validation stops once the contiguous
prefix of finished candidates holds ``target`` accepted ones, and only that prefix counts.
So the same seed gives the same tasks however many workers run and however they race.
"""

from __future__ import annotations

import queue
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from swemill.core.records import Candidate
from swemill.repo.envbuild import RepoEnv
from swemill.sandbox import Limits
from swemill.sandbox.base import Sandbox
from swemill.validate.check import CheckContext, Checked, check_candidate
from swemill.validate.worker import Worker, open_base

__all__ = ["WorkerPool", "StreamResult"]

Progress = Callable[[int, int], None]


@dataclass(slots=True)
class StreamResult:
    checked: list[Checked] = field(default_factory=list)
    """Every candidate of the counted prefix, in candidate order."""
    extra: int = 0
    """Candidates validated past the prefix (their results are not counted)."""

    @property
    def accepted(self) -> list[Checked]:
        return [c for c in self.checked if c.verdict.accepted]


class WorkerPool:
    """``n`` workers, each a fork of one base sandbox with its own warm server."""

    def __init__(self, env: RepoEnv, head: str, ctx: CheckContext, *, n: int, backend: str,
                 limits: Limits, preimport: tuple[str, ...] = (), image: bool = True) -> None:
        self.env, self.head, self.ctx, self.n = env, head, ctx, n
        self.image = image
        self._backend, self._limits, self._preimport = backend, limits, preimport
        self._base: Sandbox | None = None
        self._workers: list[Worker] = []
        self._free: queue.Queue[Worker] = queue.Queue()
        self._exec: ThreadPoolExecutor | None = None
        self._closed_cpu = 0.0
        self._closed_image: dict[str, object] = {}

    def _start(self) -> ThreadPoolExecutor:
        if self._exec is None:
            self._base = open_base(self.env, backend=self._backend, limits=self._limits)
            for _ in range(self.n):
                w = Worker(self.env, self._base, self.head, self._preimport,
                           prewarm_s=self.ctx.timeout(self.ctx.baseline, None), image=self.image)
                self._workers.append(w)
                self._free.put(w)
            self._exec = ThreadPoolExecutor(self.n, thread_name_prefix="swemill-validate")
        return self._exec

    def _one(self, cand: Candidate) -> Checked:
        worker = self._free.get()
        start = time.monotonic()
        try:
            checked = check_candidate(self.ctx, worker, cand)
        finally:
            self._free.put(worker)
        checked.wall_s = time.monotonic() - start
        return checked

    def stream(self, candidates: Iterator[Candidate], target: int,
               progress: Progress | None = None) -> StreamResult:
        """Validate candidates until ``target`` are accepted (in candidate order) or none
        are left."""
        ex = self._start()
        results: dict[int, Checked] = {}
        pending: dict[Future[Checked], int] = {}
        nxt = 0
        done_prefix = 0
        accepted_prefix = 0
        exhausted = False
        while True:
            while not exhausted and accepted_prefix < target and len(pending) < 2 * self.n:
                cand = next(candidates, None)
                if cand is None:
                    exhausted = True
                    break
                pending[ex.submit(self._one, cand)] = nxt
                nxt += 1
            if not pending:
                break
            finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for fut in finished:
                results[pending.pop(fut)] = fut.result()
            while done_prefix in results and accepted_prefix < target:
                accepted_prefix += results[done_prefix].verdict.accepted
                done_prefix += 1
            if progress is not None:
                progress(done_prefix, accepted_prefix)
        prefix = [results[i] for i in range(done_prefix)]
        return StreamResult(prefix, len(results) - done_prefix)

    @property
    def cpu_s(self) -> float:
        """CPU seconds of every test process the workers ran (also for backends whose
        children the host's rusage cannot see, like bwrap's pid namespace)."""
        return sum(w.cpu_s for w in self._workers) or self._closed_cpu

    @property
    def restarts(self) -> int:
        return sum(w.restarts for w in self._workers)

    def image_stats(self) -> dict[str, object]:
        """Runs served by the workers' head images, the others' reasons (by count), and
        the runs that went to a fresh interpreter (``cold``)."""
        if not self._workers:
            return self._closed_image
        fallbacks: Counter[str] = Counter()
        for w in self._workers:
            fallbacks.update(w.image_fallbacks)
        errors = sorted({w.image_error for w in self._workers if w.image_error})
        return {"served": sum(w.image_runs for w in self._workers),
                "fallbacks": dict(sorted(fallbacks.items())), "errors": errors,
                "cold": sum(w.cold_runs for w in self._workers)}

    def close(self) -> None:
        if self._exec is not None:
            self._exec.shutdown(wait=False, cancel_futures=True)
            if self._free.qsize() < len(self._workers):
                # a stop mid-stream (an error, SIGTERM): killing the busy workers' servers
                # ends their checks now, not after their suites have run to the end
                for w in self._workers:
                    w.abort()
            self._exec.shutdown(wait=True)
            self._exec = None
        for w in self._workers:
            w.close()
        self._closed_cpu = self.cpu_s
        self._closed_image = self.image_stats()
        self._workers.clear()
        if self._base is not None:
            self._base.close()
            self._base = None
