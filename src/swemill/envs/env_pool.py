"""A run's tasks and one prepared workspace per task, shared by every session of that task.

The first session of a task unpacks its scrubbed broken snapshot once (workspace + pristine
copy, :meth:`TaskEnv.reset`); that base environment never runs a command. Every session is a
copy-on-write fork of it (:meth:`TaskEnv.fork`, an overlay mount where the host allows one), so
a reset costs a fork, not an unpack, and sessions of one task share the frozen layers and the
pristine copy used for grading. Each base also keeps the task's warm grading servers
(:class:`~swemill.agent.warmgrade.WarmGrader`, the first started in the background as the base
is made), which every session of the task grades through. A session's commands run in one
long-lived sandbox of its own (:mod:`swemill.sandbox._runner`), started in the background at
its reset; the base never runs a command.

The pool reads the store through its policy view: ``golden/`` and ``candidates/`` are out of
its reach, so nothing golden can be served from here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from swemill.agent.env import EnvConfig, EnvResolver, TaskEnv
from swemill.core.errors import SessionError, StoreError
from swemill.core.records import Task
from swemill.envs.schema import TaskCard
from swemill.store import Store

__all__ = ["EnvPool"]


class EnvPool:
    """Tasks by id, their prepared base environments, and the config every session uses."""

    def __init__(self, store: Store, tasks: Iterable[Task], config: EnvConfig | None = None,
                 *, resolver: EnvResolver | None = None) -> None:
        self.store = store.policy_view()
        self.config = config or EnvConfig(lint=False, test_nice=5)
        self.resolver = resolver or EnvResolver(self.config.cache)
        self.tasks = {t.instance_id: t for t in sorted(tasks, key=lambda t: t.instance_id)}
        self._bases: dict[str, TaskEnv] = {}
        self._locks: dict[str, threading.Lock] = {t: threading.Lock() for t in self.tasks}
        self._closed = False

    @classmethod
    def of_run(cls, store: Store, run_id: str, config: EnvConfig | None = None) -> EnvPool:
        """Every task of ``tasks/run_id=<run_id>/`` in ``store``."""
        tasks = store.policy_view().read_records("tasks", run_id, Task)
        if not tasks:
            raise StoreError(f"run {run_id} in {store.url} has no tasks")
        return cls(store, tasks, config)

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
        """A fresh session workspace: a copy-on-write fork of the task's prepared one, whose
        session runner (``config.session_runner``) starts in the background."""
        env = self.base(task_id).fork(track=False)
        if self.config.session_runner:
            env.sandbox.keep_warm()
        return env

    def close(self) -> None:
        """Release every prepared workspace (sessions' forks are closed by their owners)."""
        self._closed = True
        for task_id, lock in self._locks.items():
            with lock:
                env = self._bases.pop(task_id, None)
            if env is not None:
                env.close()
