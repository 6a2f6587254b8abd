"""Long-lived processes in a sandbox (a warm test worker, a server the caller talks to).

:func:`spawn_guarded` starts the command under the same cgroups and rlimits as an ``exec``
and hands back the :class:`subprocess.Popen` with its three pipes. The caller owns the
conversation; :meth:`Spawned.close` kills the whole tree and removes the cgroups.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence

from swemill.sandbox._cgpool import open_cgroups
from swemill.sandbox._launch import start as launch
from swemill.sandbox.cgroups import CommandCgroups
from swemill.sandbox.contract import KilledReason, Limits

__all__ = ["Spawned", "spawn_guarded"]


class Spawned:
    """A running sandboxed process: ``proc`` (stdin/stdout/stderr are pipes) and its cleanup."""

    def __init__(self, proc: subprocess.Popen[bytes], cg: CommandCgroups | None,
                 on_close: Callable[[], None]) -> None:
        self.proc = proc
        self._cg = cg
        self._on_close = on_close
        self._closed = False

    def kill(self) -> None:
        """SIGKILL the process and everything it started."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self._cg is not None:
            self._cg.kill_all()

    def killed_reason(self) -> KilledReason | None:
        """A limit the tree ran into so far (memory or pids), if any."""
        if self._cg is not None and self._cg.oom_killed():
            return "memory"
        if self._cg is not None and self._cg.pids_limit_hit():
            return "pids"
        return None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.kill()
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        finally:
            if self._cg is not None:
                self._cg.remove()
            self._on_close()

    def __enter__(self) -> Spawned:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def spawn_guarded(argv: Sequence[str], *, env: Mapping[str, str], cwd: str, limits: Limits,
                  on_close: Callable[[], None], held: bool = False,
                  pass_fds: tuple[int, ...] = ()) -> Spawned:
    """Start ``argv`` under ``limits`` (``held``: a bwrap command line, see :mod:`._launch`;
    ``pass_fds`` stay open in it)."""
    cg = open_cgroups(limits)
    try:
        proc = launch(argv, held=held, env=env, cwd=cwd, stdin=True, limits=limits, cg=cg,
                      pass_fds=pass_fds)
    except BaseException:
        if cg is not None:
            cg.remove()
        on_close()
        raise
    return Spawned(proc, cg, on_close)
