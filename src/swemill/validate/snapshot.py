"""Snapshots of scrubbed broken trees: the state a policy's sandbox starts from.

A snapshot is a deterministic ``.tar.gz`` (sorted names, zero mtimes and owners), so the same
tree always yields the same bytes and the same digest. Extraction refuses links and paths that
leave the destination.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
from pathlib import Path

from swemill.core.errors import ValidationError

__all__ = ["pack_tree", "unpack_tree", "digest"]


def _entries(root: Path) -> list[Path]:
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(dirpath)
        out.extend(base / d for d in dirnames)
        out.extend(base / f for f in sorted(filenames))
    return sorted(out, key=lambda p: p.relative_to(root).as_posix())


def pack_tree(root: Path) -> bytes:
    """Pack ``root`` (already scrubbed) into deterministic gzip-compressed tar bytes."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in _entries(root):
            info = tar.gettarinfo(str(path), arcname=path.relative_to(root).as_posix())
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if info.isfile():
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
            elif info.isdir():
                tar.addfile(info)
            # links and special files are dropped: a snapshot holds plain files only
    return gzip.compress(raw.getvalue(), compresslevel=6, mtime=0)


def unpack_tree(data: bytes, dest: Path) -> Path:
    """Unpack snapshot bytes into ``dest`` (created), refusing anything unsafe."""
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            tar.extractall(dest, filter="data")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ValidationError(f"snapshot cannot be unpacked: {exc}") from exc
    return dest


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
