"""The build as data: an ordered list of stages, each naming its entry point and its keys.

``STAGES`` is what the local driver (:mod:`swemill.pipeline.driver`) runs in order and what an
orchestrator (a Step Functions state machine, a Ray DAG) is generated from: every stage is a
function of a :class:`StageContext`, reads only what the store holds under ``reads`` (plus the
local environment cache) and writes only under ``writes``. A stage started again with
``resume=True`` skips the shards it already finished.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from swemill.core.errors import ConfigError
from swemill.pipeline.config import BuildConfig
from swemill.store import Store

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

    def function(self) -> Callable[[StageContext], dict[str, int]]:
        module, _, attr = self.entry.partition(":")
        fn: Callable[[StageContext], dict[str, int]] = getattr(
            importlib.import_module(module), attr)
        return fn

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "entry": self.entry, "reads": list(self.reads),
                "writes": list(self.writes), "doc": self.doc}


_RUN = "run_id=<id>"
STAGES: tuple[Stage, ...] = (
    Stage("gate", "swemill.pipeline.steps:gate", reads=("source",),
          writes=(f"gate/{_RUN}/verdicts.jsonl",),
          doc="License tier and benchmark decontamination; a refused source stops the build."),
    Stage("env", "swemill.pipeline.steps:env", reads=("source",),
          writes=("envs/<repo>@<commit>/recipe.json", "envs/<repo>@<commit>/baseline.json"),
          doc="Build (or reuse) the repository's environment and its baseline (3 runs + "
              "coverage map); cached per repo@commit."),
    Stage("tasks", "swemill.pipeline.steps:tasks", reads=("source", "envs/"),
          writes=(f"tasks/{_RUN}/", f"golden/{_RUN}/", f"snapshots/{_RUN}/"),
          doc="Synthesise candidate bugs and validate them with the four gates."),
    Stage("rollouts", "swemill.pipeline.steps:rollouts",
          reads=(f"tasks/{_RUN}/", f"golden/{_RUN}/", f"snapshots/{_RUN}/"),
          writes=(f"trajectories/{_RUN}/", f"pairs/{_RUN}/"),
          doc="Run the policies on every task, grade with the oracle, sample preference pairs."),
    Stage("corpus", "swemill.pipeline.steps:corpus",
          reads=(f"trajectories/{_RUN}/", f"pairs/{_RUN}/", f"tasks/{_RUN}/", f"golden/{_RUN}/",
                 "index/dedup/"),
          writes=(f"corpus/sft/{_RUN}/", f"corpus/dpo/{_RUN}/", f"corpus/holdout/{_RUN}/",
                  f"corpus/wm/{_RUN}/", f"index/dedup/{_RUN}/", f"reports/{_RUN}/README.md"),
          doc="Filter, scrub, dedup (across runs) and split into SFT/DPO Parquet; the card."),
    Stage("report", "swemill.pipeline.steps:report",
          reads=(f"manifests/{_RUN}.json", f"tasks/{_RUN}/", f"trajectories/{_RUN}/",
                 f"corpus/*/{_RUN}/"),
          writes=(f"reports/{_RUN}/index.html",),
          doc="The self-contained HTML report of the run."),
)


def stage_named(name: str) -> Stage:
    for stage in STAGES:
        if stage.name == name:
            return stage
    names = ", ".join(s.name for s in STAGES)
    raise ConfigError(f"unknown stage {name!r}: the stages are {names}")
