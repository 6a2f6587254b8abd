"""Read-modify-write of a run's manifest, and the build's bookkeeping inside it.

Stages (``run_tasks``, ``run_rollouts``, ``run_corpus``) write their own counts into the same
manifest, so the driver never keeps a copy across a stage: every change re-reads the manifest,
applies one function and writes it back whole (one object, atomically).

The build's own state sits in ``manifest.metadata["build"]``::

    {"stages": {"gate": "complete", "env": "complete", "tasks": "running"},
     "outputs": {"gate": ["gate/run_id=<id>/verdicts.jsonl"], "env": [], ...},
     "error": "...first line of the error that stopped it...", "error_stage": "tasks"}
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from swemill.core.records import RunManifest
from swemill.store import Store

__all__ = ["BUILD_KEY", "StageState", "set_stage_state", "stage_outputs", "stage_states",
           "update_manifest"]

BUILD_KEY = "build"
StageState = Literal["running", "complete", "failed"]


def update_manifest(store: Store, run_id: str, change: Callable[[RunManifest], None]
                    ) -> RunManifest:
    manifest = store.read_manifest(run_id)
    change(manifest)
    store.write_manifest(manifest)
    return manifest


def _build(manifest: RunManifest) -> dict[str, Any]:
    block = manifest.metadata.setdefault(BUILD_KEY, {})
    block.setdefault("stages", {})
    return block  # type: ignore[no-any-return]


def stage_states(manifest: RunManifest) -> dict[str, str]:
    return dict(manifest.metadata.get(BUILD_KEY, {}).get("stages", {}))


def stage_outputs(manifest: RunManifest) -> dict[str, list[str]]:
    return dict(manifest.metadata.get(BUILD_KEY, {}).get("outputs", {}))


def set_stage_state(manifest: RunManifest, stage: str, state: StageState, *,
                    outputs: list[str] | None = None) -> None:
    block = _build(manifest)
    block["stages"][stage] = state
    if outputs is not None:
        block.setdefault("outputs", {})[stage] = outputs


def set_error(manifest: RunManifest, stage: str | None, message: str) -> None:
    block = _build(manifest)
    block["error"] = message
    block["error_stage"] = stage


def clear_error(manifest: RunManifest) -> None:
    block = _build(manifest)
    block.pop("error", None)
    block.pop("error_stage", None)
