"""Work functions for testing executors (importable by name, as remote backends need).

They take plain-JSON items so the same calls run on every backend, AWS Batch included.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from swemill.executors.base import TransientError
from swemill.store import Store

__all__ = ["square", "fail_if_negative", "crash_once", "transient_once", "read_object",
           "crash_always"]


def square(x: int) -> int:
    return x * x


def fail_if_negative(x: int) -> int:
    if x < 0:
        raise ValueError(f"negative input {x}")
    return x * x


def _first_time(marker: str) -> bool:
    """True exactly once per marker path (creation is atomic with O_EXCL)."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def crash_once(item: dict[str, Any]) -> Any:
    """The first call kills its own process (SIGKILL, like the OOM killer); later calls work."""
    if _first_time(item["marker"]):
        os.kill(os.getpid(), signal.SIGKILL)
    return item["value"]


def crash_always(item: dict[str, Any]) -> Any:
    os.kill(os.getpid(), signal.SIGKILL)
    return item["value"]  # not reached


def transient_once(item: dict[str, Any]) -> Any:
    """The first call raises a transient error; later calls return the value."""
    if _first_time(item["marker"]):
        raise TransientError(f"transient failure (marker {Path(item['marker']).name})")
    return item["value"]


def read_object(item: dict[str, Any]) -> str:
    """Read one object from a store (a vanished object is a StoreError, not retried)."""
    store = Store(item["root"], storage_options=item.get("storage_options"))
    return store.read_text(item["key"])
