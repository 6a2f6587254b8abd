"""Validate a stream of candidates on parallel workers, deterministically.

Candidates are numbered in the order the strategy yields them. Workers take them as they
come, but the result is decided by that order alone: validation stops once the contiguous
prefix of finished candidates holds ``target`` accepted ones, and only that prefix counts.
So the same seed gives the same tasks however many workers run and however they race.

A candidate whose base commit declares other dependencies than the head runs in that commit's
environment (:class:`~swemill.repo.commitenv.CommitEnvs`): each such environment gets its own
base sandbox (a clone at that commit) and up to ``n`` workers, made when first needed.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from swemill.core.progress import Progress
from swemill.core.records import Candidate
from swemill.repo.commitenv import CommitEnvs
from swemill.repo.envbuild import RepoEnv
from swemill.sandbox import Limits
from swemill.sandbox.contract import Sandbox
from swemill.validate.check import CheckContext, Checked, check_candidate
from swemill.validate.shadow import Shadow
from swemill.validate.warm import Flags
from swemill.validate.worker import Worker, open_base

__all__ = ["WorkerPool", "StreamResult"]



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
                 limits: Limits, preimport: tuple[str, ...] = (), image: bool = True,
                 flags: Flags | None = None, shadow_every: int = 50,
                 envs: CommitEnvs | None = None) -> None:
        self.env, self.head, self.ctx, self.n = env, head, ctx, n
        self.image, self.flags = image, flags
        self.envs = envs
        self.shadow = Shadow(shadow_every)
        """Shared by the workers: head-image runs checked cold (see :mod:`.shadow`)."""
        self._backend, self._limits, self._preimport = backend, limits, preimport
        self._base: Sandbox | None = None
        self._workers: list[Worker] = []
        self._free: queue.Queue[Worker] = queue.Queue()
        self._others: dict[str, _Crew] = {}
        """Workers of the other commits' environments, by environment key."""
        self._lock = threading.Lock()
        self._exec: ThreadPoolExecutor | None = None
        self._closed_cpu = 0.0
        self._closed_image: dict[str, object] = {}

    def _start(self) -> ThreadPoolExecutor:
        if self._exec is None:
            self._base = open_base(self.env, backend=self._backend, limits=self._limits)
            for _ in range(self.n):
                w = Worker(self.env, self._base, self.head, self._preimport,
                           prewarm_s=self.ctx.timeout(self.ctx.baseline, None), image=self.image,
                           flags=self.flags, shadow=self.shadow)
                self._workers.append(w)
                self._free.put(w)
            self._exec = ThreadPoolExecutor(self.n, thread_name_prefix="swemill-validate")
        return self._exec

    def _one(self, cand: Candidate) -> Checked:
        start = time.monotonic()
        commit = str(cand.metadata.get("base_commit") or self.head)
        env = self.envs.for_commit(commit) if self.envs is not None else self.env
        free = self._free if env.key == self.env.key else self._crew(env).take()
        worker = free.get()
        try:
            checked = check_candidate(self.ctx, worker, cand)
        finally:
            free.put(worker)
        checked.wall_s = time.monotonic() - start
        return checked

    def _crew(self, env: RepoEnv) -> _Crew:
        with self._lock:
            crew = self._others.get(env.key)
            if crew is None:
                crew = self._others[env.key] = _Crew(self, env)
            return crew

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
                if self.envs is not None:  # in candidate order: the same commits get envs
                    self.envs.admit(str(cand.metadata.get("base_commit") or self.head))
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
                progress(f"{accepted_prefix} accepted", done_prefix, 0)
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
        """Runs served by the workers' head images, the others' reasons (by count), the
        runs that went to a fresh interpreter (``cold``), the tree images' runs, starts and
        refusals, and the shadow checks."""
        if not self._workers:
            return self._closed_image
        fallbacks: Counter[str] = Counter()
        images = [w.image for w in self._workers if w.image is not None]
        for image in images:
            fallbacks.update(image.fallbacks)
        errors = sorted({image.error for image in images if image.error})
        trees = [w.tree for w in self._workers if w.tree is not None]
        tree_fallbacks: Counter[str] = Counter()
        for tree in trees:
            tree_fallbacks.update(tree.fallbacks)
        return {"served": sum(image.runs for image in images),
                "fallbacks": dict(sorted(fallbacks.items())), "errors": errors,
                "cold": sum(w.cold_runs for w in self._workers),
                "tree": {"served": sum(t.runs for t in trees),
                         "starts": sum(t.starts for t in trees),
                         "fallbacks": dict(sorted(tree_fallbacks.items()))},
                "shadow": self.shadow.stats.to_dict()}

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
        for sb in [self._base, *(c.base for c in self._others.values())]:
            if sb is not None:
                sb.close()
        self._base = None
        self._others.clear()


class _Crew:
    """The workers of one other commit's environment: a base sandbox (the clone at that
    commit) and forks of it, made one by one while every existing one is busy, at most the
    pool's ``n``. Their head is the clone's commit and they keep no head image (the image
    serves the head commit's coverage-selected runs only)."""

    def __init__(self, pool: WorkerPool, env: RepoEnv) -> None:
        self.pool, self.env = pool, env
        self.base: Sandbox | None = None
        self.free: queue.Queue[Worker] = queue.Queue()
        self.made = 0

    def take(self) -> queue.Queue[Worker]:
        """The queue to take a worker from, with one more worker in it if all are busy."""
        pool = self.pool
        with pool._lock:
            if not self.free.empty() or self.made >= pool.n:
                return self.free
            self.made += 1
            if self.base is None:
                self.base = open_base(self.env, backend=pool._backend, limits=pool._limits)
            worker = Worker(self.env, self.base, self.env.commit, pool._preimport,
                            prewarm_s=pool.ctx.timeout(pool.ctx.baseline, None), image=False,
                            flags=pool.flags)
            pool._workers.append(worker)
        self.free.put(worker)
        return self.free
