"""SIGKILL ``swemill build`` (a real process group) at several points, then ``--resume``: the
final dataset equals an uninterrupted build's, with no duplicate rows and nothing lost. On the
way, a corrupt Parquet part left by the "crash" is one clear error, and deleting it (as the
error says) lets the resumed build redo exactly that shard."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swemill.core.records import Task
from swemill.store import Store
from swemill.store.layout import marker_key, part_key

pytestmark = pytest.mark.slow


def _manifest(root: Path) -> dict | None:
    paths = sorted((root / "manifests").glob("run_id=*.json"))
    return json.loads(paths[-1].read_text()) if paths else None


def _kill_during(root: Path, stage: str, args: list[str], cache: Path, delay: float) -> None:
    """Start ``swemill build ARGS``, wait until ``stage`` is running, wait ``delay``, SIGKILL."""
    env = dict(os.environ, SWEMILL_CACHE=str(cache))
    proc = subprocess.Popen([sys.executable, "-m", "swemill", "build", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, env=env)
    deadline = time.monotonic() + 300
    try:
        while True:
            assert proc.poll() is None, f"build ended before {stage} ran: {proc.stderr.read()}"
            assert time.monotonic() < deadline, f"{stage} never started"
            m = _manifest(root)
            if m and m["metadata"].get("build", {}).get("stages", {}).get(stage) == "running":
                break
            time.sleep(0.02)
        time.sleep(delay)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        proc.stderr.close()  # type: ignore[union-attr]
    m = _manifest(root)
    assert m is not None and m["status"] == "running", "the kill came after the build ended"


def _rows(store: Store, run_id: str, stage: str, key: str) -> list[str]:
    if not store.complete_shards(stage, run_id):
        return []
    return [r[key] for r in store.read_records(stage, run_id)]


def _dataset(root: Path, run_id: str) -> dict[str, list[str]]:
    store = Store.open(str(root))
    holdout = store.read_records("corpus/holdout", run_id) if store.complete_shards(
        "corpus/holdout", run_id) else []
    return {
        "tasks": sorted(t.instance_id for t in store.read_records("tasks", run_id, Task)),
        "sft": _rows(store, run_id, "corpus/sft", "trajectory_id"),
        "dpo": _rows(store, run_id, "corpus/dpo", "pair_id"),
        "holdout": [r.get("trajectory_id") or r.get("pair_id") for r in holdout],
    }


def test_killed_three_times_then_resumed_equals_an_uninterrupted_build(
        sample_build, cli, tmp_path: Path) -> None:
    root = tmp_path / "out"
    args = ["--out", str(root), *cli.BUILD_ARGS]
    resume = ["--out", str(root), "--resume"]
    cache = sample_build.cache

    _kill_during(root, "tasks", args, cache, delay=3.0)  # mid-validation
    run_id = _manifest(root)["run_id"]  # type: ignore[index]
    _kill_during(root, "rollouts", resume, cache, delay=1.0)  # mid-rollouts
    m = _manifest(root)
    assert m["metadata"]["build"]["stages"]["tasks"] == "complete"  # type: ignore[index]

    # An earlier crash left a finished tasks shard corrupt: one line, the run marked failed.
    store = Store.open(str(root))
    shard = store.complete_shards("tasks", run_id)[0]
    part = root / part_key("tasks", run_id, shard)
    part.write_bytes(part.read_bytes()[: len(part.read_bytes()) // 2])
    line = cli.error_line(cli.run("build", *resume, cache=cache))
    assert "corrupt Parquet part" in line and shard in line, line
    assert _manifest(root)["status"] == "failed"  # type: ignore[index]
    # Do as the error says: delete the shard; the resumed build redoes that shard.
    part.unlink()
    (root / marker_key("tasks", run_id, shard)).unlink()

    _kill_during(root, "corpus", resume, cache, delay=0.0)
    final = cli.build_json(*resume, cache=cache)
    assert final["run_id"] == run_id and final["status"] == "complete"
    assert "gate" in final["skipped_stages"] and "corpus" not in final["skipped_stages"]

    want = _dataset(sample_build.root, sample_build.run_id)
    got = _dataset(root, run_id)
    for table in ("sft", "dpo", "holdout"):
        assert len(got[table]) == len(set(got[table])), f"duplicate rows in {table}"
    why = {k: (final["counts"].get(k), sample_build.out["counts"].get(k))
           for k in ("tasks", "rollouts", "corpus.sft", "corpus.dpo")}
    assert got["tasks"] == want["tasks"], why
    assert {k: len(v) for k, v in got.items()} == {k: len(v) for k, v in want.items()}, why
    assert final["rows"] == sample_build.out["rows"], why
    for stage in ("tasks", "corpus.sft", "corpus.dpo", "corpus.split"):
        assert final["counts"][stage] == sample_build.out["counts"][stage], stage
