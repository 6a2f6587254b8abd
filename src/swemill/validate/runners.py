"""How a worker runs tests in its workspace: the :class:`TestRunner` protocol and its three
implementations, chosen by what the sandbox can do (:attr:`Sandbox.can_spawn`).

- :class:`ServerRunner`: a warm server (:mod:`swemill.validate.inside`) spawned in the
  sandbox forks a child per run; restarted once when it dies (a candidate that exhausted the
  sandbox's memory, say). A tree that edits a file the server imported itself runs cold, in a
  fresh interpreter the fork execs (``cold_runs``).
- :class:`ImageRunner`: the server's head image serves selected-test runs on the head tree
  or on the head tree with body-only edits of ``.py`` files, and whole-suite runs on the head
  tree itself (a golden tree that is the head's bytes: every test it collected, no import or
  collection again); what it cannot serve exactly it declines (None), with the reason
  counted (``fallbacks``).
- :class:`TreeImageRunner`: a tree the head image cannot serve (an edited function that ran
  at import, an edit beyond function bodies) and that will be run again (a broken tree's
  repeats, a golden tree that is not the head's) is collected once by the server's tree
  image, and its runs are forks of that (none for a tree run once: a near miss).
- :class:`ColdRunner`: for a sandbox that cannot host a long-lived process, every run is
  ``python -m pytest`` through :meth:`Sandbox.exec` (no per-test deadlines: the run's own).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Protocol

from swemill.core.errors import SandboxError
from swemill.repo.envbuild import RepoEnv
from swemill.sandbox._spawn import Spawned
from swemill.sandbox.contract import Sandbox
from swemill.suite.runner import pytest_argv, run_tests
from swemill.validate.inside.protocol import Flags, ImageReady
from swemill.validate.warm import Deadlines, WarmResult, WarmWorker, server_argv
from swemill.validate.workspace import Workspace

__all__ = ["ColdRunner", "ImageRunner", "ServerRunner", "TestRunner", "TreeImageRunner"]

# Built-in plugins that only act on options swemill never passes; not loading them saves
# about a tenth of every forked run.
_QUIET_PLUGINS = ("-p", "no:junitxml", "-p", "no:pastebin", "-p", "no:stepwise",
                  "-p", "no:setuponly", "-p", "no:setupplan")


class TestRunner(Protocol):
    """Runs ``nodeids`` (None: the whole suite) in the workspace as it is now."""

    def run(self, nodeids: Sequence[str] | None, timeout: float,
            deadlines: Deadlines | None = None, *, terse: bool = False,
            maxfail: int = 0, cpu_timeout: float = 0.0) -> WarmResult | None:
        """The run's result; None when this runner declines the run (try the next).
        ``terse``: the outcomes are all that is wanted (failures need not be formatted);
        ``maxfail``: stop after that many failures (0: never); ``cpu_timeout``: the test
        process's CPU seconds at which the run ends, timed out (0: none)."""
        ...

    cpu_s: float
    """CPU seconds of the test processes this runner ran (measured inside the sandbox)."""


class ServerRunner:
    """A warm server in ``sb`` over the workspace; not thread-safe."""

    __test__ = False

    def __init__(self, env: RepoEnv, sb: Sandbox, ws: Workspace, *, preimport: str,
                 prewarm_s: float | None, flags: Flags) -> None:
        self.env, self.sb, self.ws, self.flags = env, sb, ws, flags
        self.preimport, self.prewarm_s = preimport, prewarm_s
        self.warm: WarmWorker | None = None
        self._spawned: Spawned | None = None
        self.on_start: Callable[[WarmWorker], bool] = lambda _warm: False
        """Called on every start; True when it compiled the suite already (a head image)."""
        self.restarts = 0
        self.cold_runs = 0
        self.cpu_s = 0.0
        self.closed = False
        self._preloaded: dict[str, bytes | None] = {}
        """Workspace files the server imported itself, as they were when it started."""

    @property
    def started(self) -> bool:
        return self.warm is not None or self._spawned is not None

    @property
    def alive(self) -> bool:
        return self.warm is not None and self.warm.alive

    def pytest_args(self) -> list[str]:
        return [*pytest_argv(self.env, self.sb.workdir)[3:], *_QUIET_PLUGINS]

    def start(self) -> WarmWorker:
        if self.closed:  # a check still running when the pool stopped ends here
            raise SandboxError("the validation worker was closed")
        run_env = {**self.env.run_env(self.sb.workdir), "HOME": "/tmp", "LANG": "C.UTF-8",
                   "PYTHONDONTWRITEBYTECODE": "1", "SWEMILL_WARM_PREIMPORT": self.preimport}
        isolated = self.sb.workdir != str(self.sb.workspace)
        spawned = self.sb.spawn(server_argv(str(self.env.python), self.sb.workdir,
                                            isolated=isolated, flags=self.flags),
                                env=run_env, cwd=self.sb.workdir)
        try:
            warm = WarmWorker(spawned.proc)
        except SandboxError:
            spawned.close()
            raise
        self._spawned, self.warm = spawned, warm
        self._preloaded = {rel: self.ws.read(rel) for rel in warm.preloaded}
        if not self.on_start(warm) and self.prewarm_s:
            # Collect the whole suite once, so every test module and the project are compiled
            # and assertion-rewritten before any candidate's run is timed against its budget.
            with contextlib.suppress(SandboxError):
                warm.run([*self.pytest_args(), "--collect-only"], self.prewarm_s)
        return warm

    def stale(self) -> bool:
        """Does the tree differ from a file the server imported before forking?"""
        return any(self.ws.read(rel) != data for rel, data in self._preloaded.items())

    def run(self, nodeids: Sequence[str] | None, timeout: float,
            deadlines: Deadlines | None = None, *, cold: bool = False,
            terse: bool = False, maxfail: int = 0, cpu_timeout: float = 0.0) -> WarmResult:
        """Run in a fork of the server (``cold``, or on a stale tree: a fresh interpreter).
        A server that died is restarted once and the run repeated; if it dies again the
        error propagates to the candidate, which is then dropped."""
        args = self.pytest_args() + (list(nodeids) if nodeids is not None else [])
        for attempt in (0, 1):
            warm = self.warm if self.alive else None
            if warm is None:
                self.stop()
                warm = self.start()
                if attempt or self.restarts:
                    self.restarts += 1
            stale = cold or self.stale()  # a restarted server imported this tree
            try:
                result = warm.run(args, timeout, deadlines, cold=stale, terse=terse,
                                  maxfail=maxfail, cpu_timeout=cpu_timeout)
            except SandboxError:
                self.stop()
                if attempt:
                    raise
                continue
            self.cpu_s += result.cpu_s
            self.cold_runs += stale
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    def stop(self) -> None:
        if self.warm is not None:
            self.warm.close()
            self.warm = None
        if self._spawned is not None:
            self._spawned.close()
            self._spawned = None

    def abort(self) -> None:
        """Kill the server's whole tree (a thread waiting on its reply reads the end of its
        output at once) and start no other; the streams stay open for that thread."""
        self.closed = True
        if self._spawned is not None:
            with contextlib.suppress(Exception):
                self._spawned.kill()


class ImageRunner:
    """The head image of ``server``'s warm server; at most :attr:`STARTS` starts."""

    __test__ = False
    STARTS = 3
    """Head images started at most per worker (one died: start another, up to this)."""

    def __init__(self, server: ServerRunner) -> None:
        self.server = server
        self.wanted = True
        self.up = False
        self._starts = 0
        self.error = ""
        self.collect_errors = 0
        """Modules the image could not collect at head (a whole-suite run then goes the
        ordinary way, which reports them)."""
        self.runs = 0
        self.cpu_s = 0.0
        self.startup_s = 0.0
        """Wall seconds the last start took (import and collection at head)."""
        self.fallbacks: Counter[str] = Counter()
        """Why selected runs at head were not served by the head image, by reason."""

    def start(self, warm: WarmWorker) -> bool:
        """Fork the server's head image if the workspace is at head and images are wanted."""
        self.up = False
        if not self.wanted or not self.server.ws.at_head or self._starts >= self.STARTS:
            return False
        self._starts += 1
        try:
            ready = warm.start_image(self.server.pytest_args(), self.server.prewarm_s or 120.0)
        except SandboxError as exc:
            ready = ImageReady(id=0, ready=False, error=str(exc))
        self.cpu_s += ready.cpu_s
        self.up = ready.ready
        self.startup_s = ready.startup_s
        self.collect_errors = ready.collect_errors
        if not self.up:  # it would fail the same way again: run the ordinary way
            self.error = ready.error[-500:]
            self.wanted = False
        return self.up

    def run(self, nodeids: Sequence[str] | None, timeout: float,
            deadlines: Deadlines | None = None, *, terse: bool = False,
            maxfail: int = 0, edited_whole: bool = False,
            cpu_timeout: float = 0.0) -> WarmResult | None:
        """As :meth:`TestRunner.run`. A whole suite (``nodeids`` None) is served on the head
        tree, or with ``edited_whole`` on an edited one: the caller knows the edits are
        function bodies that ran in no import, collection or wide fixture (``select_tests``
        would select for them), so the image's imported state is what a fresh interpreter
        would have and swapping the code in is exact."""
        warm = self.server.warm
        if nodeids is not None and not nodeids:
            return None
        if not self.up or warm is None or not warm.alive or self.server.stale():
            return None
        changed = self.server.ws.changed_py()
        if nodeids is None and ((changed != [] and not edited_whole) or self.collect_errors):
            return None  # a whole suite: all of it collected, at head or edits it may swap
        if changed is None:
            self.fallbacks["tree differs from head beyond .py edits"] += 1
            return None
        return _served(self, lambda: warm.run_image(
            None if nodeids is None else list(nodeids), changed, timeout, deadlines,
            terse=terse, maxfail=maxfail, cpu_timeout=cpu_timeout))

    def lost(self) -> None:
        """The image is gone (or its server): not up until started again."""
        self.up = False


class TreeImageRunner:
    """The tree image of ``server``'s warm server: one tree at a time, the one the workspace
    held when it started (:meth:`Workspace.fingerprint`); a run of any other tree starts it
    anew. A tree that does not collect cleanly is left to the ordinary run, which reports
    its errors; so is a tree whose collection takes far longer than the head's (it may hang
    at import: the ordinary run's own budget then decides)."""

    __test__ = False
    GIVE_UP = 3
    """Starts that failed (the image did not come up: threads started at import, a time-out)
    before any run was served: stop trying."""

    def __init__(self, server: ServerRunner, head: ImageRunner) -> None:
        self.server, self.head = server, head
        self.tree: object = None
        """The fingerprint of the tree the image holds (None: none usable)."""
        self.runs = self.starts = self.failed = 0
        self.cpu_s = 0.0
        self.fallbacks: Counter[str] = Counter()

    def run(self, nodeids: Sequence[str] | None, timeout: float,
            deadlines: Deadlines | None = None, *, terse: bool = False, maxfail: int = 0,
            once: bool = False, cpu_timeout: float = 0.0) -> WarmResult | None:
        """As :meth:`TestRunner.run`; ``once``: the tree is run this once, so a tree not in
        the image already is not worth collecting for it."""
        warm = self.server.warm
        if (nodeids is not None and not nodeids) or warm is None or not warm.alive \
                or self.server.stale() or (self.failed >= self.GIVE_UP and not self.runs):
            return None
        tree = self.server.ws.fingerprint()
        if tree is None:
            return None
        if tree != self.tree:
            if once or not self._start(warm, timeout):
                return None
            self.tree = tree
        return _served(self, lambda: warm.run_image(
            None if nodeids is None else list(nodeids), [], timeout, deadlines, terse=terse,
            maxfail=maxfail, tree=True, cpu_timeout=cpu_timeout))

    def lost(self) -> None:
        """The image is gone (or its server): the next run starts it anew."""
        self.tree = None

    def _start(self, warm: WarmWorker, timeout: float) -> bool:
        self.tree = None
        self.starts += 1
        budget = min(timeout, 10 * self.head.startup_s + 2.0) if self.head.startup_s \
            else timeout
        try:
            ready = warm.start_image(self.server.pytest_args(), budget, tree=True)
        except SandboxError:
            self.server.stop()
            return False
        self.cpu_s += ready.cpu_s
        self.failed += not ready.ready
        why = "tree image did not start" if not ready.ready else \
            "tree did not collect cleanly" if ready.collect_errors else ""
        if why:
            self.fallbacks[why] += 1
        return not why


def _served(runner: ImageRunner | TreeImageRunner,
            ask: Callable[[], WarmResult]) -> WarmResult | None:
    """One run asked of ``runner``'s image: the result when it served the run; None when it
    declined (the reason counted) or the server went (it restarts with the next run)."""
    try:
        result = ask()
    except SandboxError:
        runner.server.stop()
        runner.lost()
        return None
    runner.cpu_s += result.cpu_s
    if result.unservable is None:
        runner.runs += 1
        return result
    if result.unservable == "no head image":
        runner.lost()
    runner.fallbacks[result.unservable] += 1
    return None


class ColdRunner:
    """``python -m pytest`` through ``sb.exec`` for every run, with swemill's reporter."""

    __test__ = False

    def __init__(self, env: RepoEnv, sb: Sandbox) -> None:
        self.env, self.sb = env, sb
        self.cpu_s = 0.0

    def run(self, nodeids: Sequence[str] | None, timeout: float,
            deadlines: Deadlines | None = None, *, terse: bool = False,
            maxfail: int = 0, cpu_timeout: float = 0.0) -> WarmResult:
        report = run_tests(self.sb, self.env, nodeids, timeout=timeout, brief=terse)
        results = report.results.values()
        exit_code = report.exit_code if report.trustworthy or report.timed_out else 3
        return WarmResult(exit_code=exit_code, timed_out=report.timed_out,
                          outcomes={r.nodeid: r.outcome for r in results},
                          durations={r.nodeid: r.duration_s for r in results},
                          messages={r.nodeid: r.message for r in results if r.message},
                          wall_s=report.wall_s, log_tail=report.problem)
