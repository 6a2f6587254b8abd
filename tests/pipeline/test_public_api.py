"""The public API of swemill.pipeline, pinned."""

from __future__ import annotations

import swemill.pipeline as pipeline


def test_all_is_pinned() -> None:
    assert sorted(pipeline.__all__) == [
        "BuildConfig", "BuildEvent", "BuildResult", "DEFAULT_POLICIES", "SAMPLE_SOURCE",
        "STAGES", "Stage", "StageContext", "latest_unfinished", "run_build", "stage_named",
    ]
    for name in pipeline.__all__:
        assert getattr(pipeline, name) is not None
