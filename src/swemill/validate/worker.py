"""One validation worker: a private fork of the base workspace and a warm pytest server in it.

The worker moves its workspace between tree states (a commit, plus patches on top), runs
tests there through the warm server, and brings the workspace back to the base state. The
server is restarted when it dies (a candidate that exhausted the sandbox's memory, say).

Selected-test runs at the head commit go to the server's head image when they can (see
:mod:`.inside.image`): the workspace then equals the head tree except for edited ``.py`` files,
whose edited functions the image swaps in. The worker decides that from the bytes on disk,
so a golden run on a tree that is byte for byte the head tree, or a broken run of a body-only
edit, costs a fork and the selected tests. Whatever the image cannot serve exactly runs the
ordinary way, and the reasons are counted (``image_fallbacks``).

A tree that differs from what the server itself imported before forking (the project is a
dependency of pytest, like pluggy, or a pytest plugin the server loaded) cannot be seen by
any fork of it: such a run goes cold, to a fresh interpreter (``cold_runs``).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from swemill.core.errors import SandboxError, SandboxUnavailable, SynthesisError
from swemill.core.git import run_git
from swemill.core.records import TestStatus
from swemill.repo.envbuild import RepoEnv
from swemill.sandbox import Bind, Limits, open_sandbox
from swemill.sandbox._spawn import Spawned
from swemill.sandbox.contract import Sandbox
from swemill.suite.runner import PLUGIN_MODULE, ensure_plugin, pytest_argv
from swemill.synth.patches import parse_patch
from swemill.validate.gates import FAILING, RunEvidence
from swemill.validate.inside.protocol import ImageReady
from swemill.validate.warm import (
    INSIDE_DIR,
    INSIDE_MOUNT,
    Deadlines,
    Flags,
    WarmResult,
    WarmWorker,
    server_argv,
)

__all__ = ["TreeState", "Worker", "evidence_of", "open_base"]

# Built-in plugins that only act on options swemill never passes; not loading them saves
# about a tenth of every forked run.
_QUIET_PLUGINS = ("-p", "no:junitxml", "-p", "no:pastebin", "-p", "no:stepwise",
                  "-p", "no:setuponly", "-p", "no:setupplan")
_VALID: frozenset[str] = frozenset({"passed", "failed", "error", "skipped", "xfailed", "xpassed"})


@dataclass(frozen=True, slots=True)
class TreeState:
    """A commit with patches applied on top, in order (``base_patch``, bug, golden ...)."""

    commit: str
    patches: tuple[str, ...] = ()


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
    """A fork of ``base`` with a warm server; not thread-safe (one candidate at a time)."""

    IMAGE_STARTS = 3
    """Head images started at most per worker (one died: start another, up to this)."""

    def __init__(self, env: RepoEnv, base: Sandbox, head: str,
                 preimport: Sequence[str] = (), prewarm_s: float | None = None,
                 image: bool = True, flags: Flags | None = None) -> None:
        self.env = env
        self.head = head
        ensure_plugin(env)
        self.sb: Sandbox = base.fork()
        self.root = self.sb.workspace
        self._isolated = self.sb.workdir != str(self.root)
        self.flags = flags or Flags()
        # swemill's reporter is loaded with -p in every run: import it once, in the parent
        self._preimport = ",".join([PLUGIN_MODULE, *preimport])
        self.state = TreeState(head)
        self._saved: dict[str, bytes | None] = {}
        self._unknown = False
        self._fast = 0
        self._warm: WarmWorker | None = None
        self._spawned: Spawned | None = None
        self.restarts = 0
        self.cpu_s = 0.0
        """CPU seconds of the test processes this worker's server forked (measured inside)."""
        self._prewarm_s = prewarm_s
        self._image_wanted = image and self.flags.head_image
        self._image = False
        self._image_starts = 0
        self.image_error = ""
        self.image_runs = 0
        self.image_fallbacks: Counter[str] = Counter()
        """Why selected runs at head were not served by the head image, by reason."""
        self._preloaded: dict[str, bytes | None] = {}
        """Workspace files the server imported itself, as they were when it started."""
        self.cold_runs = 0
        self._closed = False

    # -- the warm server ----------------------------------------------------------------

    def _start(self) -> WarmWorker:
        if self._closed:  # a check still running when the pool stopped ends here
            raise SandboxError("the validation worker was closed")
        run_env = {**self.env.run_env(self.sb.workdir), "HOME": "/tmp", "LANG": "C.UTF-8",
                   "PYTHONDONTWRITEBYTECODE": "1", "SWEMILL_WARM_PREIMPORT": self._preimport}
        spawn = getattr(self.sb, "spawn", None)
        if spawn is None:
            raise SandboxUnavailable(f"the {type(self.sb).__name__} backend cannot host a warm "
                                     "worker: use bwrap or local")
        spawned = spawn(server_argv(str(self.env.python), self.sb.workdir,
                                    isolated=self._isolated, flags=self.flags),
                        env=run_env, cwd=self.sb.workdir)
        try:
            warm = WarmWorker(spawned.proc)
        except SandboxError:
            spawned.close()
            raise
        self._spawned = spawned
        self._warm = warm
        self._image = False
        self._preloaded = {rel: self._bytes(rel) for rel in warm.preloaded}
        if self._start_image():
            return warm  # collecting the suite in the image compiled everything already
        if self._prewarm_s:
            # Collect the whole suite once, so every test module and the project are compiled
            # and assertion-rewritten before any candidate's run is timed against its budget.
            args = [*pytest_argv(self.env, self.sb.workdir)[3:], "--collect-only"]
            with contextlib.suppress(SandboxError):
                warm.run(args, self._prewarm_s)
        return warm

    def _pytest_args(self) -> list[str]:
        return [*pytest_argv(self.env, self.sb.workdir)[3:], *_QUIET_PLUGINS]

    def _start_image(self) -> bool:
        """Fork the server's head image if the workspace is at head and images are wanted."""
        warm = self._warm
        if (warm is None or not self._image_wanted or self.state != TreeState(self.head)
                or self._image_starts >= self.IMAGE_STARTS):
            return False
        self._image_starts += 1
        budget = self._prewarm_s or 120.0
        try:
            ready = warm.start_image(self._pytest_args(), budget)
        except SandboxError as exc:
            ready = ImageReady(id=0, ready=False, error=str(exc))
        self.cpu_s += ready.cpu_s
        self._image = ready.ready
        if not self._image:  # it would fail the same way again: run the ordinary way
            self.image_error = ready.error[-500:]
            self._image_wanted = False
        return self._image

    def _changed_py(self) -> list[str] | None:
        """The ``.py`` files that differ from the head tree, if nothing else does (files
        added, removed or not Python: None, the image cannot serve that tree)."""
        if self._unknown or self.state.commit != self.head:
            return None
        changed = []
        for rel, data in self._saved.items():
            target = self.root / rel
            now = target.read_bytes() if target.is_file() else None
            if now == data:
                continue
            if data is None or now is None or not rel.endswith(".py"):
                return None
            changed.append(rel)
        return changed

    def _bytes(self, rel: str) -> bytes | None:
        target = self.root / rel
        return target.read_bytes() if target.is_file() else None

    def _stale_server(self) -> bool:
        """Does the tree differ from a file the server imported before forking?"""
        return any(self._bytes(rel) != data for rel, data in self._preloaded.items())

    def equals_head(self) -> bool:
        """Every file the patches touched is back to its bytes at the head commit."""
        return self._changed_py() == []

    def _stop(self) -> None:
        self._image = False
        if self._warm is not None:
            self._warm.close()
            self._warm = None
        if self._spawned is not None:
            self._spawned.close()
            self._spawned = None

    def run(self, nodeids: Sequence[str] | None, timeout: float,
            deadlines: Deadlines | None = None) -> WarmResult:
        """Run ``nodeids`` (None: the whole suite) in a fresh fork of the warm server;
        ``timeout`` bounds the run, ``deadlines`` single tests (see :mod:`.inside.forkrun`).

        A server that died (killed for memory, say) is restarted once and the run repeated;
        if it dies again the error propagates to the candidate, which is then dropped.
        """
        cold = self._warm is not None and self._stale_server()
        if nodeids and not cold and self._image and self._warm is not None \
                and self._warm.alive:
            changed = self._changed_py()
            if changed is None:
                self.image_fallbacks["tree differs from head beyond .py edits"] += 1
            else:
                try:
                    result = self._warm.run_image(list(nodeids), changed, timeout, deadlines)
                except SandboxError:
                    self._stop()  # the server itself went: restarted below
                else:
                    self.cpu_s += result.cpu_s
                    if result.unservable is None:
                        self.image_runs += 1
                        return result
                    if result.unservable == "no head image":
                        self._image = False
                    self.image_fallbacks[result.unservable] += 1
        args = self._pytest_args()
        if nodeids is not None:
            args += list(nodeids)
        for attempt in (0, 1):
            warm = self._warm if self._warm is not None and self._warm.alive else None
            if warm is None:
                self._stop()
                warm = self._start()
                if attempt or self.restarts:
                    self.restarts += 1
            cold = cold or self._stale_server()  # a restarted server imported this tree
            try:
                result = warm.run(args, timeout, deadlines, cold=cold)
                self.cpu_s += result.cpu_s
                self.cold_runs += cold
                return result
            except SandboxError:
                self._stop()
                if attempt:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    # -- tree states --------------------------------------------------------------------

    def checkout(self, state: TreeState) -> None:
        """Put the workspace into ``state``; SynthesisError("patch_failed: ...") if a patch
        does not apply. A state that extends the current one only applies the extra patches.

        The first move away from head starts the warm server (and its head image) first,
        while the workspace is still the head tree."""
        if state == self.state:
            return
        if self._warm is None and self._spawned is None and self.state == TreeState(self.head):
            self._start()
        cur = self.state
        if state.commit == cur.commit and state.patches[: len(cur.patches)] == cur.patches:
            extra = state.patches[len(cur.patches):]
        else:
            self.reset(state.commit)
            extra = state.patches
        for patch in extra:
            if not patch.strip():
                continue
            self._save(patch)
            proc = run_git(["apply", "--whitespace=nowarn", "-"], self.root, input=patch)
            if proc.returncode != 0:
                self.state = TreeState(state.commit, ("<broken>",))
                raise SynthesisError(f"patch_failed: {proc.stderr.strip()[:300]}")
        self.state = state

    def _save(self, patch: str) -> None:
        """Remember the files ``patch`` touches as they are at the state's commit."""
        try:
            paths = {p for fp in parse_patch(patch) for p in (fp.old_path, fp.new_path) if p}
        except Exception:  # noqa: BLE001 - unparseable here: git apply will judge it
            self._unknown = True
            return
        for rel in paths:
            if rel not in self._saved:
                target = self.root / rel
                self._saved[rel] = target.read_bytes() if target.is_file() else None

    def reset(self, commit: str) -> None:
        """The workspace exactly at ``commit``. Within one commit the files the patches
        touched are written back from memory; moving between commits is git's job."""
        if self.state == TreeState(commit):
            return
        self._fast += 1
        # Now and then let git put everything back, files a test run left behind included.
        if self.state.commit == commit and not self._unknown and self._fast % 50:
            for rel, data in self._saved.items():
                target = self.root / rel
                if data is None:
                    target.unlink(missing_ok=True)
                else:
                    target.write_bytes(data)
        else:
            for step in (("checkout", "-q", "-f", "--detach", commit),
                         ("clean", "-q", "-f", "-d")):
                proc = run_git(step, self.root)
                if proc.returncode != 0:
                    raise SandboxError(f"git {step[0]} in a worker failed: {proc.stderr[:200]}")
        self._saved.clear()
        self._unknown = False
        self.state = TreeState(commit)
        if commit == self.head and not self._image and self._warm is not None \
                and self._warm.alive:
            self._start_image()  # the first one died, or the server was restarted

    def abort(self) -> None:
        """A stop in the middle of a run (an error, SIGTERM): kill the server's whole tree,
        so a thread waiting on its reply reads the end of its output at once, and start no
        other server. The streams stay open for that thread; :meth:`close` follows."""
        self._closed = True
        if self._spawned is not None:
            with contextlib.suppress(Exception):
                self._spawned.kill()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(Exception):
            self._stop()
        with contextlib.suppress(Exception):
            self.sb.close()


def open_base(env: RepoEnv, *, backend: str, limits: Limits) -> Sandbox:
    """The sandbox every worker forks: the source's working copy, the env and the server."""
    binds = [*env.binds(), Bind(host=INSIDE_DIR, inside=INSIDE_MOUNT)]
    return open_sandbox(env.source_path, backend=backend, binds=binds, limits=limits)
