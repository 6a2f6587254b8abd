"""Host-side file access to a workspace that never leaves it.

Paths are resolved the way the sandboxed command would see them: relative to the workspace
root (or absolute under ``/workspace``), ``..`` applied after each symlink is followed, and an
absolute symlink target read as a path inside the sandbox. Anything that would land outside the
workspace is refused with a :class:`SandboxError`.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from swemill.core.errors import SandboxError
from swemill.sandbox.contract import WORKSPACE

__all__ = ["resolve", "read_in", "write_in"]

_MAX_LINKS = 40


def _inside_parts(path: str, original: str) -> list[str]:
    if path.startswith("/"):
        if path != WORKSPACE and not path.startswith(WORKSPACE + "/"):
            raise SandboxError(f"path {original!r} is outside the workspace")
        path = path[len(WORKSPACE):]
    return [p for p in path.split("/") if p not in ("", ".")]


def resolve(root: Path, path: str, *, follow_last: bool = True) -> Path:
    """The host path of ``path`` inside the workspace at ``root``; refuses escapes."""
    if not path or "\x00" in path:
        raise SandboxError(f"bad workspace path {path!r}")
    queue = _inside_parts(path, path)
    done: list[str] = []
    links = 0
    while queue:
        part = queue.pop(0)
        if part == "..":
            if not done:
                raise SandboxError(f"path {path!r} escapes the workspace")
            done.pop()
            continue
        host = root.joinpath(*done, part)
        if (queue or follow_last) and host.is_symlink():
            links += 1
            if links > _MAX_LINKS:
                raise SandboxError(f"path {path!r}: too many levels of symbolic links")
            target = os.readlink(host)
            if target.startswith("/"):
                done = []
                queue = _inside_parts(target, path) + queue
            else:
                queue = [p for p in target.split("/") if p not in ("", ".")] + queue
            continue
        done.append(part)
    return root.joinpath(*done)


def read_in(root: Path, path: str) -> bytes:
    host = resolve(root, path)
    try:
        return host.read_bytes()
    except IsADirectoryError as exc:
        raise SandboxError(f"{path!r} is a directory") from exc


def write_in(root: Path, path: str, data: bytes | str) -> None:
    """Write atomically (temp file + rename), keeping the mode of a file it replaces."""
    host = resolve(root, path)
    if host == root:
        raise SandboxError(f"{path!r} is the workspace root, not a file")
    parent = host.parent  # already resolved: every existing component is a real directory
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise SandboxError(f"cannot create the parent of {path!r}: {exc}") from exc
    try:
        mode = stat.S_IMODE(os.stat(host).st_mode)
        if os.path.isdir(host):
            raise SandboxError(f"{path!r} is a directory")
    except FileNotFoundError:
        mode = 0o644
    payload = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=".swemill-write-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        os.chmod(tmp, mode)
        os.replace(tmp, host)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
