"""The replay package's public names are pinned, and importing it loads no provider SDK."""

from __future__ import annotations

import subprocess
import sys

import swemill.replay


def test_all_is_pinned() -> None:
    assert sorted(swemill.replay.__all__) == [
        "BatchQuotas", "PolicyJudge", "REPLIES_STAGE", "ReplayClients", "ReplayConfig",
        "ReplaySummary", "TeacherPool", "TeacherReply", "TeacherSpec", "batch_vs_realtime",
        "extract_dpo_pairs", "extract_run", "parse_teacher", "parse_teachers", "plan_shards",
        "run_replay",
    ]
    for name in swemill.replay.__all__:
        assert hasattr(swemill.replay, name), name


def test_importing_replay_loads_no_provider_sdk() -> None:
    code = ("import sys, swemill.replay, swemill.cli.replay_cmd; "
            "print(sorted(m for m in ('openai', 'anthropic', 'boto3', 'botocore') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"
