"""The grading server: a warm interpreter that forks one grading run per request and leaves
nothing of it behind.

Started (``__main__.py --grade WORKDIR``) in an isolating sandbox over a grading workspace
that the host rebuilds before every request. It imports pytest and its plugins once (none of
the caches of the validation server: nothing a run could write to is read by a later run),
then, per :class:`.Grade`, forks a child that runs ``python -m pytest ARGS`` as a fresh
interpreter would: the request's environment, the working directory, ``sys.argv``, stdout and
stderr on pipes that only this server reads, the interpreter's exit (threads, ``atexit``)
before the exit status. Code of the graded tree runs only in that child.

What keeps one run from reaching another, or this server:

- this process is not dumpable, so the child (same uid) cannot open its pipes through
  ``/proc``, read or write its memory, or trace it; it can only kill it, and then the host
  grades the ordinary way;
- it is a child subreaper: everything the run started stays its descendant, and after the
  child exits every descendant is killed (to none left) before the answer;
- the ``scratch`` directories (the sandbox's private ``/tmp`` and ``/dev/shm``) are emptied,
  and System V IPC objects removed; the host rebuilds the workspace itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import gc
import os
import runpy
import selectors
import shutil
import signal
import sys
import time
from typing import Any

from .codecache import CodeCache
from .forkrun import as_pytest_argv
from .fresh import fresh_stdio, interpreter_exit
from .pristine_codes import PristineCodes
from .protocol import Exit, Flags, Grade, Graded, Ready, decode, encode
from .report_cache import ReportCache
from .serve_loop import _fix_path, _preloaded_files, _warm_up

_PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER = 4, 36
REPORTER = "_swemill_report"
"""swemill's reporter (``-p _swemill_report`` in every grading run): pytest rewrites it in
every run, so its rewritten code is made once, before the first run."""
_IPC_RMID = 0
_DISK_POLL_S = 0.2
_DRAIN_S = 0.5
_AUTOGROUP_WAIT_S = 5.0


def _prctl(option: int, value: int) -> None:
    if ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}, {value}) failed")


class _Capture:
    """The head and a rolling tail of one stream, ``cap`` bytes in all."""

    def __init__(self, cap: int) -> None:
        self.half, self.keep = cap // 2, cap - cap // 2
        self.head, self.tail, self.total = bytearray(), bytearray(), 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > 2 * self.keep + 65536:
            del self.tail[:len(self.tail) - self.keep]

    @property
    def truncated(self) -> bool:
        return self.total > self.half + self.keep

    def text(self) -> str:
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace")
        dropped = self.total - len(self.head) - self.keep
        marker = f"\n[... swemill: {dropped} bytes dropped ...]\n".encode()
        return (bytes(self.head) + marker + bytes(self.tail[-self.keep:])).decode(
            "utf-8", "replace")


def lower_autogroup(nice: int, wait_s: float = 0.0) -> bool:
    """Give this process's autogroup (its session's, with the kernel's autogroups on) the
    niceness ``nice``; whether it took. Autogroups share the CPU by their own weight whatever
    their processes' niceness, so ``os.nice`` alone changes nothing against another session's
    work (a policy's ``bash true``). The kernel takes one such change per 100 ms machine-wide
    from a process without ``CAP_SYS_ADMIN`` (a sandboxed one) and refuses the others with
    EAGAIN: tried again every 20 ms for up to ``wait_s``. False where there are no autogroups
    or the file is not writable."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with open("/proc/self/autogroup", "w") as fh:
                fh.write(str(nice))
            return True
        except OSError as exc:
            if exc.errno != errno.EAGAIN or time.monotonic() >= deadline:
                return False
        time.sleep(0.02)


def _child(request: Grade, workdir: str, out_w: int, err_w: int) -> None:
    """The run itself, in the forked child (never returns)."""
    code = 70
    try:
        # its own process group to kill; it stays in the server's session, whose scheduling
        # autogroup the server niced once at its start (a group per run would need a change
        # per run, which the kernel rate-limits machine-wide: see lower_autogroup)
        os.setpgid(0, 0)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.closerange(3, 65536)  # nothing of the server's reaches the run
        fresh_stdio()
        _prctl(_PR_SET_DUMPABLE, 1)  # as a fresh interpreter is (it only exposes itself)
        # SIGPIPE and SIGXFSZ stay ignored, as Python's start-up leaves them in a fresh
        # interpreter (a write to a closed pipe raises BrokenPipeError; set back to their
        # default, such a write killed the run: apscheduler 3.10.4's process-pool tests)
        if request.nice > 0:
            os.nice(request.nice)
        os.chdir(workdir)
        os.environ.update(request.env)
        import importlib

        importlib.invalidate_caches()  # the workspace was rebuilt since the server looked
        as_pytest_argv(list(request.args))
        # what ``python -m pytest`` runs (pytest's ``__main__``, which ends in SystemExit);
        # ``pytest.console_main`` is deprecated from pytest 9.1 and warns when called
        runpy.run_module("pytest", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:  # as the interpreter ends: None is 0, anything else not an int 1
        code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        code = interpreter_exit(code)
        os._exit(code)


def _exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def _descendants(me: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, stack = [], [me]
    while stack:
        for pid in children.get(stack.pop(), ()):
            out.append(pid)
            stack.append(pid)
    return out


_REAPED: dict[int, tuple[int, Any]] = {}
"""pid -> (status, rusage) of the children :func:`_reap` collected: the run itself may be
among them when it is killed (its deadline, the disk cap), and its status is still needed."""


def _reap() -> None:
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _REAPED[pid] = (status, usage)


def end_descendants(rounds: int = 500) -> bool:
    """Kill every descendant (orphans come back to this subreaper) until none is left."""
    me = os.getpid()
    for _ in range(rounds):
        pids = _descendants(me)
        if not pids:
            return True
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.001)
        _reap()
    return not _descendants(me)


def _mount_points() -> list[str]:
    with open("/proc/self/mountinfo") as fh:
        return [line.split()[4] for line in fh if len(line.split()) > 4]


def _empty(folder: str, mounts: list[str]) -> bool:
    """Delete everything under ``folder`` but mount points and the directories leading to
    them (the sandbox's binds); whether nothing else is left."""
    def _unlock(func, path, _exc):  # noqa: ANN001, ANN202 - shutil's onerror signature
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), 0o700)
            os.chmod(path, 0o700)
            func(path)

    try:
        entries = list(os.scandir(folder))
    except OSError:
        return True
    left = True
    for entry in entries:
        path = entry.path
        if path in mounts:
            continue
        if any(m.startswith(path + "/") for m in mounts):
            left = _empty(path, mounts) and left
            continue
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(path, onerror=_unlock)
            else:
                os.unlink(path)
        left = left and not os.path.lexists(path)
    return left


def _remove_ipc() -> None:
    """System V IPC objects outlive their process: remove every one this namespace holds."""
    libc = ctypes.CDLL(None, use_errno=True)
    for kind, call in (("shm", libc.shmctl), ("sem", libc.semctl), ("msg", libc.msgctl)):
        with contextlib.suppress(OSError), open(f"/proc/sysvipc/{kind}") as fh:
            for line in fh.readlines()[1:]:
                fields = line.split()
                if len(fields) > 1 and fields[1].isdigit():
                    if kind == "sem":
                        call(int(fields[1]), 0, _IPC_RMID, None)
                    else:
                        call(int(fields[1]), _IPC_RMID, None)


def _usage(top: str) -> int:
    used = 0
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            with contextlib.suppress(OSError):
                used += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return used


def _kill_run(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    end_descendants()


def serve_grade(request: Grade, workdir: str) -> Graded:
    """Fork the run, capture its output, bound it in time and disk, then clear what it left."""
    start = time.monotonic()
    _REAPED.clear()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the forked child
        _child(request, workdir, out_w, err_w)
    os.close(out_w)
    os.close(err_w)
    caps = {out_r: _Capture(request.output_bytes), err_r: _Capture(request.output_bytes)}
    sel = selectors.DefaultSelector()
    for fd in caps:
        sel.register(fd, selectors.EVENT_READ)
    streams = len(caps)
    cap = None if request.disk_mb is None else request.disk_mb << 20
    deadline, next_disk = start + float(request.timeout), start + _DISK_POLL_S
    code: int | None = None
    cpu, timed_out, over_disk, clean, drain_until = 0.0, False, False, True, None
    while True:
        if code is None:
            done, status, usage = (pid, *_REAPED.pop(pid)) if pid in _REAPED else \
                os.wait4(pid, os.WNOHANG)
            if done:
                code, cpu = _exit_code(status), usage.ru_utime + usage.ru_stime
                clean = end_descendants()  # what it left behind may hold the pipes open
                drain_until = time.monotonic() + _DRAIN_S
        now = time.monotonic()
        if code is None and (now >= deadline or over_disk):
            timed_out = timed_out or now >= deadline
            _kill_run(pid)
            continue
        if code is None and cap is not None and now >= next_disk:
            over_disk = _usage(workdir) > cap
            next_disk = time.monotonic() + max(_DISK_POLL_S, 10 * (time.monotonic() - now))
            continue
        if drain_until is not None and (not streams or now >= drain_until):
            break
        if not streams:  # it closed its streams and has not exited yet
            time.sleep(0.002)
            continue
        for key, _ in sel.select(0.005 if drain_until is None else drain_until - now):
            chunk = os.read(key.fd, 65536)
            if chunk:
                caps[key.fd].add(chunk)
            else:
                sel.unregister(key.fd)
                streams -= 1
    sel.close()
    for fd in caps:
        os.close(fd)
    if request.scratch:
        mounts = _mount_points()
        clean = all([_empty(folder, mounts) for folder in request.scratch]) and clean
        _remove_ipc()
    out, err = caps[out_r], caps[err_r]
    assert code is not None  # the loop ends only once the child was reaped
    return Graded(id=request.id, exit_code=code,
                  timed_out=timed_out, over_disk=over_disk, stdout=out.text(), stderr=err.text(),
                  truncated=out.truncated or err.truncated, wall_s=time.monotonic() - start,
                  cpu_s=cpu, clean=clean)


def main(argv: list[str]) -> None:
    """``WORKDIR [--nice N]``: give this session's autogroup the niceness N (its runs' group),
    warm up, say :class:`.Ready`, then serve :class:`.Grade` requests."""
    workdir = argv[0] if argv else os.getcwd()
    nice = int(argv[argv.index("--nice") + 1]) if "--nice" in argv[1:] else 0
    if nice > 0:
        lower_autogroup(nice, wait_s=_AUTOGROUP_WAIT_S)
    _fix_path(workdir)
    _prctl(_PR_SET_DUMPABLE, 0)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    flags = Flags.all_off()
    flags.fork = True
    start = time.monotonic()
    _warm_up(CodeCache(os.devnull, enabled=False), ReportCache(), flags, workdir)
    codes = PristineCodes()  # the workspace is the pristine tree until the first request
    codes.fill(workdir, plugins=(REPORTER,))
    codes.install()
    gc.freeze()
    startup = time.monotonic() - start
    out = sys.stdout.buffer
    out.write(encode(Ready(ready=True, startup_s=startup, pid=os.getpid(),
                           preloaded=_preloaded_files(workdir), flags_off=flags.off())))
    out.flush()
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        request = decode(line)
        if isinstance(request, Exit):
            break
        if not isinstance(request, Grade):
            raise ValueError(f"a grading server serves grade requests only, not {request.op}")
        out.write(encode(serve_grade(request, workdir)))
        out.flush()
