"""The build as data: an ordered list of stages, each naming its entry point and its keys.

``STAGES`` is what the local driver (:mod:`swemill.pipeline.driver`) runs in order and what an
orchestrator (a Step Functions state machine, a Ray DAG) is generated from: every stage is a
function of a :class:`StageContext`, reads only what the store holds under ``reads`` (plus the
local environment cache) and writes only under ``writes``. A ``resumable`` stage started again
with ``resume=True`` skips the shards it already finished; the others are redone whole.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from swemill.core.errors import ConfigError
from swemill.pipeline.config import BuildConfig
from swemill.store import Store
from swemill.store.layout import marker_key

__all__ = ["Stage", "StageContext", "STAGES", "stage_named"]

Say = Callable[[str], None]


@dataclass(slots=True)
class StageContext:
    """What a stage gets: where to write, which run, what to build, how to report progress."""

    store: Store
    run_id: str
    source: str
    config: BuildConfig
    resume: bool = False
    say: Say = field(default=lambda _msg: None)


@dataclass(frozen=True, slots=True)
class Stage:
    name: str
    entry: str
    """``module:function`` taking a :class:`StageContext` and returning its counts."""
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    doc: str
    resumable: bool = False
    """The function skips its own finished shards when called with ``resume=True``; a stage
    that is not resumable is a pure function of its inputs and is redone whole."""
    shards: tuple[str, ...] = ()
    """Store stages whose completion markers prove this stage's output is still there."""
    files: tuple[str, ...] = ()
    """Other keys (``{run_id}`` filled in) that must exist for the stage to count as done."""
    listed: tuple[str, ...] = ()
    """Prefixes (``{run_id}`` filled in) every object of which, as listed when the stage
    completed, must still exist (the tasks' snapshots)."""

    def function(self) -> Callable[[StageContext], dict[str, int]]:
        module, _, attr = self.entry.partition(":")
        fn: Callable[[StageContext], dict[str, int]] = getattr(
            importlib.import_module(module), attr)
        return fn

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "entry": self.entry, "reads": list(self.reads),
                "writes": list(self.writes), "doc": self.doc, "resumable": self.resumable}

    def broken_outputs(self, store: Store, keys: list[str]) -> list[str]:
        """Those of ``keys`` (as :meth:`output_keys` recorded them) that are gone, or whose
        Parquet part is gone or no longer matches its marker."""
        return [k for k in keys if not _intact(store, k)]

    def output_keys(self, store: Store, run_id: str) -> list[str]:
        """The keys that show this stage's output is complete, as they are now."""
        keys = [marker_key(stage, run_id, shard) for stage in self.shards
                for shard in store.complete_shards(stage, run_id)]
        keys += [f"{prefix}/{name}" for p in self.listed
                 for prefix in [p.format(run_id=run_id)] for name in store.list_keys(prefix)]
        return keys + [f.format(run_id=run_id) for f in self.files]


def _intact(store: Store, key: str) -> bool:
    prefix, sep, name = key.rpartition("/_completions/")
    if not sep:
        return store.exists(key)
    stage, _, run = prefix.rpartition("/run_id=")
    return store.is_intact(stage, run, name.removesuffix(".json"))


_RUN = "run_id=<id>"
STAGES: tuple[Stage, ...] = (
    Stage("gate", "swemill.pipeline.steps:gate", reads=("source",),
          writes=(f"gate/{_RUN}/verdicts.jsonl",),
          doc="License tier and benchmark decontamination; a refused source stops the build.",
          files=("gate/run_id={run_id}/verdicts.jsonl",)),
    Stage("env", "swemill.pipeline.steps:env", reads=("source",),
          writes=("envs/<repo>@<commit>/recipe.json", "envs/<repo>@<commit>/baseline.json"),
          doc="Build (or reuse) the repository's environment and its baseline (3 runs + "
              "coverage map); cached per repo@commit."),
    Stage("tasks", "swemill.pipeline.steps:tasks", reads=("source", "envs/"),
          writes=(f"tasks/{_RUN}/", f"golden/{_RUN}/", f"golden/feed/{_RUN}/",
                  f"candidates/{_RUN}/", f"snapshots/{_RUN}/"),
          doc="Synthesise candidate bugs and validate them with the four gates.",
          resumable=True, shards=("tasks", "golden", "golden/feed", "candidates"),
          listed=("snapshots/run_id={run_id}",)),
    Stage("rollouts", "swemill.pipeline.steps:rollouts",
          reads=(f"tasks/{_RUN}/", f"golden/{_RUN}/", f"snapshots/{_RUN}/"),
          writes=(f"trajectories/{_RUN}/", f"pairs/{_RUN}/", f"rollouts/{_RUN}/",
                  f"difficulty/{_RUN}/"),
          doc="Run the policies on every task, grade with the oracle, sample preference pairs; "
              "each task's solve rate, pass@k and difficulty label.",
          resumable=True, shards=("trajectories", "pairs", "difficulty")),
    Stage("corpus", "swemill.pipeline.steps:corpus",
          reads=(f"trajectories/{_RUN}/", f"pairs/{_RUN}/", f"tasks/{_RUN}/", f"golden/{_RUN}/",
                 f"difficulty/{_RUN}/", "index/dedup/"),
          writes=(f"corpus/sft/{_RUN}/", f"corpus/dpo/{_RUN}/", f"corpus/holdout/{_RUN}/",
                  f"corpus/wm/{_RUN}/", f"index/dedup/{_RUN}/", f"reports/{_RUN}/README.md",
                  "README.md"),
          doc="Filter, scrub, dedup (across runs) and split into SFT/DPO Parquet; the card.",
          shards=("corpus/sft", "corpus/dpo", "corpus/holdout", "corpus/wm", "index/dedup"),
          files=("reports/run_id={run_id}/README.md",)),
    Stage("report", "swemill.pipeline.steps:report",
          reads=(f"manifests/{_RUN}.json", f"tasks/{_RUN}/", f"candidates/{_RUN}/",
                 f"trajectories/{_RUN}/", f"difficulty/{_RUN}/", f"corpus/*/{_RUN}/"),
          writes=(f"reports/{_RUN}/index.html",),
          doc="The self-contained HTML report of the run.",
          files=("reports/run_id={run_id}/index.html",)),
)


def stage_named(name: str) -> Stage:
    for stage in STAGES:
        if stage.name == name:
            return stage
    names = ", ".join(s.name for s in STAGES)
    raise ConfigError(f"unknown stage {name!r}: the stages are {names}")
