"""A session's commands in one long-lived sandbox: a runner inside forks each of them.

A sandbox per command costs ~9 ms of CPU and five processes (bwrap, its monitor, the pid
namespace's init, the dropper, the command). A :class:`SessionRunner` builds one bwrap sandbox
for a session (the same mounts, namespaces, uid drop, no-new-privileges and rlimits as a
command's, and cgroups of its own) running :mod:`._runner_inside`, and every command of the
session is forked there:

1. the host makes the command's pipes and sends them with its argv, environment and cwd;
2. the runner forks; the child waits; the runner hands the host a pidfd of it;
3. the host moves the child into the command's own cgroups (from the sandbox family's pool,
   as for a command with a sandbox of its own; the child has set the command's rlimits on
   itself), then lets it ``exec``;
4. output, wall clock and disk cap are :func:`~swemill.sandbox._run.run_started`'s, as for
   every command; once the main process exits, whatever it left behind (background and
   daemonised processes) is killed with its cgroup: nothing outlives its command;
5. the runner reports the exit status; the host then tells it to tidy up (``/tmp`` and
   ``/dev/shm`` emptied, System V IPC objects removed), so nothing a command leaves in memory
   outlives it either.

A session's commands share the sandbox's namespaces one after another, never at once: the
next command starts only once the last one's cgroup is empty. Only the runner holds its end
of the socket (see :mod:`._runner_inside`): a command can kill or stop the runner of its own
session, never forge a reply. A lost runner (its socket closed, or no answer in time) is
ended with everything in its sandbox, its command reported killed, and the next command
starts a new one. Where a runner cannot run (no cgroup to kill a command's leftovers with,
no pidfds, an interpreter outside the sandbox's view, a request too large for one message),
commands keep a sandbox each (:class:`~swemill.sandbox.bwrap.BwrapSandbox` decides).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO

from swemill.core.errors import SandboxError
from swemill.sandbox._launch import rlimits
from swemill.sandbox._spawn import Spawned, spawn_guarded
from swemill.sandbox.cgroups import CommandCgroups, cgroup_support
from swemill.sandbox.contract import Limits

__all__ = ["MAX_REQUEST", "RunnerLost", "RequestUnfit", "RemoteCommand", "RunnerSlot",
           "SessionRunner", "runner_usable"]

MAX_REQUEST = 1 << 17
"""Bytes of one request (argv, environment, cwd); larger ones get a sandbox of their own."""
SOURCE = Path(__file__).with_name("_runner_inside.py")
_START_S = 60.0  # the runner reports ready long before this, however loaded the host
_ANSWER_S = 30.0  # a fork and a pidfd
_STATUS_S = 10.0  # the exit status, once the command's processes are gone
_RUNNER_PIDS = 16  # bwrap's init, the runner, a child before it moves, tidying tools


class RunnerLost(SandboxError):
    """The runner is gone or did not answer; the caller ends it (the command did not run)."""


class RequestUnfit(SandboxError):
    """A command a runner cannot carry (too large, a NUL byte, no cgroups): run it apart."""


def interpreter() -> str | None:
    """The Python the runner runs on, where the sandbox sees it (its prefix or /usr)."""
    exe = Path(sys.executable).resolve()
    base = Path(sys.base_prefix).resolve()
    return str(exe) if exe.is_relative_to(base) or exe.is_relative_to("/usr") else None


def runner_usable(limits: Limits) -> tuple[bool, str]:
    """Whether a session runner can keep this sandbox's guarantees here, and why not."""
    if limits.pids is None and limits.memory_mb is None:
        return False, "no pids or memory limit: no cgroup to end a command's leftovers"
    support = cgroup_support()
    if not (support.pids or support.memory):
        return False, "no writable cgroup (pids or memory) to end a command's leftovers"
    if not hasattr(os, "pidfd_open"):
        return False, "no pidfd_open"
    if interpreter() is None:
        return False, f"the interpreter {sys.executable} is not visible in the sandbox"
    return True, ""


def _host_pid(pidfd: int) -> int:
    """The pid, in this process's namespace, of the process ``pidfd`` refers to."""
    with open(f"/proc/self/fdinfo/{pidfd}", "rb") as fh:
        for line in fh:
            if line.startswith(b"Pid:"):
                pid = int(line.split()[1])
                if pid > 0:
                    return pid
    raise RunnerLost("the runner's child is not visible from the host")


def _request(argv: Sequence[str], env: Mapping[str, str], cwd: str,
             limits: list[tuple[int, int]]) -> bytes:
    pairs = ",".join(f"{res}={value}" for res, value in limits)
    fields = [cwd, pairs, str(len(argv)), *argv, *(f"{k}={v}" for k, v in env.items())]
    raw = [os.fsencode(f) for f in fields]
    if any(b"\0" in f for f in raw):
        raise RequestUnfit("a NUL byte in the command or its environment")
    data = b"R" + b"\0".join(raw)
    if len(data) > MAX_REQUEST:
        raise RequestUnfit(f"the command and its environment exceed {MAX_REQUEST} bytes")
    return data


class RemoteCommand:
    """A command forked by the runner, as :func:`~swemill.sandbox._run.run_started` drives
    it: its host pid, the host ends of its pipes, its exit status (from the runner)."""

    def __init__(self, runner: SessionRunner, pid: int, fds: tuple[int | None, int, int]) -> None:
        self._runner = runner
        self.pid = pid
        self.returncode: int | None = None
        self.stdin: IO[bytes] | None = (os.fdopen(fds[0], "wb", buffering=0)
                                        if fds[0] is not None else None)
        self.stdout: IO[bytes] | None = os.fdopen(fds[1], "rb", buffering=0)
        self.stderr: IO[bytes] | None = os.fdopen(fds[2], "rb", buffering=0)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            self.returncode = self._runner.exit_status()
        return self.returncode


class SessionRunner:
    """One session's sandbox and the runner in it (see the module docstring)."""

    def __init__(self, spawned: Spawned, sock: socket.socket) -> None:
        self._spawned = spawned
        self._sock = sock
        self.lost = False

    @classmethod
    def start(cls, sandbox_argv: Sequence[str], limits: Limits) -> SessionRunner:
        """Start the runner with ``sandbox_argv`` (a held bwrap command line ending in ``--``
        and the uid drop) and wait until it is ready. Call from a thread that outlives it:
        bwrap's ``--die-with-parent`` follows the thread that started it."""
        exe = interpreter()
        if exe is None:
            raise SandboxError(f"the interpreter {sys.executable} is not visible in the sandbox")
        host, inside = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            argv = [*sandbox_argv, exe, "-I", "-S", "-B", "-c", SOURCE.read_text(),
                    str(inside.fileno())]
            group = dataclasses.replace(limits, pids=_RUNNER_PIDS)
            spawned = spawn_guarded(argv, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                                    cwd="/", limits=group, on_close=lambda: None, held=True,
                                    pass_fds=(inside.fileno(),))
        except BaseException:
            host.close()
            raise
        finally:
            inside.close()
        runner = cls(spawned, host)
        try:
            host.settimeout(_START_S)
            ready = host.recv(256)
        except OSError:
            ready = b""
        if ready != b"Sready":
            why = ready[1:].decode(errors="replace") or runner._stderr() or "no answer"
            runner.close()
            raise SandboxError(f"the session runner did not start: {why}")
        return runner

    def _stderr(self) -> str:
        stream = self._spawned.proc.stderr
        if stream is None or self._spawned.proc.poll() is None:
            return ""
        return stream.read(4096).decode(errors="replace").strip()[-300:]

    @property
    def alive(self) -> bool:
        return not self.lost and self._spawned.proc.poll() is None

    def command(self, argv: Sequence[str], env: Mapping[str, str], cwd: str, stdin: bool,
                limits: Limits, cg: CommandCgroups | None) -> tuple[RemoteCommand, int]:
        """Fork ``argv`` in the runner, inside ``cg`` and under ``limits``'s rlimits; returns it
        and a pidfd of it. Raises :class:`RequestUnfit` or :class:`RunnerLost` before the
        command has run anything."""
        if cg is None:
            raise RequestUnfit("no cgroup for the command")
        data = _request(argv, env, cwd, rlimits(limits, cg))
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        in_r, in_w = os.pipe() if stdin else (os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC),
                                              None)
        ours = [out_r, err_r, *([in_w] if in_w is not None else [])]
        try:
            fds = self._launch(data, (in_r, out_w, err_w), cg)
        except BaseException:
            for fd in ours:
                os.close(fd)
            raise
        pid, pidfd = fds
        return RemoteCommand(self, pid, (in_w, out_r, err_r)), pidfd

    def _launch(self, data: bytes, theirs: tuple[int, int, int],
                cg: CommandCgroups) -> tuple[int, int]:
        try:
            try:
                socket.send_fds(self._sock, [data], list(theirs))
            finally:
                for fd in theirs:
                    os.close(fd)
            self._sock.settimeout(_ANSWER_S)
            answer, fds, _, _ = socket.recv_fds(self._sock, 256, 2)
        except OSError as exc:
            self.lost = True
            raise RunnerLost(f"the session runner is gone: {exc}") from exc
        if not answer.startswith(b"S") or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            self.lost = True
            raise RunnerLost(f"the session runner answered {answer[:100]!r}")
        pidfd, go = fds
        try:
            pid = _host_pid(pidfd)
            cg.add(pid)
            os.write(go, b"g")
        except OSError as exc:  # the command has not run: it may run apart
            os.close(pidfd)
            self.lost = True
            raise RunnerLost(f"the session runner's command could not start: {exc}") from exc
        finally:
            os.close(go)
        return pid, pidfd

    def exit_status(self) -> int:
        """The command's exit status as a sandbox of its own reports it (bwrap's init turns a
        death by signal N into status 128 + N); a lost runner's command counts as killed
        (``-SIGKILL``, as :class:`subprocess.Popen` says it)."""
        try:
            self._sock.settimeout(_STATUS_S)
            answer = self._sock.recv(64)
            if answer.startswith(b"X"):
                code = os.waitstatus_to_exitcode(int(answer[1:]))
                return 128 - code if code < 0 else code
        except (OSError, ValueError):
            pass
        self.lost = True
        return -signal.SIGKILL

    def settled(self, emptied: bool) -> None:
        """The command is over: tidy up after it, or end the runner when its cgroup could not
        be emptied (nothing may run beside the next command) or the runner is lost."""
        if emptied and self.alive:
            try:
                self._sock.send(b"T")
                return
            except OSError:
                self.lost = True
        self.close()

    def close(self) -> None:
        """End the runner and everything in its sandbox."""
        self.lost = True
        with contextlib.suppress(OSError):
            self._sock.close()
        self._spawned.close()


_MAX_LOST = 3
"""Runners a sandbox may lose (a command that kills its runner each time) before its commands
go back to a sandbox each."""


class RunnerSlot:
    """A sandbox's session runner: started in the background, used by one command at a time,
    started again when lost (up to :data:`_MAX_LOST` times), ended before a fork and at close.

    Every start runs on one thread of the slot's own, which lives until :meth:`close`: bwrap's
    ``--die-with-parent`` follows the thread that started it, and commands come from
    short-lived request threads."""

    def __init__(self, sandbox_argv: Callable[[], list[str]], limits: Limits) -> None:
        self._argv = sandbox_argv
        self._limits = limits
        self._lock = threading.Lock()
        self._starter: ThreadPoolExecutor | None = None
        self._future: Future[SessionRunner] | None = None
        self._lost = 0
        self.why = ""
        """Why commands run in a sandbox each (empty while the runner serves them)."""

    def prestart(self) -> None:
        """Start the runner in the background unless it runs or is starting."""
        with self._lock:
            self._submit()

    def _submit(self) -> None:
        if self._future is None and not self.why:
            if self._starter is None:
                self._starter = ThreadPoolExecutor(max_workers=1,
                                                   thread_name_prefix="session-runner")
            self._future = self._starter.submit(SessionRunner.start, self._argv(), self._limits)

    def acquire(self, *, wait: bool = False) -> tuple[SessionRunner | None, str]:
        """The runner, for one command, or None and why not: another command holds it, it
        is still starting (``wait``: wait for it instead), it cannot run. Without a runner
        the command runs in a sandbox of its own."""
        if not self._lock.acquire(blocking=False):
            return None, "another command holds the session runner"
        try:
            self._submit()
            future = self._future
            if future is None:
                self._lock.release()
                return None, self.why
            if not wait and not future.done():
                self._lock.release()
                return None, "the session runner is starting"
            return future.result(timeout=_START_S), ""
        except (SandboxError, OSError, TimeoutError) as exc:
            self.why = f"the session runner cannot start: {exc}"
            self._future = None
            self._lock.release()
            return None, self.why

    def ready(self) -> bool:
        """Wait until the runner has started; whether it did."""
        runner, _ = self.acquire(wait=True)
        if runner is not None:
            self._lock.release()
        return runner is not None

    def release(self, runner: SessionRunner) -> None:
        """The command is done; a runner lost on the way is ended (a later command starts
        another)."""
        try:
            if not runner.alive:
                runner.close()
                self._future = None
                self._lost += 1
                if self._lost >= _MAX_LOST:
                    self.why = f"the session runner was lost {self._lost} times"
        finally:
            self._lock.release()

    def stop(self) -> None:
        """End the runner (before the workspace's mount changes); the next command starts a
        new one. Waits for a command that holds it."""
        with self._lock:
            future, self._future = self._future, None
        if future is not None:
            with contextlib.suppress(SandboxError, OSError):
                future.result(timeout=_START_S).close()

    def close(self) -> None:
        self.stop()
        with self._lock:
            self.why = self.why or "the sandbox is closed"
            if self._starter is not None:
                self._starter.shutdown(wait=False)
