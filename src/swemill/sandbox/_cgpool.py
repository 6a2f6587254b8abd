"""The cgroups a command runs in: made for it, or kept from an earlier command of its family.

Making a command's groups (a directory per controller, its limits) and removing them costs
~0.7 ms of CPU per command, and an emptied group is as good as a new one. So a sandbox and its
forks (a *family*) share a :class:`CgroupPool`: after a command its groups are emptied (every
member killed) and kept for the next one; the counters that say why a command was killed are
read relative to their value when it started. Groups still holding more than
:data:`KEEP_CHARGED_MB` of page cache are removed instead (their charge moves to the parent),
so what one command left in memory never counts much against another's limit. The family's
last ``close()`` removes what is kept.
"""

from __future__ import annotations

import threading
import weakref

from swemill.core.errors import SandboxError
from swemill.sandbox.cgroups import CommandCgroups, cgroup_support
from swemill.sandbox.contract import Limits

__all__ = ["KEEP_CHARGED_MB", "CgroupPool", "open_cgroups"]

KEEP_CHARGED_MB = 64
_MAX_KEPT = 4  # more than a family runs at once in practice (validation's workers)


def open_cgroups(limits: Limits) -> CommandCgroups | None:
    """Fresh groups for one command, or None when nothing is limited or nothing is writable."""
    if limits.pids is None and limits.memory_mb is None:
        return None
    support = cgroup_support()
    if not (support.pids or support.memory):
        return None
    try:
        cg = CommandCgroups(limits.pids if support.pids else None,
                            limits.memory_mb if support.memory else None)
    except OSError as exc:
        raise SandboxError(f"cannot create the command's cgroups: {exc}") from exc
    return cg if cg.active else None


_Key = tuple[int | None, int | None]


def _remove_all(kept: list[tuple[_Key, CommandCgroups]]) -> None:
    while kept:
        kept.pop()[1].remove()


class CgroupPool:
    """Emptied command groups of one sandbox family, handed to its next commands."""

    def __init__(self) -> None:
        self._kept: list[tuple[_Key, CommandCgroups]] = []
        self._lock = threading.Lock()
        self._users = 0
        self._closed = False
        # also at interpreter exit, for a family nobody closed
        self._finalizer = weakref.finalize(self, _remove_all, self._kept)

    def attach(self) -> None:
        with self._lock:
            self._users += 1

    def detach(self) -> None:
        """A member of the family closed; the last one removes the kept groups."""
        with self._lock:
            self._users -= 1
            self._closed = self._users <= 0
        if self._closed:
            self._finalizer()

    def acquire(self, limits: Limits) -> CommandCgroups | None:
        """Groups for one command under ``limits`` (None: nothing to limit, or no cgroups)."""
        key = (limits.pids, limits.memory_mb)
        with self._lock:
            found = next((i for i, (k, _) in enumerate(self._kept) if k == key), None)
            cg = None if found is None else self._kept.pop(found)[1]
        if cg is None:
            return open_cgroups(limits)
        cg.reuse()
        return cg

    def release(self, cg: CommandCgroups, limits: Limits) -> None:
        """Keep ``cg`` for a later command if it is empty and holds little memory."""
        keep = cg.kill_all() and cg.memory_charged() <= KEEP_CHARGED_MB << 20
        with self._lock:
            if keep and not self._closed and len(self._kept) < _MAX_KEPT:
                self._kept.append(((limits.pids, limits.memory_mb), cg))
                return
        cg.remove()
