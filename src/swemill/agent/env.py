"""TaskEnv: the feature-deletion environment a policy works in.

``reset(task)`` unpacks the task's scrubbed broken snapshot twice into a private directory:
once as the policy's workspace (opened as a sandbox with the repository's prebuilt, read-only
environment) and once as the *pristine* copy, which is never mounted anywhere. ``step(call)``
carries out one canonical tool call; ``submit()`` grades:

1. the change set is read on the host (workspace against pristine, links never followed);
2. the grading runs in a *fresh* sandbox over a new tree: the pristine copy plus the change
   reduced to tracked, non-test source text (:mod:`swemill.agent.carry`: tests, test
   configuration, start-up hooks, bytecode, package metadata, links, binaries and modules that
   would shadow the test runner stay as in the snapshot or absent), so nothing else the policy
   left in its workspace can reach the test process;
3. FAIL_TO_PASS + PASS_TO_PASS run with the repository's pytest and swemill's reporter in an
   isolated run (plugin autoloading off, the baseline's plugins by name, no bytecode read or
   written), the report cross-checked against the exit code;
   :func:`~swemill.agent.grading.grade_run` judges.

Nothing golden is ever here: the snapshot is the broken tree, and oracles read the golden
patch in the host process that drives them.
"""

from __future__ import annotations

import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

from swemill.agent import actions
from swemill.agent.actions import Observation
from swemill.agent.carry import Carried, build_grading_tree, runner_modules
from swemill.agent.grading import RegressionPolicy, RewardWeights, grade_run
from swemill.agent.lint import lint_introduced
from swemill.agent.tree import Changes, entries_digest, tree_changes, tree_entries
from swemill.agent.warmgrade import WarmGrader
from swemill.core.errors import EnvBuildError, SandboxError, SwemillError, TestRunError
from swemill.core.records import Outcome, Task
from swemill.core.tools import ToolCall, validate_call
from swemill.repo.commitenv import CommitEnvs
from swemill.repo.envbuild import RepoEnv, build_env
from swemill.repo.runner_code import refuse_runner_repository
from swemill.repo.sources import resolve_source
from swemill.sandbox import Sandbox, open_sandbox
from swemill.sandbox.leftovers import scratch_dir
from swemill.store import Store
from swemill.suite.runner import Execute, run_tests
from swemill.suite.verdict import TestRunReport
from swemill.validate.snapshot import unpack_tree

__all__ = ["EnvConfig", "EnvResolver", "TaskEnv", "Observation"]

_CURRENT_MAX = 8 << 20
"""The largest file :meth:`TaskEnv.current_text` reads (bytes)."""


@dataclass(slots=True)
class EnvConfig:
    backend: str = "auto"
    """Sandbox backend: ``auto`` (bwrap when usable), ``bwrap``, ``docker``, ``local``."""
    command_timeout_s: float = 120.0
    """Wall-clock limit of one ``bash`` or ``search`` call."""
    test_timeout_s: float = 900.0
    """Wall-clock limit of one test run (the policy's ``run_tests`` and the grading run)."""
    max_output_chars: int = 20_000
    """Longer observations keep their head and tail."""
    regression: RegressionPolicy = "zero"
    weights: RewardWeights = field(default_factory=RewardWeights)
    lint: bool = True
    """Count the lint findings a change introduces (ruff on the host)."""
    cache: Path | None = None
    """swemill's cache (sources and environments); None: ``$SWEMILL_CACHE`` or the default."""
    test_nice: int = 10
    """Niceness of test runs (the policy's ``run_tests`` and grading) and of their scheduling
    autogroup (with the kernel's autogroups on, each session is a group, and groups share the
    CPU by the group's niceness): the policy's other commands go first. 0: not niced."""
    grading_servers: int | None = None
    """Warm grading servers per task at most (started as requests wait for one); None: the
    number of cores."""
    warm_grading: bool = True
    """Where environments share a prepared workspace (the environment server), grade through
    warm grading servers (:mod:`swemill.agent.warmgrade`); off: a fresh sandbox each time."""
    warm_tests: bool = True
    """With warm grading, the policy's ``run_tests`` runs in a fork of a grading server too,
    over an exact copy of the workspace (:meth:`WarmGrader.run_tests
    <swemill.agent.warmgrade.WarmGrader.run_tests>`; cold where that cannot promise the cold
    run's result); off: always in the workspace's own sandbox."""
    session_runner: bool = True
    """The environment server's sessions run their commands (``bash``, ``search``, the
    policy's ``run_tests``) in one long-lived sandbox each, forked there by a runner
    (:meth:`Sandbox.keep_warm <swemill.sandbox.contract.Sandbox.keep_warm>`; bwrap only);
    off: a new sandbox per command."""


def niced(sb: Sandbox, nice: int) -> Execute | None:
    """A test command run by ``nice -n NICE`` in ``sb``, its autogroup (its session's: every
    sandboxed command is a session of its own) given the same niceness, so that the policy's
    cheap commands in other sessions go first (None: as it is). The kernel takes one autogroup
    change per 100 ms machine-wide from a sandboxed process (EAGAIN otherwise): it is tried
    every 20 ms for up to 5 s."""
    if nice <= 0:
        return None
    script = ("n=0; if [ -w /proc/self/autogroup ]; then "
              f"while ! echo {nice} 2>/dev/null >/proc/self/autogroup; do n=$((n+1)); "
              '[ "$n" -ge 250 ] && break; sleep 0.02; done; fi; '
              f'exec nice -n {nice} "$@"')
    wrap = ["sh", "-c", script, "niced"]
    return lambda argv, env, timeout: sb.exec([*wrap, *argv], timeout=timeout, env=env,
                                              cwd=sb.workdir)


class EnvResolver:
    """``task.metadata["source"]`` -> the repository's built environment, once per source; a
    task validated in its base commit's own environment (``metadata.env_key`` names another
    one than the head's) gets that one (:class:`~swemill.repo.commitenv.CommitEnvs`)."""

    def __init__(self, cache: Path | None = None) -> None:
        self.cache = cache
        self._envs: dict[str, CommitEnvs] = {}
        self._lock = threading.Lock()

    def __call__(self, task: Task) -> RepoEnv:
        source = str(task.metadata.get("source") or "")
        if not source:
            raise EnvBuildError(f"task {task.instance_id} names no source (metadata.source); "
                                "its environment cannot be built")
        with self._lock:
            try:
                envs = self._envs.get(source)
                if envs is None:
                    src = resolve_source(source, cache=self.cache)
                    envs = CommitEnvs(build_env(src, cache=self.cache), src, cache=self.cache)
                    self._envs[source] = envs
                key = str(task.metadata.get("env_key") or envs.head.key)
                return envs.head if key == envs.head.key else envs.for_commit(task.base_commit)
            except SwemillError as exc:
                raise EnvBuildError(f"task {task.instance_id}: environment of {source!r} "
                                    f"cannot be built: {exc}") from exc


class TaskEnv:
    """One task's workspace in a sandbox; see the module docstring."""

    def __init__(self, config: EnvConfig | None = None, *, store: Store | None = None,
                 resolver: EnvResolver | None = None) -> None:
        self.config = config or EnvConfig()
        self.store = store.policy_view() if store is not None else None
        self.resolver = resolver or EnvResolver(self.config.cache)
        self.task: Task | None = None
        self.repo_env: RepoEnv | None = None
        self._sb: Sandbox | None = None
        self._tmp: Path | None = None
        self._pristine: Path | None = None
        self._forks: list[TaskEnv] = []
        self.done = False
        self.grader: WarmGrader | None = None
        """Grades through warm grading servers when set (falls back to cold on its own)."""
        self._owns_grader = False
        self._ran: tuple[TestRunReport, Carried] | None = None
        """The last ``run_tests`` that was the grading run of the workspace (see submit)."""

    # -- lifecycle --------------------------------------------------------------------------

    def reset(self, task: Task, snapshot: bytes | None = None) -> None:
        """Open a fresh workspace for ``task`` (from ``snapshot`` bytes or the store's copy)."""
        self.close()
        if snapshot is None:
            if self.store is None:
                raise EnvBuildError(f"task {task.instance_id}: no store to read its snapshot from")
            try:
                snapshot = self.store.get_bytes(task.snapshot)
            except SwemillError as exc:
                raise EnvBuildError(f"task {task.instance_id}: snapshot unreadable: {exc}") \
                    from exc
        repo_env = self.resolver(task)
        tmp = scratch_dir("task")
        try:
            for name in ("pristine", "ws"):
                repo_env.lay_generated(unpack_tree(snapshot, tmp / name))
            # a task made before such repositories were refused: its grading would run the
            # code the policy edits (swemill.repo.runner_code)
            refuse_runner_repository(tmp / "pristine", task.repo, repo_env.site_packages)
            self._sb = open_sandbox(tmp / "ws", backend=self.config.backend,
                                    binds=repo_env.binds())
        except SwemillError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise EnvBuildError(f"task {task.instance_id}: workspace cannot be built: {exc}") \
                from exc
        self.task, self.repo_env, self._tmp, self._pristine = task, repo_env, tmp, tmp / "pristine"
        self.done = False

    @property
    def sandbox(self) -> Sandbox:
        if self._sb is None:
            raise SandboxError("the task environment is not reset (call reset(task) first)")
        return self._sb

    @property
    def workdir(self) -> str:
        return self.sandbox.workdir

    def fork(self, *, track: bool = True) -> TaskEnv:
        """A copy-on-write copy of this environment in its current state (for sampling).
        ``track``: closed with this environment; an owner that closes each fork itself (the
        environment server's sessions) passes False, so closed forks are not kept here."""
        child = TaskEnv(self.config, resolver=self.resolver)
        child.task, child.repo_env, child._pristine = self.task, self.repo_env, self._pristine
        child._sb = self.sandbox.fork()
        child.done, child.grader = self.done, self.grader
        if track:
            self._forks.append(child)
        return child

    def use_warm_grading(self) -> WarmGrader:
        """Grade this environment and its later forks through warm grading servers
        (:mod:`swemill.agent.warmgrade`); they are closed with this environment."""
        if self.task is None or self.repo_env is None or self._pristine is None:
            raise SandboxError("the task environment is not reset (call reset(task) first)")
        self.grader = WarmGrader(self.task, self.repo_env, self._pristine,
                                 test_timeout_s=self.config.test_timeout_s,
                                 backend=self.config.backend, nice=self.config.test_nice,
                                 max_servers=self.config.grading_servers)
        self._owns_grader = True
        return self.grader

    def close(self) -> None:
        if self._owns_grader and self.grader is not None:
            self.grader.close()
            self.grader, self._owns_grader = None, False
        for child in self._forks:
            child.close()
        self._forks.clear()
        if self._sb is not None:
            self._sb.close()
            self._sb = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> TaskEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- acting -----------------------------------------------------------------------------

    def _run_env(self) -> dict[str, str]:
        assert self.repo_env is not None
        return self.repo_env.run_env(self.sandbox.workdir)

    def step(self, call: ToolCall) -> Observation:
        """Carry out one call. Invalid calls and refused paths are error observations."""
        problems = validate_call(call)
        if problems:
            return Observation("invalid tool call: " + "; ".join(problems), is_error=True)
        sb, cfg, a = self.sandbox, self.config, call.args
        limit = cfg.max_output_chars
        try:
            if call.name == "bash":
                return actions.bash(sb, a["command"], env=self._run_env(),
                                    timeout=cfg.command_timeout_s, limit=limit)
            if call.name == "read":
                return actions.read(sb, a["path"], a.get("start_line"), a.get("end_line"),
                                    limit=limit)
            if call.name == "write":
                return actions.write(sb, a["path"], a["content"])
            if call.name == "edit":
                return actions.edit(sb, a["path"], a["old_str"], a["new_str"],
                                    bool(a.get("replace_all", False)))
            if call.name == "search":
                return actions.search(sb, a["pattern"], a.get("path"), a.get("glob"),
                                      env=self._run_env(), timeout=cfg.command_timeout_s,
                                      limit=limit)
            if call.name == "run_tests":
                return self._run_tests(a.get("tests"))
            self.done = True
            return Observation("submitted; the workspace will be graded", done=True)
        except (SandboxError, TestRunError, UnicodeDecodeError, FileNotFoundError) as exc:
            return Observation(f"{call.name} failed: {exc}", is_error=True)

    def _run_tests(self, tests: list[str] | None) -> Observation:
        task = self.task
        assert task is not None and self.repo_env is not None
        ids = tests or [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
        # brief: the observation is built from the report's messages, never from pytest's
        # output, and short tracebacks of many failures cost more than the tests themselves
        report = None
        if self.grader is not None and self.config.warm_tests:
            served = self.grader.run_tests(self.sandbox.workspace, ids)
            if served is not None:
                report = served[0]
                if served[1] is not None:
                    self._ran = (served[0], served[1])
        if report is None:
            report = run_tests(self.sandbox, self.repo_env, ids,
                               timeout=self.config.test_timeout_s,
                               execute=niced(self.sandbox, self.config.test_nice), brief=True)
        if not report.trustworthy:
            return Observation(f"the test run cannot be trusted: {report.problem}", is_error=True)
        counts = ", ".join(f"{n} {k}" for k, n in sorted(report.counts().items()))
        bad = [f"{report.status(t).upper()} {t}: {report.results[t].message}"
               for t in ids if t in report.results and report.status(t) != "passed"]
        text = "\n".join([f"{len(ids)} tests: {counts}", *bad])
        return Observation(actions.clip(text, self.config.max_output_chars))

    def current_text(self, path: str) -> str | None:
        """The text of the workspace file ``path`` names, as it is now: what a ``write`` to it
        would replace (None: no such file, a path outside the workspace, binary or over
        :data:`_CURRENT_MAX` bytes)."""
        try:
            data = self.sandbox.read_file(actions.checked_path(path, self.sandbox.workdir))
        except (SwemillError, OSError, ValueError):
            return None
        if len(data) > _CURRENT_MAX or b"\x00" in data[:8192]:
            return None
        return data.decode("utf-8", errors="replace")

    # -- grading ----------------------------------------------------------------------------

    def changes(self) -> Changes:
        """The policy's change set so far (host side, against the pristine snapshot)."""
        assert self._pristine is not None
        return tree_changes(self._pristine, self.sandbox.workspace)

    def _cold_grading_run(self) -> tuple[TestRunReport, Carried]:
        """The grading run in a fresh sandbox over a fresh grading tree."""
        task, repo_env, pristine = self.task, self.repo_env, self._pristine
        assert task is not None and repo_env is not None and pristine is not None
        tmp = scratch_dir("grade")
        try:
            shadowed = runner_modules(repo_env.site_packages)
            carried = build_grading_tree(pristine, self.sandbox.workspace, tmp / "ws",
                                         shadowed=shadowed)
            with open_sandbox(tmp / "ws", backend=self.config.backend,
                              binds=repo_env.binds()) as graded:
                report = run_tests(graded, repo_env, [*task.FAIL_TO_PASS, *task.PASS_TO_PASS],
                                   timeout=self.config.test_timeout_s, isolated=True,
                                   execute=niced(graded, self.config.test_nice))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return report, carried

    def _ran_unchanged(self) -> tuple[TestRunReport, Carried] | None:
        """The grading run the policy's last ``run_tests`` was
        (:meth:`WarmGrader.run_tests <swemill.agent.warmgrade.WarmGrader.run_tests>`), when
        the workspace is still the tree it ran (the same :func:`entries_digest`, so the same
        grading tree) and the task was not resolved there. A resolving run is graded again:
        a policy could otherwise rerun a flaky test until it passes and submit that."""
        ran, self._ran = self._ran, None
        if ran is None or self.grader is None or self.task is None:
            return None
        if entries_digest(tree_entries(self.sandbox.workspace)) != ran[1].source:
            return None
        if grade_run(self.task, ran[0], not_carried=[]).resolved:
            return None
        self.grader.note_reused()
        return ran

    def submit(self, *, turns: int = 0, tokens: int = 0) -> tuple[Outcome, Changes]:
        """Grade the workspace as it is now (see the module docstring)."""
        task, repo_env, pristine = self.task, self.repo_env, self._pristine
        if task is None or repo_env is None or pristine is None:
            raise SandboxError("the task environment is not reset (call reset(task) first)")
        changes = self.changes()
        lint = (lint_introduced(pristine, self.sandbox.workspace, changes.paths)
                if self.config.lint else None)
        signals: dict[str, float] = {"diff_lines": float(changes.lines),
                                     "diff_files": float(len(changes.paths)),
                                     "turns": float(turns), "tokens": float(tokens)}
        if lint is not None:
            signals["lint_new"] = float(lint)
        warm = self._ran_unchanged() or (self.grader.grade(self.sandbox.workspace)
                                         if self.grader is not None else None)
        report, carried = warm if warm is not None else self._cold_grading_run()
        outcome = grade_run(task, report, not_carried=carried.describe(),
                            regression=self.config.regression, signals=signals,
                            weights=self.config.weights)
        return outcome, changes
