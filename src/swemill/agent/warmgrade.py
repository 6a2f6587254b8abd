"""Grading through warm grading servers: the same grading run, without a cold interpreter.

A :class:`WarmGrader` keeps, for one task, up to ``max_servers`` grading servers
(:mod:`swemill.validate.inside.grade`), each in its own bwrap sandbox over its own grading
workspace (a *slot*). To grade a workspace, a free server's slot is emptied and rebuilt exactly
as the cold grader builds its fresh tree (:func:`~swemill.agent.carry.build_grading_tree`: the
pristine snapshot plus the carried, non-test source change), and the very command of a cold
grading run (:func:`~swemill.suite.runner.run_tests` with ``isolated``: the reporter, its
nonce, guard and seal, the selection of FAIL_TO_PASS + PASS_TO_PASS) runs in a fork of the
server instead of a fresh ``python -m pytest``. Only pytest's start-up is saved.

Where the warm path could differ from the cold one, it is not used (the caller grades cold,
:meth:`WarmGrader.grade` returns None): a sandbox without its own pid namespace and private
``/tmp`` (only bwrap has both here); a server that imported a file of the workspace while
warming up (a fork would never see the policy's version of it); a server that died, gave no
answer or could not clear what a run left (it is replaced); a run that could not be trusted,
other than by its timeout or a limit (:func:`_unlike_cold`: a cold run is the reference). A
run that met the memory or process limit of the server's sandbox is reported as killed, and
that server is replaced.

The policy's own ``run_tests`` goes through the same servers (:meth:`WarmGrader.run_tests`):
over an exact copy of its workspace, or, where it runs the grading's selection over a tree
that is its own grading tree, as that very grading run (see the method).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from swemill.agent.carry import Carried, build_grading_tree, runner_modules
from swemill.agent.mirror import (
    NotMirrored,
    check_mirrorable,
    layout_difference,
    mirror_tree,
)
from swemill.core.errors import SandboxError, SwemillError
from swemill.core.records import Task
from swemill.repo.envbuild import RepoEnv
from swemill.sandbox import Bind, ExecResult, open_sandbox
from swemill.sandbox.bwrap import BwrapSandbox
from swemill.sandbox.leftovers import scratch_dir
from swemill.suite.runner import run_tests
from swemill.suite.verdict import TestRunReport
from swemill.validate.inside import protocol as wire
from swemill.validate.warm import INSIDE_DIR, INSIDE_MOUNT

__all__ = ["GradingServer", "WarmGrader"]

_READY_S = 120.0
_SCRATCH = ["/tmp", "/dev/shm"]
_T = TypeVar("_T")
_NO_SERVER = object()
"""What :meth:`WarmGrader._serve` answers when no server could be had (not a fallback)."""
_SERVER_PACKAGE = frozenset({"swemill_inside"})
"""The name the server's own package is imported under (``validate/inside/__main__.py``)."""


def _unlike_cold(report: TestRunReport) -> bool:
    """A warm run that ended as no run of pytest ends by itself, which a cold run of the same
    tree need not: by a signal, or with exit 0 before its session finished or started (not by its
    timeout or a limit, which a cold run meets the same; not with pytest's own exit codes,
    which a package that does not import gives either way). A fork that differs from a fresh
    interpreter shows as one (apscheduler 3.10.4: with SIGPIPE at its default in the fork,
    its process-pool tests killed pytest, and every warm grading of a correct fix was
    untrusted, reward 0). Such a run is made cold instead, where a policy's own hack is
    untrusted all the same."""
    return (not report.trustworthy and not report.timed_out
            and not report.problem.startswith("the run was killed")
            and (report.exit_code >= 128 or report.exit_code < 0 or (
                report.exit_code == 0 and report.collected is None)))  # no finish line


def _unlock(func, path, _exc):  # noqa: ANN001, ANN202 - shutil's onerror signature
    """A folder a run made unwritable (``chmod 0``) is still emptied."""
    os.chmod(os.path.dirname(path), 0o700)
    with contextlib.suppress(FileNotFoundError):
        os.chmod(path, 0o700)
    func(path)


def _empty(folder: Path) -> None:
    os.chmod(folder, 0o755)
    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, onerror=_unlock)
        else:
            os.unlink(entry.path)


class GradingServer:
    """One grading server and its slot; used by one grading at a time."""

    def __init__(self, repo_env: RepoEnv, pristine: Path, *, backend: str = "auto",
                 nice: int = 0) -> None:
        self.repo_env, self.pristine, self.nice = repo_env, pristine, nice
        self._root = scratch_dir("gslot", in_memory=True)  # rebuilt for every run
        self.slot = self._root / "ws"
        self.slot.mkdir()
        self._seq = 0
        try:
            build_grading_tree(pristine, pristine, self.slot)
            sb = open_sandbox(self.slot, backend=backend,
                              binds=[*repo_env.binds(), Bind(INSIDE_DIR, INSIDE_MOUNT)])
        except BaseException:
            shutil.rmtree(self._root, ignore_errors=True)
            raise
        if not isinstance(sb, BwrapSandbox):
            sb.close()
            shutil.rmtree(self._root, ignore_errors=True)
            raise SandboxError("warm grading needs the bwrap sandbox (its own pid namespace "
                               "and /tmp)")
        self.sb: BwrapSandbox = sb
        try:
            env = {**repo_env.run_env(self.sb.workdir), "HOME": "/tmp", "LANG": "C.UTF-8"}
            argv = [str(repo_env.python), "-u", f"{INSIDE_MOUNT}/__main__.py", "--grade",
                    self.sb.workdir, *(["--nice", str(nice)] if nice > 0 else [])]
            self.spawned = self.sb.spawn(argv, env=env, cwd=self.sb.workdir)
            assert self.spawned.proc.stdout is not None
            self._lines = wire.Lines(self.spawned.proc.stdout.fileno())
            ready = self._lines.read(_READY_S)
        except BaseException:
            self.close()
            raise
        if not isinstance(ready, wire.Ready) or not ready.ready:
            self.close()
            raise SandboxError(f"the grading server did not start: {ready}")
        if ready.preloaded:
            self.close()
            raise SandboxError("the grading server imported workspace files while warming up "
                               f"({', '.join(ready.preloaded[:3])}): a fork would not see "
                               "the policy's version of them")
        self.healthy = True

    def fill(self, workspace: Path, shadowed: frozenset[str]) -> Carried:
        """Make the slot the grading tree of ``workspace`` (see the module docstring)."""
        _empty(self.slot)
        return build_grading_tree(self.pristine, workspace, self.slot, shadowed=shadowed)

    def mirror(self, workspace: Path, shadowed: frozenset[str]) -> None:
        """Make the slot an exact copy of ``workspace`` (:func:`~swemill.agent.mirror.
        mirror_tree`; :class:`~swemill.agent.mirror.NotMirrored` where it cannot)."""
        _empty(self.slot)
        mirror_tree(workspace, self.slot, pristine=self.pristine, shadowed=shadowed)

    def execute(self, argv: Sequence[str], env: Mapping[str, str], timeout: float) -> ExecResult:
        """Run a ``python -m pytest ARGS`` command line in a fork of the server."""
        if list(argv[1:3]) != ["-m", "pytest"]:
            raise SandboxError(f"a grading server runs pytest only, not {list(argv[:3])}")
        self.sb.hand_over()
        self._seq += 1
        limits = self.sb.limits
        request = wire.Grade(self._seq, list(argv[3:]), dict(env), timeout, list(_SCRATCH),
                             limits.disk_mb, limits.output_bytes, self.nice)
        proc = self.spawned.proc
        assert proc.stdin is not None
        try:
            proc.stdin.write(wire.encode(request))
            proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as exc:
            self.healthy = False
            raise SandboxError(f"the grading server is gone: {exc}") from exc
        try:
            reply = self._lines.read(timeout + 60.0)
        except wire.ProtocolError as exc:
            reply = None
            raise SandboxError(f"the grading server spoke out of protocol: {exc}") from exc
        finally:
            if not isinstance(reply, wire.Graded) or reply.id != request.id:
                self.healthy = False
        if not isinstance(reply, wire.Graded) or reply.id != request.id:
            raise SandboxError(f"the grading server gave no answer (exit {proc.poll()})")
        reason = self.spawned.killed_reason() or ("disk" if reply.over_disk else None)
        if reason is None and reply.timed_out:
            reason = "timeout"
        self.healthy = reply.clean and self.spawned.killed_reason() is None
        return ExecResult(exit_code=reply.exit_code, timed_out=reply.timed_out,
                          killed_reason=reason, stdout=reply.stdout, stderr=reply.stderr,
                          wall_s=reply.wall_s, truncated=reply.truncated,
                          extra={"cpu_s": reply.cpu_s})

    def close(self) -> None:
        self.healthy = False
        spawned = getattr(self, "spawned", None)
        if spawned is not None:
            proc = spawned.proc
            with contextlib.suppress(OSError, ValueError):
                if proc.stdin is not None:
                    proc.stdin.write(wire.encode(wire.Exit()))
                    proc.stdin.close()
            spawned.close()
        sb = getattr(self, "sb", None)
        if sb is not None:
            sb.close()
        shutil.rmtree(self._root, ignore_errors=True)


class WarmGrader:
    """One task's grading servers (see the module docstring). Thread-safe."""

    def __init__(self, task: Task, repo_env: RepoEnv, pristine: Path, *, test_timeout_s: float,
                 backend: str = "auto", max_servers: int | None = None, nice: int = 0) -> None:
        self.task, self.repo_env, self.pristine = task, repo_env, pristine
        self.test_timeout_s, self.backend, self.nice = test_timeout_s, backend, nice
        self.max_servers = max_servers or max(os.cpu_count() or 1, 1)
        self._idle: list[GradingServer] = []
        self._count = 0
        """Servers started or starting (idle, busy, or on their way)."""
        self._starting = 0
        self._waiting = 0
        self._cond = threading.Condition()
        self._closed = False
        self.unusable: str | None = None
        """Why this task is graded cold (a server could not start as needed), or None."""
        self.warm_runs = 0
        """Gradings served warm."""
        self.warm_tests = 0
        """The policy's test runs served warm (:meth:`run_tests`)."""
        self.cold_fallbacks = 0
        """Gradings that went back to the cold grader."""
        self.cold_tests = 0
        """The policy's test runs that went back to the cold path."""
        self.shared_tests = 0
        """Of :attr:`warm_tests`, those that were the grading run of the workspace itself."""
        self.reused = 0
        """Gradings taken from such a run (:meth:`TaskEnv.submit
        <swemill.agent.env.TaskEnv.submit>`), not run again."""
        self._shadowed = runner_modules(repo_env.site_packages)
        # bwrap dies with the *thread* that started it (--die-with-parent is a parent-death
        # signal), and a server may be asked for from short-lived threads: one thread that
        # lives as long as the grader starts them all
        self._starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="grading-servers")

    @property
    def servers(self) -> int:
        """Servers started or starting now."""
        with self._cond:
            return self._count

    def prestart(self) -> None:
        """Start one server ahead of the first grading (errors leave the task to cold)."""
        server = self._take()
        if server is not None:
            self._give(server)

    def _take(self) -> GradingServer | None:
        """A free server: an idle one, else the first to come of those busy now and one more
        started in the background for each request waiting beyond those already starting
        (up to ``max_servers``): capacity follows demand, and no request waits for a start
        that a server freed meanwhile could have saved it."""
        with self._cond:
            self._waiting += 1
            try:
                while True:
                    if self._closed or self.unusable is not None:
                        return None
                    if self._idle:
                        return self._idle.pop()
                    if self._starting < self._waiting and self._count < self.max_servers:
                        self._count += 1
                        self._starting += 1
                        self._starter.submit(self._start_one)
                    self._cond.wait()
            finally:
                self._waiting -= 1

    def _start_one(self) -> None:
        """Start a server (on the starter thread) and make it idle, or say why none can."""
        try:
            server = GradingServer(self.repo_env, self.pristine, backend=self.backend,
                                   nice=self.nice)
        except Exception as exc:  # noqa: BLE001 - whatever it was, the task is graded cold
            with self._cond:
                self._count -= 1
                self._starting -= 1
                self.unusable = str(exc) if isinstance(exc, SwemillError) else repr(exc)
                self._cond.notify_all()
            return
        with self._cond:
            self._starting -= 1
            if self._closed:
                self._count -= 1
            else:
                self._idle.append(server)
                self._cond.notify_all()
                return
        server.close()

    def _give(self, server: GradingServer) -> None:
        with self._cond:
            if server.healthy and not self._closed:
                self._idle.append(server)
                self._cond.notify()
                return
            self._count -= 1
            self._cond.notify()
        server.close()

    def grade(self, workspace: Path) -> tuple[TestRunReport, Carried] | None:
        """The grading run of ``workspace`` through a warm server; None: grade it cold."""
        served = self._serve(lambda server: (server.fill(workspace, self._shadowed), True),
                             self.selection)
        if served is _NO_SERVER:
            return None
        with self._cond:
            if served is None or _unlike_cold(served[0]):
                self.cold_fallbacks += 1
                return None
            self.warm_runs += 1
        return served

    @property
    def selection(self) -> list[str]:
        """What a grading runs: FAIL_TO_PASS + PASS_TO_PASS, in that order."""
        return [*self.task.FAIL_TO_PASS, *self.task.PASS_TO_PASS]

    def run_tests(self, workspace: Path,
                  nodeids: Sequence[str]) -> tuple[TestRunReport, Carried | None] | None:
        """The policy's own test run of ``nodeids`` (:meth:`TaskEnv.run_tests
        <swemill.agent.env.TaskEnv>`, ``brief``, not isolated) over an exact copy of
        ``workspace`` (:mod:`swemill.agent.mirror`) through a warm server; None: run it cold
        in the session's sandbox.

        Where ``nodeids`` is the grading's selection and the workspace's grading tree *is*
        the workspace (nothing left out, the same layout, no entry points to autoload:
        :func:`~swemill.agent.mirror.layout_difference`), the run is the grading run of that
        tree (isolated and sealed), and its :class:`Carried` comes back with the report: the
        grading of the same tree, should the policy submit it unchanged. A grading run that
        cannot be trusted is run again as the policy's own run (what the policy sees is what
        a cold run shows); so is every other tree, with None for the ``Carried``."""
        shared = list(nodeids) == self.selection
        fill = ((lambda server: self._fill_shared(server, workspace)) if shared else
                (lambda server: self._mirror(server, workspace)))
        served = self._serve(fill, nodeids)
        if shared and served not in (None, _NO_SERVER) and served[1] is not None \
                and not served[0].trustworthy:
            served = self._serve(lambda server: self._mirror(server, workspace), nodeids)
        if served is _NO_SERVER:
            return None
        with self._cond:
            if served is None or _unlike_cold(served[0]):
                self.cold_tests += 1
                return None
            self.warm_tests += 1
            self.shared_tests += served[1] is not None
        return served

    def _mirror(self, server: GradingServer, workspace: Path) -> tuple[None, bool]:
        """The slot as a copy of ``workspace``, for a run that is not isolated."""
        server.mirror(workspace, self._shadowed | _SERVER_PACKAGE)
        return None, False

    def _fill_shared(self, server: GradingServer, workspace: Path) -> tuple[Carried | None, bool]:
        """The slot as the grading tree of ``workspace`` where that is the workspace itself
        (``(Carried, True)``: run it isolated), else as a copy (``(None, False)``)."""
        check_mirrorable(workspace, pristine=self.pristine,
                         shadowed=self._shadowed | _SERVER_PACKAGE)
        carried = server.fill(workspace, self._shadowed)
        if not carried.dropped and layout_difference(workspace, server.slot) is None:
            return carried, True
        return self._mirror(server, workspace)

    def note_reused(self) -> None:
        with self._cond:
            self.reused += 1

    def _serve(self, fill: Callable[[GradingServer], tuple[_T, bool]],
               nodeids: Sequence[str]) -> Any:
        """Fill a free server's slot and run ``nodeids`` in a fork of it, isolated where
        ``fill`` says so: ``(report, what fill returned)``; None where it failed there (the
        caller counts a fallback and runs them cold); :data:`_NO_SERVER` where no server
        could be had (not a fallback)."""
        server = self._take()
        if server is None:
            return _NO_SERVER
        try:
            filled, isolated = fill(server)
            return run_tests(server.sb, self.repo_env, list(nodeids),
                             timeout=self.test_timeout_s, isolated=isolated, brief=True,
                             execute=server.execute), filled
        except (SwemillError, OSError) as exc:
            # a refused copy leaves the server as it was (the next request rebuilds the slot)
            server.healthy = server.healthy and isinstance(exc, NotMirrored)
            return None
        finally:
            self._give(server)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        for server in idle:
            server.close()
        self._starter.shutdown(wait=False, cancel_futures=True)
