"""One stage of a build, as a Step Functions state runs it: ``swemill aws run-stage NAME``.

A thin wrapper over ``run_build(..., stages=[NAME])`` (the local driver, its bookkeeping and
its order checks) that a retried state can call again unchanged: the first call of the
first stage starts the run, every other call resumes it, and a stage the manifest records
as complete, with its outputs still there, is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping

from swemill.core.errors import ConfigError
from swemill.executors import EXECUTORS
from swemill.pipeline.config import BuildConfig
from swemill.pipeline.driver import run_build
from swemill.store import Store
from swemill.store.layout import check_run_id, manifest_key

__all__ = ["run_stage"]


def run_stage(name: str, store: Store, run_id: str, source: str, *,
              executor: str | None = None) -> Mapping[str, int] | None:
    """Run stage ``name`` of run ``run_id``; None when it was already complete. ``executor``
    (``aws-batch`` in the state machine's fan-out stages) is a runtime setting: it changes
    where the stage's items run, never what the run produces."""
    if executor is not None and executor not in EXECUTORS:
        raise ConfigError(f"unknown executor {executor!r}: {', '.join(EXECUTORS)}")
    resume = store.exists(manifest_key(check_run_id(run_id)))
    config = BuildConfig.from_flags(executor=executor) if executor else None
    result = run_build(None if resume else source, store.url, config, resume=resume,
                       run_id=run_id, stages=[name], store=store)
    return None if name in result.skipped else result.summaries.get(name)
