"""Who sandboxed code is on the host, and what it may leave behind there.

When swemill runs as root, the bwrap backend drops every command to one unprivileged host uid
(:func:`sandbox_uid`: ``$SWEMILL_SANDBOX_UID``, default the overflow uid 65534, never 0) after
bwrap, still root, has built the mounts. That uid must be able to write its workspace, so the
writable layer is handed over to it (:func:`hand_over`) before each command. As an ordinary
user nothing is dropped: bwrap's user namespace maps the sandbox to the caller's own uid.

After each command (and during it, see :class:`~swemill.sandbox._run.DiskWatch`)
:func:`sweep` measures the writable layer and clears setuid/setgid bits in it, so no such file
is ever left on the host.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

from swemill.core.errors import SandboxUnavailable
from swemill.sandbox._dropper import INSIDE as DROPPER_INSIDE
from swemill.sandbox._dropper import dropper

__all__ = ["DEFAULT_UID", "clear_special", "drop_argv", "drop_binds", "hand_over", "lend",
           "sandbox_uid", "sweep", "take_back"]

DEFAULT_UID = 65534
"""The overflow uid ("nobody"): owns nothing a sandbox could use."""

_SPECIAL = stat.S_ISUID | stat.S_ISGID
_TOP_MODE = stat.S_ISVTX | stat.S_IRWXG


@functools.cache
def sandbox_uid() -> int | None:
    """The host uid sandboxed commands run as when swemill is root; None when it is not."""
    if os.geteuid() != 0:
        return None
    raw = os.environ.get("SWEMILL_SANDBOX_UID", "").strip() or str(DEFAULT_UID)
    if not raw.isdigit() or int(raw) == 0 or int(raw) >= 2**32 - 1:
        raise SandboxUnavailable(
            f"SWEMILL_SANDBOX_UID={raw!r} is not an unprivileged uid (a number, never 0)")
    return int(raw)


@functools.cache
def drop_argv() -> tuple[str, ...]:
    """The prefix that runs a command as :func:`sandbox_uid` with no capability left, or ():
    swemill's compiled dropper (:mod:`._dropper`, bound in by :func:`drop_binds`) where it
    could be built, else ``setpriv``."""
    uid = sandbox_uid()
    if uid is None:
        return ()
    if dropper() is not None:
        return (DROPPER_INSIDE, str(uid), str(uid))
    exe = shutil.which("setpriv", path="/usr/bin:/bin")
    if exe is None:
        raise SandboxUnavailable("setpriv not found (running as root, swemill needs it to drop "
                                 "sandboxed code to an unprivileged uid); fix: apt-get install "
                                 "-y util-linux")
    user, group = _names(uid)
    return (exe, f"--reuid={user}", f"--regid={group}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs", "--")


def drop_binds() -> tuple[str, ...]:
    """bwrap arguments that make :func:`drop_argv`'s program visible inside the sandbox."""
    exe = dropper() if sandbox_uid() is not None else None
    return () if exe is None else ("--ro-bind", str(exe), DROPPER_INSIDE)


def _names(uid: int) -> tuple[str, str]:
    """How to name ``uid`` (and the group of the same number) to setpriv.

    setpriv looks every argument up as a name first. A number that is no name goes past
    ``/etc/passwd`` to the next NSS module (loading it, e.g. ``libnss_systemd``, costs ~0.3 ms
    per command), so names are passed when ``/etc/passwd`` / ``/etc/group`` (which the sandbox
    sees too) hold exactly one entry of that name and it has this number.
    """
    return _file_name("/etc/passwd", uid) or str(uid), _file_name("/etc/group", uid) or str(uid)


def _file_name(path: str, number: int) -> str | None:
    try:
        rows = [line.split(":") for line in Path(path).read_text().splitlines()]
    except (OSError, UnicodeDecodeError):
        return None
    rows = [r for r in rows if len(r) > 2 and r[0] and not r[0].startswith(("+", "-", "#"))]
    names = [r[0] for r in rows if r[2] == str(number)]
    if len(names) != 1 or names[0].isdigit():
        return None
    return names[0] if [r[0] for r in rows].count(names[0]) == 1 else None


_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_ANY = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_MAX_DEPTH = 256
"""Deeper directories are not visited (each level holds one open descriptor)."""

Visit = Callable[[int, str, os.stat_result], None]


def _walk(layer: Path, visit: Visit, view: Path | None = None,
          skip_top: tuple[str, ...] = ()) -> None:
    """Call ``visit(dir_fd, name, lstat)`` for every entry under ``layer``.

    ``lstat`` is read in ``layer``; ``dir_fd`` is the same directory in ``view`` (an overlay
    mount over ``layer`` as its upper: changes must go through the mount, which caches owners
    and modes). Sandboxed code may be changing the tree meanwhile, so every step is relative to
    an open directory and never follows a symlink: a swapped-in link cannot lead outside.
    """
    try:
        fd = os.open(layer, _OPEN_DIR)
    except OSError:  # gone, or (not as root) made unreadable by the sandboxed code
        return
    try:
        vfd = fd if view is None else os.open(view, _OPEN_DIR)
        try:
            _walk_fd(fd, vfd, visit, 0, skip_top)
        finally:
            if vfd != fd:
                os.close(vfd)
    finally:
        os.close(fd)


def _walk_fd(dfd: int, vfd: int, visit: Visit, depth: int, skip: tuple[str, ...] = ()) -> None:
    try:
        with os.scandir(dfd) as it:
            names = [e.name for e in it if e.name not in skip]
    except OSError:
        return
    for name in names:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except OSError:  # gone, or a directory without search permission (not as root)
            continue
        visit(vfd, name, st)
        if stat.S_ISDIR(st.st_mode) and depth < _MAX_DEPTH:
            try:
                sub = os.open(name, _OPEN_DIR, dir_fd=dfd)
            except OSError:  # gone, or swapped for a symlink
                continue
            try:
                vsub = sub if vfd == dfd else os.open(name, _OPEN_DIR, dir_fd=vfd)
            except OSError:
                os.close(sub)
                continue
            try:
                _walk_fd(sub, vsub, visit, depth + 1)
            finally:
                os.close(sub)
                if vsub != sub:
                    os.close(vsub)


def hand_over(layer: Path, view: Path | None = None) -> None:
    """Make everything in ``layer`` but a top-level ``.git`` the sandbox user's (no-op unless
    root). ``view``: the overlay mount whose upper directory ``layer`` is (changes go through it).

    The top directory stays the host user's, writable by the sandbox user's group and sticky,
    and ``.git`` stays the host user's: host-side git (run as root on a workspace) reads its
    config and hooks, so sandboxed code must not be able to change or replace them; and git
    refuses a worktree whose top directory someone else owns.
    """
    uid = sandbox_uid()
    if uid is None:
        return
    top = view or layer
    st = os.lstat(top)
    me = os.geteuid()
    if (st.st_uid, st.st_gid) != (me, uid):
        os.chown(top, me, uid, follow_symlinks=False)
    if stat.S_IMODE(st.st_mode) & _TOP_MODE != _TOP_MODE:
        os.chmod(top, stat.S_IMODE(st.st_mode) | _TOP_MODE)

    def visit(dfd: int, name: str, st: os.stat_result) -> None:
        if st.st_uid != uid and not stat.S_ISCHR(st.st_mode):  # skip overlay whiteouts
            with contextlib.suppress(FileNotFoundError):
                os.chown(name, uid, uid, dir_fd=dfd, follow_symlinks=False)

    _walk(layer, visit, view, skip_top=(".git",))


def sweep(layer: Path, view: Path | None = None) -> int:
    """Clear setuid/setgid bits under ``layer`` (through ``view``, as for :func:`hand_over`)
    and return the bytes ``layer`` occupies on disk."""
    used = 0

    def visit(dfd: int, name: str, st: os.stat_result) -> None:
        nonlocal used
        used += st.st_blocks * 512
        if st.st_mode & _SPECIAL and (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            clear_special(name, dfd)

    _walk(layer, visit, view)
    return used


def lend(tree: Path) -> None:
    """Let the sandbox user add to ``tree`` (its directories become its own; files stay
    the host's: some are hard links into a package cache and must not change in place)."""
    uid = sandbox_uid()
    if uid is None:
        return
    os.chown(tree, uid, uid, follow_symlinks=False)

    def visit(dfd: int, name: str, st: os.stat_result) -> None:
        if stat.S_ISDIR(st.st_mode) and st.st_uid != uid:
            os.chown(name, uid, uid, dir_fd=dfd, follow_symlinks=False)

    _walk(tree, visit)


def take_back(tree: Path) -> None:
    """Undo :func:`lend`: everything in ``tree`` is the host user's again, without set-id bits."""
    uid = sandbox_uid()
    if uid is None:
        return
    me = os.geteuid()

    def visit(dfd: int, name: str, st: os.stat_result) -> None:
        if st.st_uid != me or st.st_gid != me:
            os.chown(name, me, me, dir_fd=dfd, follow_symlinks=False)
        if st.st_mode & _SPECIAL and (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            clear_special(name, dfd)

    _walk(tree, visit)
    os.chown(tree, me, me, follow_symlinks=False)


def clear_special(name: str, dir_fd: int | None = None) -> None:
    """Drop the set-id bits of ``name`` (relative to ``dir_fd``); never follows a last-component
    symlink."""
    try:
        fd = os.open(name, _OPEN_ANY, dir_fd=dir_fd)
    except OSError:  # gone, or swapped for a symlink: nothing of ours to change
        return
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~_SPECIAL)
    finally:
        os.close(fd)
