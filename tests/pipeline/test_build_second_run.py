"""A second build over the same source into the same root drops what the first already holds,
counted in the second run's manifest; with nothing new left it is one clear error, not an
empty dataset that claims success."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _dups(counts: dict, stage: str) -> int:
    return sum(n for k, n in counts.get(stage, {}).items() if k.endswith("_duplicate"))


def test_second_build_drops_the_first_builds_duplicates(sample_build, cli,
                                                        tmp_path: Path) -> None:
    root = tmp_path / "out"
    shutil.copytree(sample_build.root, root)
    proc = cli.run("build", "--out", str(root), *cli.BUILD_ARGS, "--parent",
                   sample_build.run_id, cache=sample_build.cache)
    line = cli.error_line(proc)
    assert "empty after filtering" in line and "repeat earlier runs" in line
    first = sample_build.out["counts"]
    (path,) = [p for p in (root / "manifests").glob("run_id=*.json")
               if sample_build.run_id not in p.name]
    second = json.loads(path.read_text())
    assert second["status"] == "failed" and second["parent_run_id"] == sample_build.run_id
    assert second["metadata"]["build"]["error_stage"] == "corpus"
    # Every row the first build kept or dropped as a duplicate comes back as a duplicate (of
    # the first run's rows now), and is counted; nothing is kept.
    for stage in ("corpus.sft", "corpus.dpo"):
        assert first[stage]["out"] > 0
        assert _dups(second["counts"], stage) == first[stage]["out"] + _dups(first, stage)
        assert second["counts"][stage].get("out", 0) == 0
    run = second["run_id"]
    assert not (root / f"corpus/sft/run_id={run}").exists()
    assert not (root / f"reports/run_id={run}/README.md").exists()  # no card for no data
