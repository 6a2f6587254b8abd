"""Start a sandboxed command inside its cgroups and under its rlimits.

Two ways, one outcome (the command and all it starts are in the groups, under the limits, from
their first instruction):

- *guarded* (local, docker): a tiny ``/bin/sh`` moves itself into the cgroups, sets the rlimits
  and execs the command (same pid). A shell rather than a Python ``preexec_fn``: forking a large
  Python process for a preexec hook costs ~15 ms, the shell under 1 ms.
- *held* (bwrap): bwrap is started with ``--info-fd`` and ``--block-fd``. It builds the sandbox,
  reports the host pid of its child and then waits, before that child starts the command. This
  process moves the child into the groups, sets its rlimits (``prlimit``) and releases it. No
  shell runs, and nothing of ours ever runs inside the sandbox; bwrap's outer monitor process
  stays outside the groups (it only waits for its child).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import shlex
import signal
import subprocess
from collections.abc import Mapping, Sequence

from swemill.core.errors import SandboxError
from swemill.sandbox.cgroups import CommandCgroups
from swemill.sandbox.contract import Limits

__all__ = ["GUARD_FAIL", "guarded_argv", "rlimits", "start"]

GUARD_FAIL = "swemill-guard: cannot enter the command's cgroup"
_START_S = 60.0  # bwrap reports its child's pid long before this, however loaded the host
_SH_FLAG = {resource.RLIMIT_CORE: "-c", resource.RLIMIT_FSIZE: "-f", resource.RLIMIT_AS: "-v",
            resource.RLIMIT_NPROC: "-u"}
_SH_UNIT = {resource.RLIMIT_FSIZE: 512, resource.RLIMIT_AS: 1024}  # POSIX ulimit units


def rlimits(limits: Limits, cg: CommandCgroups | None) -> list[tuple[int, int]]:
    """``(resource, value)`` pairs: no core dumps, the file-size limit, and memory and process
    counts where no cgroup limits them."""
    out = [(resource.RLIMIT_CORE, 0)]
    if limits.file_size_mb is not None:
        out.append((resource.RLIMIT_FSIZE, limits.file_size_mb << 20))
    if limits.memory_mb is not None and (cg is None or not cg.limits_memory):
        out.append((resource.RLIMIT_AS, limits.memory_mb << 20))
    if limits.pids is not None and (cg is None or not cg.limits_pids) and os.geteuid() != 0:
        # RLIMIT_NPROC counts every process of the uid (and root ignores it), so it is set
        # relative to what the user already runs; cgroups are the real answer.
        out.append((resource.RLIMIT_NPROC, limits.pids + _uid_process_count()))
    return out


def _uid_process_count() -> int:
    uid = os.getuid()
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                count += entry.stat().st_uid == uid
    return count


def guarded_argv(argv: Sequence[str], limits: Limits, cg: CommandCgroups | None) -> list[str]:
    """``argv`` behind the guard shell (see the module docstring)."""
    fail = f'{{ echo "{GUARD_FAIL}" >&2; exit 125; }}'
    lines = [f"echo $$ > {shlex.quote(os.fsdecode(p))} || {fail}"
             for p in (cg.procs_files if cg is not None else [])]
    for res, value in rlimits(limits, cg):
        u = f"{_SH_FLAG[res]} {value // _SH_UNIT.get(res, 1)}"
        # dash (Debian's /bin/sh) names the process limit -p, bash -u
        lines.append(f"ulimit {u} 2>/dev/null || ulimit -p {u[3:]} || exit 125"
                     if res == resource.RLIMIT_NPROC else f"ulimit {u} || exit 125")
    lines.append('exec "$@"')
    return ["/bin/sh", "-c", "\n".join(lines), "swemill-guard", *argv]


def start(argv: Sequence[str], *, held: bool, env: Mapping[str, str], cwd: str | None,
          stdin: bool, limits: Limits, cg: CommandCgroups | None,
          pass_fds: tuple[int, ...] = ()) -> subprocess.Popen[bytes]:
    """Start ``argv`` (a bwrap command line when ``held``) with pipes for its output (and its
    input when ``stdin``), ``pass_fds`` left open in it; raises :class:`SandboxError` when it
    cannot be started."""
    if not held:
        return _popen(guarded_argv(argv, limits, cg), env, cwd, stdin, pass_fds)
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    try:
        try:
            proc = _popen([argv[0], "--info-fd", str(info_w), "--block-fd", str(block_r),
                           *argv[1:]], env, cwd, stdin, (info_w, block_r, *pass_fds))
        finally:
            os.close(info_w)
            os.close(block_r)
        try:
            pid = _child_pid(info_r)
            if pid is not None:
                _place(pid, limits, cg)
        except BaseException:
            _stop(proc)
            raise
        with contextlib.suppress(BrokenPipeError):  # bwrap failed early: its stderr says why
            os.write(block_w, b"\0")
        return proc
    finally:
        os.close(info_r)
        os.close(block_w)


def _popen(argv: Sequence[str], env: Mapping[str, str], cwd: str | None, stdin: bool,
           fds: tuple[int, ...]) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            argv, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(env), cwd=cwd,
            start_new_session=True, close_fds=True, pass_fds=fds)
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxError(f"cannot start {argv[0]}: {exc}") from exc


def _child_pid(fd: int) -> int | None:
    """The pid bwrap reports on its info fd; None when it exited without reporting one."""
    data = b""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while True:
        if not poller.poll(_START_S * 1000):
            raise SandboxError(f"bwrap did not report its child within {_START_S:.0f} s")
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    if not data:
        return None
    try:
        return int(json.loads(data)["child-pid"])
    except (ValueError, KeyError, TypeError) as exc:
        raise SandboxError(f"bwrap reported no child pid: {data[:200]!r}") from exc


def _place(pid: int, limits: Limits, cg: CommandCgroups | None) -> None:
    """Move bwrap's waiting child into the command's groups and set its rlimits."""
    try:
        if cg is not None:
            cg.add(pid)
        for res, value in rlimits(limits, cg):
            resource.prlimit(pid, res, (value, value))
    except ProcessLookupError:
        return  # it is gone already: its exit status tells why
    except OSError as exc:
        raise SandboxError(f"cannot place the sandbox in its cgroups and limits: {exc}") from exc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
