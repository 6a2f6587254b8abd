"""What every backend shares: a workspace tree, safe file access, fork and close."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

from swemill.core.errors import SandboxError
from swemill.sandbox._cgpool import CgroupPool
from swemill.sandbox._paths import read_in, write_in
from swemill.sandbox._run import run_guarded
from swemill.sandbox._spawn import Spawned, spawn_guarded
from swemill.sandbox.contract import Bind, ExecResult, Limits
from swemill.sandbox.fork import PlainTree, Tree

__all__ = ["TreeSandbox", "BASE_ENV"]

DEFAULT_LIMITS = Limits()  # frozen, so one shared default is safe

BASE_ENV: dict[str, str] = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "TMPDIR": "/tmp",
    # The workspace's .git stays root's (the host runs git there as root, so the sandbox user
    # must not plant hooks or config); git inside would refuse a repository it does not own.
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "safe.directory",
    "GIT_CONFIG_VALUE_0": "*",
}
"""All a command sees besides the caller's own ``env``: nothing leaks from the host."""


class TreeSandbox:
    """A sandbox over a :class:`~swemill.sandbox.fork.Tree`; backends add ``exec``."""

    workdir: str
    can_spawn = True
    """Every tree backend (local, bwrap, docker) can host a warm server (:meth:`spawn`)."""
    _held = False
    """Commands are bwrap command lines, started held (see :mod:`._launch`)."""

    def __init__(self, workspace: Path, *, binds: Sequence[Bind] = (),
                 env: Mapping[str, str] | None = None, limits: Limits = DEFAULT_LIMITS,
                 _tree: Tree | None = None, _pool: CgroupPool | None = None) -> None:
        if _tree is None:
            workspace = Path(workspace).absolute()
            if not workspace.is_dir():
                raise SandboxError(f"workspace {workspace} is not a directory")
            _tree = PlainTree(workspace)
        self._tree = _tree
        self.binds = tuple(binds)
        self.env = dict(env or {})
        self.limits = limits
        self._active = 0
        self._lock = threading.Lock()
        self._closed = False
        self._host_wrote = True
        """The host may have written in the tree since the last command (see ``_prepare``)."""
        self._pool = _pool or CgroupPool()  # shared with forks
        self._pool.attach()

    @property
    def workspace(self) -> Path:
        # whoever holds the host path may write there: a later fork must not reuse a snapshot
        self._tree.touched()
        self._host_wrote = True
        return self._tree.path

    def exec(self, cmd: Sequence[str] | str, *, timeout: float | None = None,
             env: Mapping[str, str] | None = None, cwd: str | None = None,
             stdin: bytes | None = None) -> ExecResult:
        self._check_open()
        with self._lock:
            self._active += 1
        try:
            return self._exec(cmd, timeout=self.limits.timeout_s if timeout is None else timeout,
                              env={**BASE_ENV, **self.env, **(env or {})}, cwd=cwd, stdin=stdin)
        finally:
            self._tree.touched()
            with self._lock:
                self._active -= 1

    def keep_warm(self, *, wait: bool = False) -> bool:
        """Keep one long-lived sandbox for this sandbox's commands where the backend can (see
        :meth:`BwrapSandbox.keep_warm <swemill.sandbox.bwrap.BwrapSandbox.keep_warm>`);
        here it cannot: every command keeps a sandbox of its own (``wait`` changes nothing)."""
        return False

    def _command(self, cmd: Sequence[str] | str, cwd: str | None) -> tuple[list[str], str]:
        """The host argv that runs ``cmd`` in this sandbox, and the host cwd to start it in."""
        raise NotImplementedError

    def _prepare(self) -> None:
        """Called before each command starts (a backend readies the workspace for its user)."""

    def _sweep(self) -> int:
        """Clear set-id bits in this tree's writable layer; the bytes that layer holds."""
        return self._tree.sweep()

    def _settled_sweep(self) -> int:
        """:meth:`_sweep` after a command whose processes are all gone (its cgroup is empty):
        cheaper when no other command or spawned process of this sandbox runs in the tree."""
        with self._lock:
            alone = self._active == 1
        return self._tree.settled_sweep() if alone else self._tree.sweep()

    def _exec(self, cmd: Sequence[str] | str, *, timeout: float, env: dict[str, str],
              cwd: str | None, stdin: bytes | None) -> ExecResult:
        argv, where = self._command(cmd, cwd)
        self._prepare()
        return run_guarded(argv, env=env, cwd=where, stdin=stdin, limits=self.limits,
                           timeout=timeout, usage=self._sweep, held=self._held,
                           pool=self._pool, settled_usage=self._settled_sweep)

    def hand_over(self) -> None:
        """Ready what the host wrote in the workspace for the sandbox user, as before a command
        (for a request to a spawned process that will use those files)."""
        self._check_open()
        self._host_wrote = True
        self._prepare()

    def spawn(self, cmd: Sequence[str] | str, *, env: Mapping[str, str] | None = None,
              cwd: str | None = None) -> Spawned:
        """Start a long-lived ``cmd`` (pipes on stdin/stdout/stderr) under this sandbox's
        isolation and limits, without a wall clock; ``Spawned.close()`` ends its whole tree.
        The sandbox cannot be forked while it runs."""
        self._check_open()
        argv, where = self._command(cmd, cwd)
        self._prepare()
        with self._lock:
            self._active += 1
        return spawn_guarded(argv, env={**BASE_ENV, **self.env, **(env or {})}, cwd=where,
                             limits=self.limits, on_close=self._spawn_done, held=self._held)

    def _spawn_done(self) -> None:
        self._sweep()
        self._tree.touched()
        with self._lock:
            self._active -= 1

    def read_file(self, path: str) -> bytes:
        self._check_open()
        return read_in(self._tree.path, path)

    def write_file(self, path: str, data: bytes | str) -> None:
        self._check_open()
        self._tree.touched()
        self._host_wrote = True
        write_in(self._tree.path, path, data)

    def fork(self) -> Self:
        """A sandbox of the same backend and settings over a copy-on-write snapshot."""
        self._check_open()
        with self._lock:
            if self._active:
                raise SandboxError("cannot fork a sandbox while a command runs in it")
            tree = self._tree.fork()
        return self._clone(tree)

    def _clone(self, tree: Tree) -> Self:
        return type(self)(tree.path, binds=self.binds, env=self.env, limits=self.limits,
                          _tree=tree, _pool=self._pool)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._tree.close()
            self._pool.detach()

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("the sandbox is closed")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._tree.path})"
