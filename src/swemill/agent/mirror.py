"""An exact copy of a session's workspace, for the policy's own test run in a warm server.

The policy's ``run_tests`` is not a grading: it runs the tree as the policy left it, its edits
to tests and test configuration included. Served warm, that run happens in a fork of a grading
server (:mod:`swemill.agent.warmgrade`) over the server's slot, which :func:`mirror_tree`
makes a copy of the workspace: every directory, regular file and link, with its mode and
times (a bytecode file is used only when the recorded times of its source match), links
copied as links and never followed.

Where a copy could run differently from the workspace itself, :class:`NotMirrored` is raised
and the caller runs the tests cold, in the session's own sandbox:

- anything that is not a directory, a regular file or a link (a FIFO, a socket, a device
  node): a copy cannot be the same thing;
- more than ``max_bytes`` in all (the copy would cost more than the cold start it saves);
- a module the fork would not import while a fresh interpreter would: a new or changed file,
  package or link that takes the name of a module the server imported before forking (the
  standard library, the test runner, anything at the top of the environment's
  site-packages: :func:`~swemill.agent.carry.runner_modules`), or an interpreter start-up hook
  (``sitecustomize``, ``usercustomize``), in a directory that may be on ``sys.path`` (the
  workspace root and every directory that is not a package: pytest puts test directories on
  it). A fresh interpreter would import the workspace's version; the fork has its own.

:func:`layout_difference` tells whether a tree built another way (the grading tree of the
workspace) holds the workspace's own layout, so that a run of it is a run of the workspace.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

from swemill.agent.tree import SKIP_DIRS
from swemill.core.errors import SandboxError
from swemill.repo.venvseal import START_HOOKS

__all__ = ["NotMirrored", "check_mirrorable", "layout_difference", "mirror_tree",
           "START_HOOKS"]

_MODULE_SUFFIXES = (".py", ".pyc", ".pyw", ".so", ".pyd")


class NotMirrored(SandboxError):
    """The workspace cannot be copied for a warm run (see the module docstring)."""


def _module_name(name: str) -> str | None:
    """The name a file or link called ``name`` would be imported as, or None (a link to a
    folder: its own name)."""
    if name.endswith(_MODULE_SUFFIXES):
        return name.split(".", 1)[0]
    return name if "." not in name else None


def _is_package(folder: Path) -> bool:
    return any(os.path.isfile(folder / f"__init__{s}") for s in (".py", ".pyc"))


def _same_as_pristine(src: str, pristine: Path) -> bool:
    """Whether ``src`` (a file or link of the workspace) is as in ``pristine``."""
    try:
        st, old = os.lstat(src), os.lstat(pristine)
    except OSError:
        return False
    if stat.S_IFMT(st.st_mode) != stat.S_IFMT(old.st_mode):
        return False
    if stat.S_ISLNK(st.st_mode):
        return os.readlink(src) == os.readlink(pristine)
    if st.st_size != old.st_size:
        return False
    with open(src, "rb") as a, open(pristine, "rb") as b:
        return a.read() == b.read()


class _Copy:
    def __init__(self, pristine: Path, shadowed: frozenset[str], max_bytes: int,
                 copy: bool = True) -> None:
        self.pristine, self.names, self.max_bytes = pristine, shadowed | START_HOOKS, max_bytes
        self.total, self.copy = 0, copy

    def check_name(self, src: str, rel: str, on_path: tuple[bool, bool]) -> None:
        """Refuse a file or link that would shadow a module the server imported (module
        docstring); ``on_path``: whether its folder, and that folder's parent, may be on
        ``sys.path``."""
        parts = rel.split("/")
        name, where = _module_name(parts[-1]), on_path[0]
        if name == "__init__" and len(parts) > 1:  # the package is named by its folder
            name, where = parts[-2], on_path[1]
        if name is None or name not in self.names or not where:
            return
        if not _same_as_pristine(src, self.pristine / rel):
            raise NotMirrored(f"{rel} would shadow the module {name!r}, which the warm "
                              "server has already imported")

    def walk(self, src_dir: Path, dest_dir: Path, prefix: str, on_path: tuple[bool, bool]) -> None:
        with os.scandir(src_dir) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            rel = prefix + entry.name
            target = dest_dir / entry.name
            if entry.is_symlink() or entry.is_file(follow_symlinks=False):
                self.check_name(entry.path, rel, on_path)
                self.total += entry.stat(follow_symlinks=False).st_size
                if self.total > self.max_bytes:
                    raise NotMirrored(f"the workspace holds more than {self.max_bytes} bytes")
                if self.copy:
                    shutil.copy2(entry.path, target, follow_symlinks=False)
            elif entry.is_dir(follow_symlinks=False):
                if self.copy:
                    target.mkdir()
                self.walk(Path(entry.path), target, rel + "/",
                          (not _is_package(Path(entry.path)), on_path[0]))
                if self.copy:
                    shutil.copystat(entry.path, target, follow_symlinks=False)
            else:
                raise NotMirrored(f"{rel} is not a directory, a regular file or a link")


def mirror_tree(workspace: Path, dest: Path, *, pristine: Path, shadowed: frozenset[str],
                max_bytes: int = 256 << 20) -> None:
    """Make ``dest`` (an empty directory) an exact copy of ``workspace``; raise
    :class:`NotMirrored` where a warm run of the copy could differ (module docstring)."""
    _Copy(pristine, shadowed, max_bytes).walk(workspace, dest, "", (True, False))
    shutil.copystat(workspace, dest, follow_symlinks=False)


def check_mirrorable(workspace: Path, *, pristine: Path, shadowed: frozenset[str],
                     max_bytes: int = 256 << 20) -> None:
    """What :func:`mirror_tree` refuses, without copying: raise :class:`NotMirrored` where
    a warm run of the workspace could differ from a cold one (module docstring)."""
    _Copy(pristine, shadowed, max_bytes, copy=False).walk(workspace, workspace, "",
                                                          (True, False))


_META_SUFFIXES = (".dist-info", ".egg-info")


def _layout(root: Path) -> dict[str, tuple[object, ...]]:
    """rel -> what a run could tell apart besides a file's bytes: kind, a file's size and
    mode, a link's target; the bytes too under folders the grader's change set never reads
    (``.git``, tool caches). The run's own scratch folder at the top is left out."""
    out: dict[str, tuple[object, ...]] = {}
    stack: list[tuple[str, str, bool]] = [(str(root), "", False)]
    while stack:
        folder, prefix, unread = stack.pop()
        with os.scandir(folder) as it:
            for entry in it:
                if not prefix and entry.name.startswith(".swemill-run-"):
                    continue
                rel, st = prefix + entry.name, entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    out[rel] = ("dir",)
                    stack.append((entry.path, rel + "/", unread or entry.name in SKIP_DIRS))
                elif stat.S_ISLNK(st.st_mode):
                    out[rel] = ("link", os.readlink(entry.path))
                elif stat.S_ISREG(st.st_mode):
                    out[rel] = ("file", st.st_size, stat.S_IMODE(st.st_mode))
                    if unread:
                        with open(entry.path, "rb") as fh:
                            out[rel] += (hashlib.file_digest(fh, "sha256").digest(),)
                else:
                    out[rel] = ("other",)
    return out


def layout_difference(workspace: Path, built: Path) -> str | None:
    """None when ``built`` (a tree whose differing files are known to hold the workspace's
    bytes, e.g. a grading tree that left nothing out) holds the same entries as
    ``workspace``: the same folders, links, file sizes and modes, the same ``.git`` and tool
    caches; else the first difference. A workspace holding package metadata with entry
    points never matches: a run with plugin autoloading would load them, one without would
    not."""
    mine, theirs = _layout(workspace), _layout(built)
    for rel in sorted(set(mine) | set(theirs)):
        if mine.get(rel) != theirs.get(rel):
            return rel
        name = rel.rsplit("/", 1)[-1]
        if name == "entry_points.txt" and any(part.endswith(_META_SUFFIXES)
                                              for part in rel.split("/")[:-1]):
            return rel
    return None
