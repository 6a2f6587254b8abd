"""Locate the ``uv`` binary: the one shipped by the ``uv`` wheel first, then PATH."""

from __future__ import annotations

import shutil

__all__ = ["find_uv"]


def find_uv() -> str | None:
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")
