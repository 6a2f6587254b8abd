"""Copy-on-write workspaces: what ``Sandbox.fork()`` stands on.

A workspace is a *tree*. A :class:`PlainTree` is an ordinary directory. An :class:`OverlayTree`
is an overlayfs mount on the host: frozen, shared, read-only layers below and a private upper
directory on top, so a fork costs a few directories and one mount, whatever the workspace size,
and its path is a real directory that host tools and ``read_file``/``write_file`` can use.

- Forking a plain directory copies it once into a frozen layer (``cp -a --reflink=auto``:
  a reflink on btrfs/xfs, a real copy elsewhere); later forks reuse that layer until the parent
  is touched again (it runs a command, writes a file, or hands out its host path).
- Forking an overlay tree freezes its upper directory into a new layer (no copy); parent and
  child then each get a fresh upper over the same layers.
- Layers are reference-counted and deleted with the last tree that uses them. Nothing is a hard
  link: a write anywhere lands in one tree's own upper directory or own copy.

Overlay mounts need root (CAP_SYS_ADMIN); elsewhere a fork is a full copy. Mounts live under a
``swm-<pid>-*`` store in the temp directory; stores left by dead processes are reaped.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import shutil
import subprocess
import tempfile
import threading
import weakref
from pathlib import Path

from swemill.core.errors import SandboxError
from swemill.sandbox._hostuser import hand_over, sweep
from swemill.sandbox._settled import SettledSweep

__all__ = ["STORE_PREFIX", "PlainTree", "OverlayTree", "Tree", "copy_tree", "overlay_usable"]

STORE_PREFIX = "swm-"
"""An overlay store is ``<tmp>/swm-<pid>-*``, named after the process that made it."""

_MAX_LAYERS = 48  # a mount's options must fit in one page; past this the view is squashed
_MNT_DETACH = 2
_MS_NOSUID, _MS_NODEV = 2, 4  # set-id bits and devices in a workspace mean nothing on the host
_BASE_OPTS = "redirect_dir=off,index=off,metacopy=off,xino=off"


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _mount_overlay(target: Path, lowers: list[Path], upper: Path, work: Path) -> None:
    # volatile: scratch forks need no durability, and it spares a filesystem-wide sync on unmount
    base = f"lowerdir={':'.join(map(str, lowers))},upperdir={upper},workdir={work},{_BASE_OPTS}"
    for opts in (base + ",volatile", base):
        if _libc().mount(b"overlay", os.fsencode(target), b"overlay", _MS_NOSUID | _MS_NODEV,
                         opts.encode()) == 0:
            return
        err = ctypes.get_errno()
        if err != errno.EINVAL:
            break
    raise SandboxError(f"overlay mount on {target} failed: {os.strerror(err)}")


def _umount(target: Path, *, lazy: bool = False) -> int:
    """0 on success, else the errno (EBUSY when something still uses the mount)."""
    if _libc().umount2(os.fsencode(target), _MNT_DETACH if lazy else 0) == 0:
        return 0
    return ctypes.get_errno()


def copy_tree(src: Path, dst: Path) -> None:
    """A full, independent copy (reflinks where the filesystem has them). ``dst`` must not exist."""
    proc = subprocess.run(["cp", "-a", "--reflink=auto", "--", str(src), str(dst)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(dst, ignore_errors=True)
        raise SandboxError(f"copying workspace {src} failed: {proc.stderr.strip()[-300:]}")


def _store_parent() -> Path:
    return Path(tempfile.gettempdir())


def _reap_stale(parent: Path) -> None:
    """Unmount and delete stores whose process is gone (it was killed before cleaning up)."""
    for store in parent.glob(f"{STORE_PREFIX}*-*"):
        pid = store.name.split("-")[1]
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        unmount_under(store)
        shutil.rmtree(store, ignore_errors=True)


def unmount_under(folder: Path) -> None:
    """Detach every mount below ``folder``, innermost first (a fork a killed run left)."""
    inside = str(folder) + "/"
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return
    points = [p for line in lines if (p := line.split()[4]).startswith(inside)]
    for point in sorted(points, key=len, reverse=True):
        _umount(Path(point), lazy=True)


@functools.cache
def overlay_usable() -> bool:
    """Whether overlay forks work here (root, overlayfs, a temp dir that can hold an upper)."""
    parent = _store_parent()
    if os.geteuid() != 0 or any(c in str(parent) for c in ",:"):
        return False
    try:
        probe = Path(tempfile.mkdtemp(prefix=f"{STORE_PREFIX}{os.getpid()}-probe", dir=parent))
    except OSError:
        return False
    try:
        for name in ("l", "u", "w", "m"):
            (probe / name).mkdir()
        _mount_overlay(probe / "m", [probe / "l"], probe / "u", probe / "w")
        _umount(probe / "m", lazy=True)
        return True
    except SandboxError:
        return False
    finally:
        shutil.rmtree(probe, ignore_errors=True)


class _Store:
    """One family's directory of layers, uppers and mount points; gone with its last tree."""

    def __init__(self) -> None:
        parent = _store_parent()
        _reap_stale(parent)
        self.dir = Path(tempfile.mkdtemp(prefix=f"{STORE_PREFIX}{os.getpid()}-", dir=parent))
        self._lock = threading.Lock()
        self._refs: dict[Path, int] = {}
        self._seq = 0
        self._users = 0
        # trees are finalized first (newer), so no mount is left when this one removes the dir
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.dir, ignore_errors=True)

    def new_path(self, kind: str) -> Path:
        with self._lock:
            self._seq += 1
            return self.dir / f"{kind}{self._seq}"

    def hold(self, layers: list[Path]) -> None:
        with self._lock:
            for layer in layers:
                self._refs[layer] = self._refs.get(layer, 0) + 1

    def release(self, layers: list[Path]) -> None:
        dead = []
        with self._lock:
            for layer in layers:
                self._refs[layer] -= 1
                if self._refs[layer] == 0:
                    del self._refs[layer]
                    dead.append(layer)
        for layer in dead:
            shutil.rmtree(layer, ignore_errors=True)

    def attach(self) -> None:
        with self._lock:
            self._users += 1

    def detach(self) -> None:
        with self._lock:
            self._users -= 1
            last = self._users == 0
        if last:
            self._finalizer()


class Tree:
    """A workspace directory on the host that can be forked and closed."""

    path: Path

    @property
    def layer(self) -> Path:
        """Where this tree's own writes land on the host (the tree, or an overlay's upper)."""
        return self.path

    def hand_over(self) -> None:
        """Give this tree's own writes to the sandbox user (a no-op unless root)."""
        hand_over(self.layer)

    def sweep(self) -> int:
        """Clear set-id bits in this tree's own writes; the bytes they take on disk."""
        return sweep(self.layer)

    def settled_sweep(self) -> int:
        """:meth:`sweep` once nothing runs in the tree any more (may be cheaper)."""
        return self.sweep()

    def touched(self) -> None:
        """The tree may have changed in ways only its owner knows (a command ran, a write)."""

    def fork(self) -> Tree:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class PlainTree(Tree):
    """An ordinary directory: the caller's own, or a private copy (``owned_root`` is deleted)."""

    def __init__(self, path: Path, *, owned_root: Path | None = None) -> None:
        self.path = path
        self._store: _Store | None = None
        self._snapshot: Path | None = None
        self._closed = False
        self._finalizer = (weakref.finalize(self, shutil.rmtree, owned_root, ignore_errors=True)
                           if owned_root is not None else None)
        self._settled: SettledSweep | None = None

    def settled_sweep(self) -> int:
        if self._settled is None:
            self._settled = SettledSweep(self.path)
        used, special = self._settled()
        return self.sweep() if special else used  # only the safe walk changes anything

    def touched(self) -> None:
        if self._snapshot is not None and self._store is not None:
            self._store.release([self._snapshot])
            self._snapshot = None

    def fork(self) -> Tree:
        if not overlay_usable():
            root = Path(tempfile.mkdtemp(prefix="swemill-fork-"))
            copy_tree(self.path, root / "ws")
            return PlainTree(root / "ws", owned_root=root)
        if self._store is None:
            self._store = _Store()
            self._store.attach()
        if self._snapshot is None:
            snap = self._store.new_path("L")
            copy_tree(self.path, snap)
            hand_over(snap)  # copy-up keeps a lower file's owner: the sandbox user must own it
            self._store.hold([snap])
            self._snapshot = snap
        return OverlayTree(self._store, [self._snapshot])

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.touched()
        if self._store is not None:
            self._store.detach()
        if self._finalizer is not None:
            self._finalizer()


class OverlayTree(Tree):
    """An overlay mount: shared frozen layers below, a private upper directory on top."""

    def __init__(self, store: _Store, lowers: list[Path]) -> None:
        self._store = store
        store.attach()
        store.hold(lowers)
        self.lowers = list(lowers)
        self.path = store.new_path("M")
        self._upper = store.new_path("U")
        self._work = store.new_path("W")
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _finalize, self.path, [self._upper, self._work])
        try:
            for d in (self.path, self._upper, self._work):
                d.mkdir()
            hand_over(self._upper)  # the view's root takes the upper directory's owner
            _mount_overlay(self.path, self.lowers, self._upper, self._work)
        except BaseException:
            self.close()
            raise

    @property
    def layer(self) -> Path:
        return self._upper

    def hand_over(self) -> None:
        hand_over(self._upper, self.path)

    def sweep(self) -> int:
        return sweep(self._upper, self.path)

    def _changed(self) -> bool:
        with os.scandir(self._upper) as it:
            return any(True for _ in it)

    def fork(self) -> Tree:
        with self._lock:
            if self._changed() and not self._freeze_upper():
                return self._fork_by_copy()
            return OverlayTree(self._store, self.lowers)

    def _fork_by_copy(self) -> Tree:
        layer = self._store.new_path("L")
        copy_tree(self.path, layer)
        hand_over(layer)
        self._store.hold([layer])
        try:
            return OverlayTree(self._store, [layer])
        finally:
            self._store.release([layer])

    def _freeze_upper(self) -> bool:
        """Turn the upper directory into a shared layer and remount over a fresh one.

        False when the view is busy (a process has a file or its cwd there): then nothing
        changes, and the caller snapshots the view by copying it.
        """
        err = _umount(self.path)
        if err == errno.EBUSY:
            return False
        if err:
            raise SandboxError(f"cannot unmount {self.path}: {os.strerror(err)}")
        layer = self._store.new_path("L")
        os.rename(self._upper, layer)
        hand_over(layer)  # the host may have written there since the last command
        self._store.hold([layer])
        self.lowers = [layer, *self.lowers]
        self._upper.mkdir()
        hand_over(self._upper)
        self._fresh_work()
        _mount_overlay(self.path, self.lowers, self._upper, self._work)
        if len(self.lowers) > _MAX_LAYERS:
            self._squash()
        return True

    def _squash(self) -> None:
        """Replace a deep stack of layers by one copy of the view (upper is empty here)."""
        layer = self._store.new_path("L")
        copy_tree(self.path, layer)
        hand_over(layer)
        self._store.hold([layer])
        _umount(self.path)
        self._store.release(self.lowers)
        self.lowers = [layer]
        self._fresh_work()
        _mount_overlay(self.path, self.lowers, self._upper, self._work)

    def _fresh_work(self) -> None:
        shutil.rmtree(self._work)
        self._work.mkdir()

    def close(self) -> None:
        if self._finalizer.alive:
            self._finalizer()
            self._store.release(self.lowers)
            self._store.detach()


def _finalize(mount: Path, dirs: list[Path]) -> None:
    # also runs at interpreter exit for trees nobody closed
    if _umount(mount) not in (0, errno.EINVAL, errno.ENOENT):
        _umount(mount, lazy=True)
    for d in (mount, *dirs):
        shutil.rmtree(d, ignore_errors=True)
