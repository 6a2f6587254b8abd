"""What a swemill process leaves on the host, named after it, and the sweep of what the dead left.

Every temporary folder swemill makes is ``<tmp>/swemill-<pid>-<kind>-*`` (:func:`scratch_dir`;
a few small trees rebuilt often, the warm grading slots, under ``/dev/shm`` instead),
every cgroup ``swemill-<pid>-*`` (:mod:`swemill.sandbox.cgroups`) and every overlay store
``<tmp>/swm-<pid>-*`` (:mod:`swemill.sandbox.fork`). A process removes its own on the way out,
a SIGTERM included (the CLI turns it into a normal exit); a SIGKILL leaves them. So each CLI
start calls :func:`sweep`, which removes the ones whose owner pid is no longer running — never
those of a live process, whoever it is.

A pid that was reused by an unrelated process keeps its leftovers until that process ends:
the sweep errs on the side of keeping things.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from swemill.sandbox import fork
from swemill.sandbox.cgroups import reap_dead_groups

__all__ = ["MEMORY_HEADROOM", "PREFIX", "Sweep", "memory_parent", "scratch_dir", "scratch_prefix",
           "owner_pid", "remove_own", "sweep", "sweep_scratch"]

PREFIX = "swemill-"


def scratch_prefix(kind: str) -> str:
    """The ``mkdtemp``/``TemporaryDirectory`` prefix of a folder this process owns."""
    return f"{PREFIX}{os.getpid()}-{kind}-"


MEMORY_HEADROOM = 1 << 30
"""Free bytes ``/dev/shm`` must have for a folder to be made there (a container's default
``/dev/shm`` of 64 MiB would fill with one grading tree: such slots stay on disk)."""


def memory_parent(min_free: int = MEMORY_HEADROOM) -> Path | None:
    """``/dev/shm`` when it is a tmpfs this process can write to with at least ``min_free``
    bytes free, else None. Making a file or folder there costs a fraction of the CPU it costs
    on a disk's filesystem (on this project's ext4 ``/tmp``, a 51-file grading tree took
    ~40 ms of CPU to build, ~4 ms in ``/dev/shm``)."""
    global _MEMORY
    if _MEMORY is None:
        shm, found = Path("/dev/shm"), False
        with contextlib.suppress(OSError):
            found = any(line.split()[1:3] == ["/dev/shm", "tmpfs"]
                        for line in Path("/proc/self/mounts").read_text().splitlines())
        _MEMORY = (shm if found and os.access(shm, os.W_OK | os.X_OK) else None,)
    memory = _MEMORY[0]
    if memory is None or not min_free:
        return memory
    try:
        st = os.statvfs(memory)
    except OSError:
        return None
    return memory if st.f_bavail * st.f_frsize >= min_free else None


_MEMORY: tuple[Path | None] | None = None


def scratch_dir(kind: str, *, in_memory: bool = False) -> Path:
    """A new private folder under the temp directory, named after this process;
    ``in_memory``: under :func:`memory_parent` where there is one with room (small trees
    rebuilt often), else under the temp directory."""
    parent = memory_parent() if in_memory else None
    return Path(tempfile.mkdtemp(prefix=scratch_prefix(kind), dir=parent))


def _parents() -> list[Path]:
    """Where :func:`scratch_dir` makes folders."""
    memory = memory_parent(min_free=0)  # what was made there, however full it is now
    return [Path(tempfile.gettempdir()), *([memory] if memory is not None else [])]


def owner_pid(name: str, prefix: str = PREFIX) -> int | None:
    """The pid in ``<prefix><pid>-...``, or None when the name records none."""
    if not name.startswith(prefix):
        return None
    pid, sep, _ = name[len(prefix):].partition("-")
    return int(pid) if sep and pid.isdigit() and int(pid) > 0 else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def _dead_owned(parent: Path, prefix: str) -> list[Path]:
    try:
        entries = list(parent.iterdir())
    except OSError:
        return []
    out = []
    for entry in entries:
        pid = owner_pid(entry.name, prefix)
        if pid is not None and pid != os.getpid() and not _alive(pid):
            out.append(entry)
    return out


def _remove(entry: Path) -> None:
    if entry.is_symlink() or not entry.is_dir():
        with contextlib.suppress(OSError):
            entry.unlink()
    else:
        fork.unmount_under(entry)
        shutil.rmtree(entry, ignore_errors=True)


def sweep_scratch(parent: Path | None = None) -> list[Path]:
    """Remove ``swemill-<pid>-*`` folders (and files) of dead processes; returns them."""
    removed = []
    for entry in [e for p in ([parent] if parent else _parents()) for e in _dead_owned(p, PREFIX)]:
        _remove(entry)
        if not entry.exists() and not entry.is_symlink():
            removed.append(entry)
    return removed


def remove_own(parent: Path | None = None) -> list[Path]:
    """Remove this process's own ``swemill-<pid>-*`` folders and ``swm-<pid>-*`` overlay stores
    (their mounts detached first); the CLI's last act on the way out.

    A ``finally`` that deletes a folder can itself be cut short by SIGTERM (the signal lands
    mid-``rmtree``, or between ``mkdtemp`` and the ``try``, as in the overlay probe of
    :func:`swemill.sandbox.fork.overlay_usable`); this catches what such a cut left."""
    mine = (f"{PREFIX}{os.getpid()}-", f"{fork.STORE_PREFIX}{os.getpid()}-")
    removed = []
    for entry in [e for p in ([parent] if parent else _parents()) for e in _listing(p)]:
        if not entry.name.startswith(mine):
            continue
        _remove(entry)
        removed.append(entry)
    return removed


def _listing(parent: Path) -> list[Path]:
    try:
        return list(parent.iterdir())
    except OSError:
        return []


@dataclass(slots=True)
class Sweep:
    groups: list[Path] = field(default_factory=list)
    folders: list[Path] = field(default_factory=list)


def sweep() -> Sweep:
    """Remove the cgroups, temporary folders and overlay stores of dead swemill processes.

    Cheap (a directory listing per place) and never raises: it runs at every CLI start."""
    done = Sweep()
    with contextlib.suppress(OSError):
        done.groups = reap_dead_groups(_alive)
    with contextlib.suppress(OSError):
        done.folders = sweep_scratch()  # the temp directory and memory_parent()
    with contextlib.suppress(OSError, ImportError, AttributeError):
        fork._reap_stale(fork._store_parent())
    return done
