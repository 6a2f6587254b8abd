"""Per-command cgroups: a process-count and a memory limit for one command and its whole tree.

Each command gets its own ``swemill-<pid>-<uuid>`` groups, created as children of the caller's
own cgroup (so limits that already bound the caller still bound the command). Only the sandboxed
child is moved in, from inside itself (:meth:`CommandCgroups.enter` runs between fork and exec),
so everything it spawns — including daemonised grandchildren — stays in the group and can be
counted and killed. The groups are removed after every command, also on errors.

cgroup v1 (``/sys/fs/cgroup/{pids,memory}``) and the v2 unified hierarchy are both handled.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CgroupSupport", "CommandCgroups", "cgroup_support", "leftover_groups",
           "reap_dead_groups"]

ROOT = Path("/sys/fs/cgroup")
PREFIX = "swemill-"


@dataclass(slots=True, frozen=True)
class CgroupSupport:
    """Which cgroup controllers this process can use for its commands."""

    version: str
    """``"v1"``, ``"v2"`` or ``""`` when no cgroup hierarchy is mounted."""
    pids: bool
    memory: bool


def _own_paths() -> dict[str, str]:
    """Controller name (``""`` for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    out: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            out[name] = path
    return out


def _is_v2() -> bool:
    return (ROOT / "cgroup.controllers").exists()


def _v1_parent(controller: str, own: dict[str, str]) -> Path | None:
    base = ROOT / controller
    if controller not in own or not (base / "cgroup.procs").exists():
        return None
    parent = base / own[controller].lstrip("/")
    return parent if os.access(parent, os.W_OK) else None


def _v2_parent(own: dict[str, str]) -> tuple[Path | None, set[str]]:
    parent = ROOT / own.get("", "/").lstrip("/")
    if not os.access(parent, os.W_OK):
        return None, set()
    try:
        enabled = set((parent / "cgroup.subtree_control").read_text().split())
    except OSError:
        return None, set()
    return parent, enabled & {"pids", "memory"}


def cgroup_support() -> CgroupSupport:
    """Which controllers are writable here (cheap: a few stat calls)."""
    own = _own_paths()
    if _is_v2():
        parent, enabled = _v2_parent(own)
        return CgroupSupport("v2", parent is not None and "pids" in enabled,
                             parent is not None and "memory" in enabled)
    if not (ROOT / "pids").exists() and not (ROOT / "memory").exists():
        return CgroupSupport("", False, False)
    return CgroupSupport("v1", _v1_parent("pids", own) is not None,
                         _v1_parent("memory", own) is not None)


def _group_parents() -> list[Path]:
    own = _own_paths()
    return [ROOT / own.get("", "/").lstrip("/")] if _is_v2() else [
        p for c in ("pids", "memory") if (p := _v1_parent(c, own)) is not None]


def leftover_groups(pid: int | None = None) -> list[Path]:
    """Groups process ``pid`` (default: this one) created and has not removed."""
    mine = f"{PREFIX}{pid or os.getpid()}-*"
    return [g for parent in _group_parents() for g in parent.glob(mine)]


def reap_dead_groups(alive: Callable[[int], bool]) -> list[Path]:
    """Kill the members of, and remove, every ``swemill-<pid>-*`` group beside ours whose
    owner pid is not ``alive`` (a SIGKILLed run leaves its groups, members and all).
    Returns the groups removed."""
    removed: list[Path] = []
    for parent in _group_parents():
        for group in parent.glob(f"{PREFIX}*-*"):
            pid = group.name[len(PREFIX):].partition("-")[0]
            if not pid.isdigit() or int(pid) == os.getpid() or alive(int(pid)):
                continue
            leftover = CommandCgroups.adopt(group)
            if not leftover.remove(deadline_s=2.0):
                removed.append(group)
    return removed


def _write(path: Path, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _read(path: bytes | Path) -> bytes:
    """A cgroup file's contents, read to the end with raw reads (~4x cheaper than
    ``Path.read_text``; a command's groups are read about ten times per command)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = [os.read(fd, 1 << 16)]
        while chunks[-1]:
            chunks.append(os.read(fd, 1 << 16))
        return b"".join(chunks)
    finally:
        os.close(fd)


def _read_int_field(path: Path, key: str) -> int:
    want = key.encode()
    try:
        for line in _read(path).splitlines():
            name, _, value = line.partition(b" ")
            if name == want:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


class CommandCgroups:
    """The groups of one command: create, enter (in the child), inspect, kill, remove."""

    def __init__(self, pids: int | None, memory_mb: int | None) -> None:
        self.version = ""
        self.dirs: list[Path] = []
        self._pids_dir: Path | None = None
        self._mem_dir: Path | None = None
        self._procs: list[bytes] = []
        self._counts = (0, 0)  # oom kills, pids-limit hits before the current command
        self._empty = False  # seen empty by kill_all, and nothing added since
        name = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
        try:
            if _is_v2():
                self._create_v2(name, pids, memory_mb)
            else:
                self._create_v1(name, pids, memory_mb)
        except BaseException:
            self.remove()
            raise
        self._procs = [os.fsencode(d / "cgroup.procs") for d in self.dirs]

    @classmethod
    def adopt(cls, group: Path) -> CommandCgroups:
        """An existing group, to kill its members and remove it (a dead run's leftover)."""
        cg = cls.__new__(cls)
        cg.version = "v2" if _is_v2() else "v1"
        cg.dirs, cg._procs = [group], []
        cg._counts = (0, 0)
        cg._empty = False
        cg._pids_dir = cg._mem_dir = None
        return cg

    @property
    def active(self) -> bool:
        return bool(self.dirs)

    @property
    def limits_pids(self) -> bool:
        return self._pids_dir is not None

    @property
    def limits_memory(self) -> bool:
        return self._mem_dir is not None

    def _create_v1(self, name: str, pids: int | None, memory_mb: int | None) -> None:
        self.version = "v1"
        own = _own_paths()
        if pids is not None and (parent := _v1_parent("pids", own)) is not None:
            d = parent / name
            os.mkdir(d)
            self.dirs.append(d)
            _write(d / "pids.max", str(pids))
            self._pids_dir = d
        if memory_mb is not None and (parent := _v1_parent("memory", own)) is not None:
            d = parent / name
            os.mkdir(d)
            self.dirs.append(d)
            limit = str(memory_mb << 20)
            _write(d / "memory.limit_in_bytes", limit)
            if (d / "memory.memsw.limit_in_bytes").exists():  # no swapping around the limit
                _write(d / "memory.memsw.limit_in_bytes", limit)
            self._mem_dir = d

    def _create_v2(self, name: str, pids: int | None, memory_mb: int | None) -> None:
        self.version = "v2"
        parent, enabled = _v2_parent(_own_paths())
        if parent is None or not enabled or (pids is None and memory_mb is None):
            return
        d = parent / name
        os.mkdir(d)
        self.dirs.append(d)
        if pids is not None and "pids" in enabled:
            _write(d / "pids.max", str(pids))
            self._pids_dir = d
        if memory_mb is not None and "memory" in enabled:
            _write(d / "memory.max", str(memory_mb << 20))
            if (d / "memory.swap.max").exists():
                _write(d / "memory.swap.max", "0")
            self._mem_dir = d

    @property
    def procs_files(self) -> list[bytes]:
        """The ``cgroup.procs`` files the command writes its own pid to before it execs."""
        self._empty = False  # whoever takes them puts processes in
        return list(self._procs)

    def enter(self) -> None:
        """Move the calling process into the groups (for a child between fork and exec)."""
        self._empty = False  # (in the child: the parent's object is never told)
        pid = str(os.getpid()).encode()
        for procs in self._procs:
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)

    def add(self, pid: int) -> None:
        """Move process ``pid`` into the groups (a held sandbox before it starts the command)."""
        self._empty = False
        data = str(pid).encode()
        for procs in self._procs:
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)

    def members(self) -> list[int]:
        pids: set[int] = set()
        for procs in self._procs or [os.fsencode(d / "cgroup.procs") for d in self.dirs]:
            try:
                pids.update(int(x) for x in _read(procs).split())
            except (OSError, ValueError):
                continue
        return sorted(pids)

    def kill_all(self, deadline_s: float = 5.0) -> bool:
        """SIGKILL every member until the groups are empty; True when they are."""
        if not self.dirs or self._empty:
            return True
        if self.version == "v2" and (self.dirs[0] / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                _write(self.dirs[0] / "cgroup.kill", "1")
        end = time.monotonic() + deadline_s
        delay = 0.0005
        while members := self.members():
            for pid in members:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > end:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        self._empty = True  # until add(), enter() or procs_files lets something in
        return True

    def _oom_count(self) -> int:
        if self._mem_dir is None:
            return 0
        if self.version == "v2":
            return _read_int_field(self._mem_dir / "memory.events", "oom_kill")
        return _read_int_field(self._mem_dir / "memory.oom_control", "oom_kill")

    def _pids_count(self) -> int:
        if self._pids_dir is None:
            return 0
        return _read_int_field(self._pids_dir / "pids.events", "max")

    def oom_killed(self) -> bool:
        """Whether the memory limit killed a process since the groups were made or reused."""
        return self._oom_count() > self._counts[0]

    def pids_limit_hit(self) -> bool:
        """Whether the pids limit refused a fork since the groups were made or reused."""
        return self._pids_count() > self._counts[1]

    def reuse(self) -> None:
        """Count limit events afresh: the (emptied) groups serve another command."""
        self._counts = (self._oom_count(), self._pids_count())

    def memory_charged(self) -> int:
        """Bytes still charged to the memory group (page cache the commands left), or 0."""
        if self._mem_dir is None:
            return 0
        name = "memory.current" if self.version == "v2" else "memory.usage_in_bytes"
        try:
            return int((self._mem_dir / name).read_text())
        except (OSError, ValueError):
            return 0

    def remove(self, deadline_s: float = 5.0) -> list[Path]:
        """Kill what is left and rmdir every group; returns the groups that could not be removed."""
        self.kill_all(deadline_s)
        stuck: list[Path] = []
        for d in reversed(self.dirs):
            end = time.monotonic() + deadline_s
            while True:
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:  # EBUSY while the last members finish exiting
                    if exc.errno != errno.EBUSY or time.monotonic() > end:
                        stuck.append(d)
                        break
                    time.sleep(0.002)
        self.dirs = stuck
        return stuck
