"""The local driver of ``swemill build``: run :data:`STAGES` in order over one store root.

A build is one run id. Its manifest is written before any stage starts (status ``running``),
each stage is marked ``running`` then ``complete`` in it, and the run ends ``complete`` or
``failed`` (with the error's first line). ``resume=True`` continues the latest unfinished
build under the root (or ``run_id``) under its recorded source and config: stages already
complete are skipped, the others run with ``resume=True`` and skip their finished shards.
A stage that completed records the keys proving its output (shard markers, the card...); a
resumed build redoes a "complete" stage whose keys are gone or whose Parquet parts no longer
match their markers (deleted or corrupted after the fact) and, from the first stage it runs,
every later stage. That holds for a run already ``complete`` too: ``--resume`` on it checks
its outputs and repairs what is broken, and does nothing when all is whole. A SIGKILL leaves
the manifest at ``running``; ``--resume`` without ``--run-id`` looks for that.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from swemill.core.errors import ConfigError, StoreError, SwemillError
from swemill.core.records import RunManifest, utcnow
from swemill.corpus.report import write_report
from swemill.executors.aws_batch import AwsBatchExecutor
from swemill.pipeline import manifest as mf
from swemill.pipeline.config import SAMPLE_SOURCE, BuildConfig
from swemill.pipeline.stages import STAGES, Stage, StageContext, stage_named
from swemill.repo.sources import require_portable
from swemill.store import Store, new_run_id
from swemill.store.layout import check_run_id, manifest_key, report_key
from swemill.validate.drops import run_summary

__all__ = ["BuildEvent", "BuildResult", "run_build", "latest_unfinished", "COMMAND"]

COMMAND = "build"


@dataclass(frozen=True, slots=True)
class BuildEvent:
    """What the driver tells a progress display; ``kind`` says what happened to ``stage``."""

    stage: str
    kind: Literal["start", "update", "done", "skip", "fail"]
    message: str = ""
    summary: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


BuildListener = Callable[[BuildEvent], None]
"""What the driver tells as stages start, advance, finish, skip or fail."""


@dataclass(slots=True)
class BuildResult:
    run_id: str
    store: Store
    manifest: RunManifest
    resumed: bool
    skipped: list[str] = field(default_factory=list)
    """Stages not run again because an earlier attempt finished them."""
    summaries: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def rows(self) -> dict[str, int]:
        split = self.manifest.counts.get("corpus.split", {})
        return {k: split.get(k, 0) for k in ("sft_train", "sft_holdout", "dpo_train",
                                             "dpo_holdout")}

    def locations(self) -> dict[str, str]:
        """URLs of what the build wrote: the Parquet folders, card, report and manifest."""
        url = self.store.url_for
        run = f"run_id={self.run_id}"
        return {"sft": url(f"corpus/sft/{run}"), "dpo": url(f"corpus/dpo/{run}"),
                "holdout": url(f"corpus/holdout/{run}"),
                "card": url(report_key(self.run_id, "README.md")),
                "report": url(report_key(self.run_id, "index.html")),
                "manifest": url(manifest_key(self.run_id))}


def latest_unfinished(store: Store) -> str:
    """The newest build under the root that did not complete (run ids sort by time)."""
    for run_id in reversed(store.list_runs("manifests")):
        m = store.read_manifest(run_id)
        if m.command == COMMAND and m.status != "complete":
            return run_id
    raise StoreError(f"no unfinished build to resume under {store.url}")


def _start(store: Store, source: str, config: BuildConfig, run_id: str | None,
           parent: str | None) -> RunManifest:
    run_id = check_run_id(run_id) if run_id else new_run_id()
    if store.exists(manifest_key(run_id)):
        raise StoreError(f"run {run_id} already exists in {store.url}; use --resume to continue")
    if parent is not None and not store.exists(manifest_key(check_run_id(parent))):
        raise StoreError(f"no parent run {parent} in {store.url}")
    manifest = RunManifest(run_id=run_id, parent_run_id=parent, command=COMMAND, source=source,
                           config=config.resolved(), config_hash=config.hash(),
                           policies=list(config.policies))
    manifest.metadata[mf.BUILD_KEY] = {"stages": {}}
    store.write_manifest(manifest)
    return manifest


def _resumed(store: Store, source: str | None, run_id: str | None,
             given: BuildConfig | None) -> tuple[RunManifest, BuildConfig]:
    run_id = check_run_id(run_id) if run_id else latest_unfinished(store)
    manifest = store.read_manifest(run_id)  # unknown id: "no run <id> in <root>"
    if manifest.command != COMMAND:
        raise ConfigError(f"run {run_id} was made by 'swemill {manifest.command}', not by a build")
    if source is not None and source != manifest.source:
        raise ConfigError(f"run {run_id} builds {manifest.source!r}, not {source!r}")
    config = BuildConfig.from_manifest(manifest.config)
    if given is not None:  # only settings given explicitly, and only runtime ones, apply
        try:
            config = config.with_runtime(given)
        except ConfigError as exc:
            raise ConfigError(f"run {run_id} resumes under its recorded settings; {exc}") from exc
    return manifest, config


def _check_executor(config: BuildConfig, store: Store, source: str) -> None:
    """Settings a distributed executor needs, checked before any stage runs (the tasks
    stage would otherwise find them missing after the environment and the baseline)."""
    if config.tasks.executor != "aws-batch":
        return

    AwsBatchExecutor.from_env(store)
    require_portable(source, "--executor aws-batch")


def run_build(source: str | None, out: str, config: BuildConfig | None = None, *,
              resume: bool = False, run_id: str | None = None, parent: str | None = None,
              stages: Sequence[str] | None = None, progress: BuildListener | None = None,
              store: Store | None = None) -> BuildResult:
    """Run the whole build over ``out`` (a path or ``s3://`` URL); see the module docstring.

    With ``resume`` the run's recorded config is used; ``config`` may only change the
    runtime settings it sets explicitly (:data:`~swemill.pipeline.config.RUNTIME_SETTINGS`).
    ``stages`` runs only those stages (an orchestrator's one step; every earlier stage must be
    complete); the run is ``complete`` once all stages are. Any :class:`SwemillError` marks
    the run ``failed`` and is raised again.
    """
    selected = _selected(stages)
    store = store or Store.open(out)
    if resume:
        manifest, config = _resumed(store, source, run_id, config)
        _check_order(mf.stage_states(manifest), selected, manifest.run_id)
        _check_executor(config, store, manifest.source or SAMPLE_SOURCE)
    else:
        _check_order({}, selected, run_id or "(new)")
        config = config or BuildConfig()
        _check_executor(config, store, source or SAMPLE_SOURCE)
        manifest = _start(store, source or SAMPLE_SOURCE, config, run_id, parent)
    result = BuildResult(manifest.run_id, store, manifest, resumed=resume)
    tell = progress or (lambda _e: None)
    first = _first_to_run(store, manifest, selected, result, tell)
    if first is None and manifest.status == "complete":
        return result  # every output is whole: nothing to do
    _mark_running(store, manifest.run_id)
    ctx = StageContext(store, manifest.run_id, manifest.source or SAMPLE_SOURCE, config,
                       resume=resume)
    for stage in STAGES[len(STAGES) if first is None else first:]:
        if stage.name in selected:
            ctx.resume = resume and stage.resumable
            result.summaries[stage.name] = _run_stage(stage, ctx, tell)
    states = mf.stage_states(store.read_manifest(manifest.run_id))
    if all(states.get(s.name) == "complete" for s in STAGES):
        result.manifest = _finish(store, manifest.run_id)
    else:
        result.manifest = store.read_manifest(manifest.run_id)
    return result


def _selected(stages: Sequence[str] | None) -> set[str]:
    if stages is None:
        return {s.name for s in STAGES}
    return {stage_named(name).name for name in stages}


def _check_order(states: dict[str, str], selected: set[str], run_id: str) -> None:
    """Every stage before a selected one is selected too, or already complete."""
    for i, stage in enumerate(STAGES):
        later = any(s.name in selected for s in STAGES[i + 1:])
        if later and stage.name not in selected and states.get(stage.name) != "complete":
            wanted = ", ".join(s.name for s in STAGES if s.name in selected)
            raise ConfigError(f"stage {stage.name} of run {run_id} is not complete: "
                              f"run it before {wanted}")


def _first_to_run(store: Store, manifest: RunManifest, selected: set[str],
                  result: BuildResult, tell: BuildListener) -> int | None:
    """The index of the first selected stage to run: not complete, or complete with an
    output gone or corrupt. Every selected stage from there on runs (its inputs may differ);
    the ones before it are recorded as skipped. None when there is nothing to run."""
    states, outputs = mf.stage_states(manifest), mf.stage_outputs(manifest)
    unrecorded = "complete" if manifest.status == "complete" else None  # an older manifest
    for i, stage in enumerate(STAGES):
        if stage.name not in selected:
            continue
        if states.get(stage.name, unrecorded) != "complete":
            return i
        broken = stage.broken_outputs(store, outputs.get(stage.name, []))
        if broken:
            tell(BuildEvent(stage.name, "update", f"redoing: {broken[0]} is gone or corrupt"))
            return i
        result.skipped.append(stage.name)
        tell(BuildEvent(stage.name, "skip", "finished by an earlier attempt"))
    return None


def _mark_running(store: Store, run_id: str) -> None:
    def change(m: RunManifest) -> None:
        m.status = "running"
        m.finished_at = None
        mf.clear_error(m)

    mf.update_manifest(store, run_id, change)


def _run_stage(stage: Stage, ctx: StageContext, tell: BuildListener) -> dict[str, int]:
    store, run_id = ctx.store, ctx.run_id
    mf.update_manifest(store, run_id, lambda m: mf.set_stage_state(m, stage.name, "running"))
    tell(BuildEvent(stage.name, "start", stage.doc))
    ctx.say = lambda msg: tell(BuildEvent(stage.name, "update", msg))
    t0 = time.monotonic()
    try:
        summary = stage.function()(ctx)
    except BaseException as exc:  # record any stop (error, Ctrl-C) before it propagates
        seconds = time.monotonic() - t0
        message = _first_line(exc)
        _fail(store, run_id, stage.name, message, seconds)
        tell(BuildEvent(stage.name, "fail", message, seconds=seconds))
        raise
    seconds = round(time.monotonic() - t0, 3)

    keys = stage.output_keys(store, run_id)

    def change(m: RunManifest) -> None:
        mf.set_stage_state(m, stage.name, "complete", outputs=keys)
        m.timings_s[stage.name] = seconds

    mf.update_manifest(store, run_id, change)
    tell(BuildEvent(stage.name, "done", summary=summary, seconds=seconds))
    return summary


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    if isinstance(exc, SwemillError) and lines:
        return lines[0]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _fail(store: Store, run_id: str, stage: str, message: str, seconds: float) -> None:
    def change(m: RunManifest) -> None:
        mf.set_stage_state(m, stage, "failed")
        mf.set_error(m, stage, message)
        m.timings_s[stage] = round(seconds, 3)
        m.status = "failed"
        m.finished_at = utcnow()

    with contextlib.suppress(SwemillError):  # the store may be what failed: its error wins
        mf.update_manifest(store, run_id, change)


def _finish(store: Store, run_id: str) -> RunManifest:
    def change(m: RunManifest) -> None:
        m.status = "complete"
        m.finished_at = utcnow()

    manifest = mf.update_manifest(store, run_id, change)
    write_report(store, run_id)  # again, so the report shows the final status and timings
    return manifest


def describe(result: BuildResult) -> dict[str, Any]:
    """The build's outcome as JSON data (what ``swemill build --json`` prints)."""
    m = result.manifest
    drops = run_summary(result.store, result.run_id)
    return {"run_id": result.run_id, "status": m.status, "resumed": result.resumed,
            "skipped_stages": result.skipped, "rows": result.rows, "locations": result.locations(),
            "counts": m.counts, "timings_s": m.timings_s, "cost_usd": m.cost_usd,
            "parent_run_id": m.parent_run_id, "config_hash": m.config_hash,
            "drop_summary": drops.to_dict() if drops else None}
