"""One stage of a build, as a Step Functions state runs it: ``swemill aws run-stage NAME``.

The same stage function and the same manifest bookkeeping as the local driver
(:mod:`swemill.pipeline.driver`): the first stage starts the run, each stage records its
state and outputs, the last one finishes the run. A stage the manifest already records as
complete, with its outputs still there, is skipped, so a state retried by Step Functions
does not redo finished work.
"""

from __future__ import annotations

from collections.abc import Mapping

from swemill.core.errors import StoreError
from swemill.pipeline import driver
from swemill.pipeline import manifest as mf
from swemill.pipeline.config import BuildConfig
from swemill.pipeline.stages import STAGES, StageContext, stage_named
from swemill.store import Store
from swemill.store.layout import manifest_key

__all__ = ["run_stage"]


def run_stage(name: str, store: Store, run_id: str, source: str) -> Mapping[str, int] | None:
    """Run stage ``name`` of run ``run_id``; None when it was already complete."""
    stage = stage_named(name)
    if not store.exists(manifest_key(run_id)):
        if stage is not STAGES[0]:
            raise StoreError(f"no run {run_id} in {store.url}: the first stage "
                             f"({STAGES[0].name}) starts a run")
        driver._start(store, source, BuildConfig(), run_id, None)
    manifest = store.read_manifest(run_id)
    done = mf.stage_states(manifest).get(name) == "complete"
    outputs = mf.stage_outputs(manifest).get(name, [])
    if done and all(store.exists(k) for k in outputs):
        return None
    config = BuildConfig.from_manifest(manifest.config)
    ctx = StageContext(store, run_id, manifest.source or source, config,
                       resume=stage.resumable)
    summary = driver._run_stage(stage, ctx, lambda _event: None)
    if stage is STAGES[-1]:
        driver._finish(store, run_id)
    return summary
