"""A run's tasks and one prepared workspace per task, shared by every session of that task.

The first session of a task unpacks its scrubbed broken snapshot once (workspace + pristine
copy, :meth:`TaskEnv.reset`); that base environment never runs a command. Every session is a
copy-on-write fork of it (:meth:`TaskEnv.fork`, an overlay mount where the host allows one), so
a reset costs a fork, not an unpack, and sessions of one task share the frozen layers and the
pristine copy used for grading. Each base also keeps the task's warm grading servers
(:class:`~swemill.agent.warmgrade.WarmGrader`, the first started in the background as the base
is made), which every session of the task grades through. A session's commands run in one
long-lived sandbox of its own (:mod:`swemill.sandbox._runner`); the base never runs a command.

A session runner takes tens of milliseconds to start (bwrap and an interpreter), which a
session's first command would wait for (or pay a sandbox of its own for). So the pool keeps up
to ``spares`` *spare sessions* per task that has been reset at least once: forks whose runner
has already started, made in the background by one filler thread after each reset takes one.
A spare is a fresh fork that nothing has run in, handed to exactly one session; at most
``max_spares`` are kept in all (the oldest spare of another task is closed to make room), and
all are closed with the pool.

The pool reads the store through its policy view: ``golden/`` and ``candidates/`` are out of
its reach, so nothing golden can be served from here.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from swemill.agent.env import EnvConfig, EnvResolver, TaskEnv
from swemill.core.errors import SessionError, StoreError, SwemillError
from swemill.core.records import Task
from swemill.envs.schema import TaskCard
from swemill.store import Store

__all__ = ["EnvPool"]


class EnvPool:
    """Tasks by id, their prepared base environments, and the config every session uses."""

    def __init__(self, store: Store, tasks: Iterable[Task], config: EnvConfig | None = None,
                 *, resolver: EnvResolver | None = None, spares: int = 1,
                 max_spares: int = 16) -> None:
        if spares < 0 or max_spares < 0:
            raise SessionError("spare sessions cannot be negative")
        self.spares, self.max_spares = spares, max_spares
        self._spare: list[tuple[str, TaskEnv]] = []  # (task id, spare), oldest first
        self._spare_lock = threading.Lock()
        self._filler: ThreadPoolExecutor | None = None
        self.store = store.policy_view()
        self.config = config or EnvConfig(lint=False)
        self.resolver = resolver or EnvResolver(self.config.cache)
        self.tasks = {t.instance_id: t for t in sorted(tasks, key=lambda t: t.instance_id)}
        self._bases: dict[str, TaskEnv] = {}
        self._locks: dict[str, threading.Lock] = {t: threading.Lock() for t in self.tasks}
        self._closed = False

    @classmethod
    def of_run(cls, store: Store, run_id: str, config: EnvConfig | None = None, *,
               spares: int = 1, max_spares: int = 16) -> EnvPool:
        """Every task of ``tasks/run_id=<run_id>/`` in ``store``."""
        tasks = store.policy_view().read_records("tasks", run_id, Task)
        if not tasks:
            raise StoreError(f"run {run_id} in {store.url} has no tasks")
        return cls(store, tasks, config, spares=spares, max_spares=max_spares)

    def task(self, task_id: str) -> Task:
        try:
            return self.tasks[task_id]
        except KeyError:
            raise SessionError(f"unknown task {task_id!r}") from None

    def cards(self) -> list[TaskCard]:
        return [TaskCard(instance_id=t.instance_id, repo=t.repo,
                         n_fail_to_pass=len(t.FAIL_TO_PASS), n_pass_to_pass=len(t.PASS_TO_PASS))
                for t in self.tasks.values()]

    def base(self, task_id: str) -> TaskEnv:
        """The task's prepared environment, built by the first caller (others wait for it)."""
        task = self.task(task_id)
        with self._locks[task_id]:
            if self._closed:
                raise SessionError("the environment pool is closed")
            env = self._bases.get(task_id)
            if env is None:
                env = TaskEnv(self.config, store=self.store, resolver=self.resolver)
                env.reset(task)
                if self.config.warm_grading:
                    threading.Thread(target=env.use_warm_grading().prestart, daemon=True,
                                     name=f"grader-{task_id}").start()
                self._bases[task_id] = env
            return env

    def fork(self, task_id: str) -> TaskEnv:
        """A fresh session workspace: a spare one of the task if there is one (its session
        runner already started), else a new copy-on-write fork of the task's prepared one,
        whose runner (``config.session_runner``) starts in the background. Either way the
        task's spares are made up again in the background."""
        self.task(task_id)
        with self._spare_lock:
            at = next((i for i, (t, _) in enumerate(self._spare) if t == task_id), None)
            env = self._spare.pop(at)[1] if at is not None else None
            if self.spares and self.max_spares and not self._closed:
                if self._filler is None:
                    self._filler = ThreadPoolExecutor(max_workers=1,
                                                      thread_name_prefix="spare-sessions")
                self._filler.submit(self._refill, task_id)
        return env if env is not None else self._new_fork(task_id)

    def spare_count(self, task_id: str | None = None) -> int:
        """Spare sessions kept now (of ``task_id``, or of every task)."""
        with self._spare_lock:
            return self._spares_of(task_id)

    def _spares_of(self, task_id: str | None) -> int:
        return sum(1 for t, _ in self._spare if task_id is None or t == task_id)

    def _new_fork(self, task_id: str) -> TaskEnv:
        env = self.base(task_id).fork(track=False)
        if self.config.session_runner:
            env.sandbox.keep_warm()
        return env

    def _refill(self, task_id: str) -> None:
        """Make up ``task_id``'s spares (on the filler thread), making room among others'."""
        while True:
            with self._spare_lock:
                if self._closed or self._spares_of(task_id) >= self.spares:
                    return
            try:
                env = self._new_fork(task_id)
            except SwemillError:
                return  # the next reset forks for itself and says what failed
            if self.config.session_runner:
                env.sandbox.keep_warm(wait=True)
            evicted: list[TaskEnv] = []
            with self._spare_lock:
                if self._closed:
                    evicted.append(env)
                else:
                    while len(self._spare) >= self.max_spares:
                        oldest = next((i for i, (t, _) in enumerate(self._spare)
                                       if t != task_id), None)
                        if oldest is None:
                            break
                        evicted.append(self._spare.pop(oldest)[1])
                    if len(self._spare) < self.max_spares:
                        self._spare.append((task_id, env))
                    else:
                        evicted.append(env)
            for gone in evicted:
                gone.close()
            if env in evicted:
                return

    def close(self) -> None:
        """Release every prepared workspace and spare session (sessions' forks are closed by
        their owners)."""
        self._closed = True
        if self._filler is not None:
            self._filler.shutdown(wait=True, cancel_futures=True)
        with self._spare_lock:
            spares = [env for _, env in self._spare]
            self._spare.clear()
        for spare in spares:
            with contextlib.suppress(SwemillError, OSError):
                spare.close()
        for task_id, lock in self._locks.items():
            with lock:
                env = self._bases.pop(task_id, None)
            if env is not None:
                env.close()
