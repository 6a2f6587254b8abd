"""``swemill export trajectories``: a run's trajectories as ATIF documents (one JSON file per
trajectory in a directory) or OpenAI-messages JSONL; every record is schema-checked before it
is written, and one that fails is counted and named, never written."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError as PydanticValidationError

from swemill.core.errors import StoreError
from swemill.core.records import Trajectory
from swemill.exports.atif import check_atif, to_atif
from swemill.exports.openai_messages import check_messages_row, to_messages_row
from swemill.store import Store

__all__ = ["export_trajectories", "Format"]

Format = Literal["atif", "openai-messages"]


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)[:200]


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def export_trajectories(store: Store, run_id: str, fmt: Format | str,
                        dest: Path) -> dict[str, Any]:
    """Write ``run_id``'s trajectories to ``dest``; returns counts (written, dropped with the
    first reason)."""
    trajs = sorted(store.read_records("trajectories", run_id, Trajectory),
                   key=lambda t: t.trajectory_id)
    if not trajs:
        raise StoreError(f"run {run_id} in {store.url} has no trajectories")
    convert, check = ((to_atif, check_atif) if fmt == "atif"
                      else (to_messages_row, check_messages_row))
    good: list[tuple[Trajectory, dict[str, Any]]] = []
    dropped: dict[str, str] = {}
    for t in trajs:
        record = convert(t)
        try:
            check(record)
        except PydanticValidationError as exc:
            err = exc.errors()[0]
            dropped[t.trajectory_id] = f"{'.'.join(map(str, err['loc']))}: {err['msg']}"
            continue
        good.append((t, record))
    if fmt == "atif":
        dest.mkdir(parents=True, exist_ok=True)
        for t, record in good:
            _atomic(dest / f"{_slug(t.trajectory_id)}.json", json.dumps(record, indent=1))
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        _atomic(dest, "".join(json.dumps(r, ensure_ascii=False) + "\n" for _, r in good))
    return {"run_id": run_id, "format": fmt, "dest": str(dest), "written": len(good),
            "dropped_schema": len(dropped), "dropped": dropped}
