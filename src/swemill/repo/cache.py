"""The swemill cache: where sources and environments live, and how they get there atomically.

Layout under the cache root (``$SWEMILL_CACHE`` or ``~/.cache/swemill``)::

    sources/<kind>/<slug>-<hash16>/     working copies (each a git repository)
    sources/commits/<slug>-<hash16>/    clones of a working copy at an older commit
    envs/<slug>@<commit12>/             venv/, recipe.json, build.log, baseline.json
    envs/<slug>@deps-<hash12>/          an older commit's own (``repo.commitenv``)
    locks/                              one lock file per entry being built

Every entry is built under a temporary name next to its final place and renamed into place
when complete, so a reader never sees a half-built entry and a failure leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

__all__ = ["cache_root", "slugify", "atomic_dir", "entry_lock", "write_text_atomic", "tree_hash"]


def cache_root(cache: Path | None = None) -> Path:
    """The cache root: ``cache`` if given, else ``$SWEMILL_CACHE``, else ``~/.cache/swemill``."""
    if cache is not None:
        return Path(cache)
    env = os.environ.get("SWEMILL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "swemill"


def slugify(name: str) -> str:
    """A file-name-safe form of a repository name (``owner/name`` -> ``owner__name``)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", name.replace("/", "__")).strip("._")
    return slug or "repo"


@contextlib.contextmanager
def entry_lock(root: Path, key: str) -> Iterator[None]:
    """Serialise builders of one cache entry across processes (advisory ``flock``)."""
    locks = root / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{slugify(key)}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def atomic_dir(final: Path, *, replace: bool = False) -> Iterator[Path]:
    """Yield a fresh temporary directory beside ``final``; rename it to ``final`` on success.

    On any exception the temporary directory is removed and ``final`` is left as it was. With
    ``replace`` an existing ``final`` is swapped out (renamed aside, then deleted).
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".tmp-{final.name}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        yield tmp
        if final.exists() and replace:
            old = final.parent / f".old-{final.name}-{uuid.uuid4().hex[:8]}"
            final.rename(old)
            shutil.rmtree(old, ignore_errors=True)
        if final.exists():
            # Someone else finished the same entry first; theirs is as good as ours.
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.rename(final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary name, so readers see all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


_SKIP_DIRS = {".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".tox", ".nox", ".venv"}


def tree_hash(root: Path) -> str:
    """sha256 over the relative paths, modes and bytes of every file under ``root``.

    Caches and ``.git`` are skipped: the hash names the working tree's content.
    """
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in sorted(filenames):
            path = Path(dirpath, name)
            rel = path.relative_to(root).as_posix()
            h.update(rel.encode() + b"\0")
            if path.is_symlink():
                h.update(b"L" + os.readlink(path).encode() + b"\0")
                continue
            h.update(b"X" if os.access(path, os.X_OK) else b"F")
            with open(path, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            h.update(b"\0")
    return h.hexdigest()
