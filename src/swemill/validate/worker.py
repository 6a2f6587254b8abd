"""One validation worker: a private fork of the base workspace, moved between tree states
(:class:`~swemill.validate.workspace.Workspace`), and the test runners that run tests there
(:mod:`swemill.validate.runners`), chosen by what the sandbox can do.

A sandbox that can host a long-lived process gets a warm server and its head image: a
selected-test run at the head commit, and a whole-suite run of the head tree itself (a golden
tree), go to the image when it can serve them exactly, the rest to the server. The worker
starts the server, with its image, before the workspace first moves away from head, and
restarts the image when the workspace is back at head after the image went. Now and then
(:class:`Shadow`) a run the image served is run again cold and compared. A tree the head
image cannot serve goes to the tree image (:class:`TreeImageRunner`) unless it is run only
once, and from there to the server. A sandbox that cannot spawn runs every test run cold
through ``exec``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from swemill.core.records import TestStatus
from swemill.repo.envbuild import RepoEnv
from swemill.sandbox import Bind, Limits, open_sandbox
from swemill.sandbox.contract import Sandbox
from swemill.suite.runner import PLUGIN_MODULE, ensure_plugin
from swemill.validate.gates import FAILING, RunEvidence
from swemill.validate.runners import ColdRunner, ImageRunner, ServerRunner, TreeImageRunner
from swemill.validate.shadow import Shadow
from swemill.validate.warm import INSIDE_DIR, INSIDE_MOUNT, Deadlines, Flags, WarmResult
from swemill.validate.workspace import TreeState, Workspace

__all__ = ["TreeState", "Worker", "evidence_of", "open_base"]

_VALID: frozenset[str] = frozenset({"passed", "failed", "error", "skipped", "xfailed", "xpassed"})


def evidence_of(result: WarmResult, selected: Sequence[str] | None) -> RunEvidence:
    """Turn a warm run into gate evidence; the exit code is checked against the outcomes."""
    outcomes: dict[str, TestStatus] = {
        k: v for k, v in result.outcomes.items() if v in _VALID  # type: ignore[misc]
    }
    if selected is not None:
        for nodeid in selected:
            outcomes.setdefault(nodeid, "error")  # asked for and never reported: not a pass
    bad = any(v in FAILING for v in result.outcomes.values())
    trusted = not result.timed_out and (
        (result.exit_code == 0 and not bad) or (result.exit_code == 1 and bad))
    if result.exit_code == 5 and selected is None:
        trusted = False  # nothing collected at all: the tree does not even import
    log = result.log_tail
    if result.hung:
        log = f"{result.hung} ran past its own deadline\n{log}"
    if not trusted and not result.timed_out:
        log = f"exit {result.exit_code}, {len(result.outcomes)} outcomes\n{log}"
    return RunEvidence(outcomes=outcomes, exit_code=result.exit_code,
                       timed_out=result.timed_out, trusted=trusted, log=log)


class Worker:
    """A fork of ``base`` and its test runners; not thread-safe (one candidate at a time)."""

    def __init__(self, env: RepoEnv, base: Sandbox, head: str,
                 preimport: Sequence[str] = (), prewarm_s: float | None = None,
                 image: bool = True, flags: Flags | None = None,
                 shadow: Shadow | None = None) -> None:
        self.env, self.head = env, head
        self.shadow = shadow
        ensure_plugin(env)
        self.sb: Sandbox = base.fork()
        self.root = self.sb.workspace
        self.ws = Workspace(self.root, head)
        flags = flags or Flags()
        self.server: ServerRunner | None = None
        self.image: ImageRunner | None = None
        self.tree: TreeImageRunner | None = None
        self.cold: ColdRunner | None = None
        if self.sb.can_spawn:
            # swemill's reporter is loaded with -p in every run: import it once, in the server
            self.server = ServerRunner(env, self.sb, self.ws, prewarm_s=prewarm_s, flags=flags,
                                       preimport=",".join([PLUGIN_MODULE, *preimport]))
            if image and flags.head_image:
                self.image = ImageRunner(self.server)
                self.server.on_start = self.image.start
                if flags.tree_image:
                    self.tree = TreeImageRunner(self.server, self.image)
        else:
            self.cold = ColdRunner(env, self.sb)

    @property
    def state(self) -> TreeState:
        return self.ws.state

    @property
    def cpu_s(self) -> float:
        """CPU seconds of the test processes this worker ran (measured inside)."""
        return sum(r.cpu_s for r in (self.server, self.image, self.tree, self.cold)
                   if r is not None)

    @property
    def restarts(self) -> int:
        return self.server.restarts if self.server is not None else 0

    @property
    def cold_runs(self) -> int:
        return self.server.cold_runs if self.server is not None else 0

    def equals_head(self) -> bool:
        """Every file the patches touched is back to its bytes at the head commit."""
        return self.ws.equals_head()

    def run(self, nodeids: Sequence[str] | None, timeout: float,
            deadlines: Deadlines | None = None, *, terse: bool = False,
            maxfail: int = 0, edited_whole: bool = False, once: bool = False,
            cpu_timeout: float = 0.0) -> WarmResult:
        """Run ``nodeids`` (None: the whole suite) on the workspace as it is; ``timeout``
        bounds the run, ``deadlines`` single tests (see :mod:`.inside.forkrun`). ``terse``:
        only the outcomes are wanted (no failure messages: see
        :func:`.inside.forkrun.outcomes_only`); ``maxfail``: stop after that many failures
        (a cold run of a sandbox that cannot spawn runs on); ``edited_whole``: the head image
        may serve a whole suite on this edited tree (:meth:`ImageRunner.run`); ``once``:
        this tree is run no more (no tree image is collected for it); ``cpu_timeout``: the
        test process's CPU seconds at which the run ends, timed out (0: none; a sandbox that
        cannot spawn has only the wall budget)."""
        if self.server is None:
            assert self.cold is not None
            return self.cold.run(nodeids, timeout, deadlines)
        if not (self.shadow and self.shadow.image_off):
            served, image = None, "head"
            if self.image is not None:
                served = self.image.run(nodeids, timeout, deadlines, terse=terse,
                                        maxfail=maxfail, edited_whole=edited_whole,
                                        cpu_timeout=cpu_timeout)
            if served is None and self.tree is not None and not self.ws.equals_head():
                served, image = self.tree.run(nodeids, timeout, deadlines, terse=terse,
                                              maxfail=maxfail, once=once,
                                              cpu_timeout=cpu_timeout), "tree"
            if served is not None:
                # a tree image's whole suite is the head image's whole-suite path, which its
                # own checks watch; the tree image's selected runs are checked (the first one
                # always), at a fraction of a whole suite's cost
                if self.shadow is not None and (image == "head" or nodeids is not None) \
                        and self.shadow.due(served, image):
                    # the ordinary way: a fresh pytest session in a fork of the warm server,
                    # which imports the project and collects anew (start-up on top)
                    plain = self.server.run(nodeids, 2 * timeout + 10, deadlines, terse=terse,
                                            maxfail=maxfail, cpu_timeout=cpu_timeout)
                    asked = list(nodeids) if nodeids is not None else list(
                        dict.fromkeys([*served.outcomes, *plain.outcomes]))
                    if not self.shadow.compare(asked, served, plain):
                        return plain
                return served
        return self.server.run(nodeids, timeout, deadlines, terse=terse, maxfail=maxfail,
                               cpu_timeout=cpu_timeout)

    def checkout(self, state: TreeState) -> None:
        """Put the workspace into ``state`` (see :meth:`Workspace.checkout`). The first move
        away from head starts the warm server (and its head image) first, while the workspace
        is still the head tree."""
        if state == self.ws.state:
            return
        if self.server is not None and not self.server.started and self.ws.at_head:
            self.server.start()
        self.ws.checkout(state)

    def reset(self, commit: str) -> None:
        """The workspace exactly at ``commit``; back at head, a head image that went (it
        died, or the server was restarted) is started again."""
        self.ws.reset(commit)
        if (self.image is not None and self.ws.at_head and not self.image.up
                and self.server is not None and self.server.warm is not None
                and self.server.alive):
            self.image.start(self.server.warm)

    def abort(self) -> None:
        """A stop in the middle of a run (an error, SIGTERM): kill the server's whole tree,
        so a thread waiting on its reply reads the end of its output at once, and start no
        other server. :meth:`close` follows."""
        if self.server is not None:
            self.server.abort()

    def close(self) -> None:
        if self.server is not None:
            self.server.closed = True
            with contextlib.suppress(Exception):
                self.server.stop()
        with contextlib.suppress(Exception):
            self.sb.close()


def open_base(env: RepoEnv, *, backend: str, limits: Limits) -> Sandbox:
    """The sandbox every worker forks: the source's working copy, the env and the server."""
    binds = [*env.binds(), Bind(host=INSIDE_DIR, inside=INSIDE_MOUNT)]
    return open_sandbox(env.source_path, backend=backend, binds=binds, limits=limits)
