"""The build pipeline: the ordered stage list and the local driver of ``swemill build``."""

from swemill.pipeline.config import DEFAULT_POLICIES, SAMPLE_SOURCE, BuildConfig
from swemill.pipeline.driver import BuildEvent, BuildResult, latest_unfinished, run_build
from swemill.pipeline.stages import STAGES, Stage, StageContext, stage_named

__all__ = [
    "BuildConfig",
    "BuildEvent",
    "BuildResult",
    "DEFAULT_POLICIES",
    "SAMPLE_SOURCE",
    "STAGES",
    "Stage",
    "StageContext",
    "latest_unfinished",
    "run_build",
    "stage_named",
]
