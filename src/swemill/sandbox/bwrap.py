"""The default sandbox on Linux: bubblewrap with an explicit allow-list of mounts.

Inside, a command sees: the system (``/usr``, ``/etc`` and the ``/bin``-style links) and the base
Python prefix read-only, the caller's binds, its workspace read-write at ``/workspace`` (also
its working directory), a private ``/tmp`` (``HOME``), its own ``/proc`` and pid namespace, no
network (unless ``limits.net``), no IPC or hostname shared with the host, no host environment
variables. The root is read-only and nothing else of the host (its home, ``/work``, ``/var``,
the host's ``/tmp``) exists.

Who the command is: as an ordinary user, uid 1000 in a user namespace that maps it to the
caller. As root, bwrap (still root, so it can bind the cache and interpreter wherever they are,
e.g. under a 0700 ``/root``) builds the mounts, then a dropper (:mod:`swemill.sandbox._dropper`,
else ``setpriv``) drops the command to the
unprivileged host uid of :mod:`swemill.sandbox._hostuser` with no capabilities and
``no_new_privs``; the workspace's writable layer is handed to that uid before each command.

Limits come from :mod:`swemill.sandbox._run`: per-command cgroups (else rlimits), a file-size
rlimit, a wall clock that kills the whole tree (the pid namespace dies with its first process,
``--die-with-parent`` ties that to us, and the cgroup is emptied), and capped output. bwrap is
started *held* (:mod:`swemill.sandbox._launch`): once the sandbox is built, its child waits
until this process has moved it into the cgroups and set its rlimits, so no shell of ours runs
on the way in.

:meth:`BwrapSandbox.keep_warm` keeps one such sandbox for a session instead and forks each
command in it (:mod:`swemill.sandbox._runner`).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

from swemill.core.errors import SandboxError, SandboxUnavailable
from swemill.sandbox._dropper import INSIDE as DROPPER_INSIDE
from swemill.sandbox._hostuser import drop_argv, drop_binds
from swemill.sandbox._run import run_started
from swemill.sandbox._runner import RequestUnfit, RunnerLost, RunnerSlot, runner_usable
from swemill.sandbox._tree_sandbox import TreeSandbox
from swemill.sandbox.contract import WORKSPACE, Bind, ExecResult, Limits
from swemill.sandbox.fork import OverlayTree

__all__ = ["BwrapSandbox", "bwrap_path", "usable"]

DEFAULT_LIMITS = Limits()  # frozen, so one shared default is safe

_SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
_INSIDE_UID = "1000"


def _install_hint() -> str:
    return "apt-get install -y bubblewrap" if os.geteuid() == 0 else \
        "sudo apt-get install -y bubblewrap"


@functools.cache
def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def _probe(extra: tuple[str, ...], inner: tuple[str, ...] = ()) -> tuple[bool, str]:
    exe = bwrap_path()
    if exe is None:
        return False, "bwrap not found"
    argv = [exe, "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", *extra,
            "--die-with-parent", "--", *inner, "true"]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return p.returncode == 0, p.stderr.strip()[:200]


@functools.cache
def usable() -> tuple[bool, str]:
    """Whether bwrap can create its namespaces here, and why not."""
    return _probe(())


@functools.cache
def _user_ns_args() -> tuple[str, ...]:
    """Run as an unprivileged uid inside when user namespaces allow it (measured: ~1 ms).
    Not as root: a user namespace made by root maps its user to host root."""
    if drop_argv():
        return ()
    args = ("--unshare-user", "--disable-userns", "--uid", _INSIDE_UID, "--gid", _INSIDE_UID)
    return args if _probe(args)[0] else ()


@functools.cache
def _drop_usable() -> tuple[bool, str]:
    """As root: whether a command can be dropped to the sandbox uid inside bwrap."""
    argv = drop_argv()
    if not argv:
        return True, ""
    binds = drop_binds()
    if not binds:
        return _probe((), argv)
    # the probe's root is the host's, read-only: the dropper goes to a fresh /tmp instead
    return _probe(("--tmpfs", "/tmp", "--ro-bind", binds[1], "/tmp/swemill-drop"),
                  ("/tmp/swemill-drop", *argv[1:]))


def _parent_dirs(binds: Sequence[str]) -> list[str]:
    """``--dir`` for the parents of bind targets, world-traversable: bwrap would copy the
    host's modes (a 0700 ``/root`` would stop the dropped uid on its way to the venv)."""
    out: list[str] = []
    for inside in binds:
        parts = Path(inside).parts[1:-1]
        if parts and parts[0] in ("usr", "etc", "proc", "dev"):
            continue
        for i in range(1, len(parts) + 1):
            d = "/" + "/".join(parts[:i])
            if d not in out and not (Path(d).is_symlink() and i == 1):
                out.append(d)
    return [a for d in out for a in ("--perms", "0755", "--dir", d)]


def _system_mounts(net: bool) -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    args += ["--ro-bind", "/etc", "/etc"]
    resolv = Path("/etc/resolv.conf")
    if net and resolv.is_symlink():  # e.g. systemd-resolved keeps it under /run
        real = resolv.resolve()
        if real.exists() and not str(real).startswith(("/etc/", "/usr/")):
            args += ["--ro-bind", str(real), str(real)]
    return args


def _prefix() -> str | None:
    prefix = Path(sys.base_prefix).resolve()  # repository venvs link to this interpreter
    return None if str(prefix).startswith("/usr/") else str(prefix)


def _static_args(limits: Limits, binds: Sequence[Bind]) -> list[str]:
    exe = bwrap_path()
    assert exe is not None
    # /proc/sys read-only even where a knob belongs to the sandbox's own namespaces (bwrap can
    # only bind the host's copy over it: the same global values, never writable)
    args = [exe, *_system_mounts(limits.net), "--proc", "/proc", "--ro-bind", "/proc/sys",
            "/proc/sys", "--dev", "/dev"]
    for tmp in ("/dev/shm", "/tmp"):  # POSIX semaphores live in /dev/shm: writable by anyone
        if limits.memory_mb is not None:  # tmpfs pages are memory: keep them within the limit
            args += ["--size", str(limits.memory_mb << 20)]
        args += ["--perms", "1777", "--tmpfs", tmp]
    args += ["--unshare-pid", "--unshare-ipc",
             "--unshare-uts", "--unshare-cgroup-try", *_user_ns_args(), "--die-with-parent",
             "--new-session"]
    if not limits.net:
        args.append("--unshare-net")
    prefix = _prefix()
    targets = [b.inside for b in binds] + ([prefix] if prefix else [])
    if drop_argv():
        dropper = drop_binds()
        args += _parent_dirs([*targets, WORKSPACE, *([DROPPER_INSIDE] if dropper else [])])
        args += dropper
    if prefix:
        args += ["--ro-bind", prefix, prefix]
    for b in binds:
        args += ["--bind" if b.writable else "--ro-bind", str(b.host), b.inside]
    return args


def _inner(cmd: Sequence[str] | str, cwd: str | None) -> tuple[list[str], str]:
    """The argv that runs ``cmd`` inside, and its working directory there."""
    inner = ["bash", "-c", cmd] if isinstance(cmd, str) else list(cmd)
    if not inner:
        raise SandboxError("empty command")
    return inner, WORKSPACE if cwd is None else (cwd if cwd.startswith("/") else
                                                 f"{WORKSPACE}/{cwd}")


class BwrapSandbox(TreeSandbox):
    """Runs commands with bubblewrap over one workspace (see the module docstring)."""

    workdir = WORKSPACE
    _held = True

    def __init__(self, workspace: Path, *, binds: Sequence[Bind] = (),
                 env: Mapping[str, str] | None = None, limits: Limits = DEFAULT_LIMITS,
                 **kwargs: object) -> None:
        ok, why = usable()
        if not ok:
            raise SandboxUnavailable(f"bwrap sandbox unusable ({why}); fix: {_install_hint()}")
        ok, why = _drop_usable()
        if not ok:  # never run as host root instead
            raise SandboxUnavailable(f"bwrap sandbox cannot drop to an unprivileged uid ({why})")
        super().__init__(workspace, binds=binds, env=env, limits=limits, **kwargs)  # type: ignore[arg-type]
        self._static = _static_args(limits, self.binds)
        self._slot: RunnerSlot | None = None
        self.runner_note = ""
        """Why the last command did not go through the session runner (empty if it did)."""

    def argv(self, cmd: Sequence[str] | str, cwd: str | None = None) -> list[str]:
        """The full bwrap command line that runs ``cmd`` in this sandbox."""
        inner, where = _inner(cmd, cwd)
        return [*self._sandbox_argv(where), *inner]

    def _sandbox_argv(self, where: str) -> list[str]:
        return [*self._static, "--bind", str(self._tree.path), WORKSPACE, "--chdir", where,
                "--remount-ro", "/", "--", *drop_argv()]

    def keep_warm(self, *, wait: bool = False) -> bool:
        """From now on, run this sandbox's commands in one long-lived sandbox of the same
        kind, each forked by a runner inside (:mod:`swemill.sandbox._runner`), which starts
        now in the background (``wait``: wait until it has; a command waits for it anyway).
        False (with :attr:`runner_note` saying why) where a runner cannot keep a sandbox's
        guarantees here or did not start: commands then keep a sandbox each, as they also do
        while another command holds the runner, and when one is too large for it."""
        ok, why = runner_usable(self.limits)
        if not ok:
            self.runner_note = why
            return False
        if self._slot is None:
            self._slot = RunnerSlot(lambda: self._sandbox_argv("/"), self.limits)
        self._slot.prestart()
        if wait and not self._slot.ready():
            self.runner_note = self._slot.why
            return False
        return True

    def _exec(self, cmd: Sequence[str] | str, *, timeout: float, env: dict[str, str],
              cwd: str | None, stdin: bytes | None) -> ExecResult:
        runner, self.runner_note = (self._slot.acquire(wait=False) if self._slot is not None
                                    else (None, "no session runner asked for"))
        if runner is None:
            return super()._exec(cmd, timeout=timeout, env=env, cwd=cwd, stdin=stdin)
        try:
            inner, where = _inner(cmd, cwd)
            self._prepare()
            res = run_started(
                lambda cg: runner.command(inner, env, where, stdin is not None, self.limits, cg),
                stdin=stdin, limits=self.limits, timeout=timeout, usage=self._sweep,
                pool=self._pool, settled_usage=self._settled_sweep, on_settled=runner.settled)
            res.extra["session_runner"] = 1.0
            return res
        except (RunnerLost, RequestUnfit) as exc:  # nothing of the command ran
            self.runner_note = str(exc)
        finally:
            assert self._slot is not None
            self._slot.release(runner)
        return super()._exec(cmd, timeout=timeout, env=env, cwd=cwd, stdin=stdin)

    def fork(self) -> Self:
        if self._slot is None:
            return super().fork()
        self._slot.stop()  # a fork may remount the workspace under the runner: end it first
        try:
            return super().fork()
        finally:
            self._slot.prestart()

    def close(self) -> None:
        if self._slot is not None:
            self._slot.close()
        super().close()

    def _command(self, cmd: Sequence[str] | str, cwd: str | None) -> tuple[list[str], str]:
        return self.argv(cmd, cwd), "/"

    def _prepare(self) -> None:
        """What the host wrote since the last command becomes the sandbox user's to change.
        A fork's own layer is small, so it is always checked (a caller may keep its host
        path and write through it); a plain tree only after the host was given a chance."""
        if self._host_wrote or isinstance(self._tree, OverlayTree):
            self._tree.hand_over()
            self._host_wrote = False
