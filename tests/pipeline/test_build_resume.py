"""Deterministic resume: ``swemill build`` (a real process group) is SIGKILLed at every stage
boundary and inside every stage, each time as soon as a file the build writes there appears
(a shard's completion marker, a stage's first object, the manifest naming the next stage),
then ``--resume``d; the dataset it ends with has the same rows, hash for hash, as an
uninterrupted build with the same seed. A shard deleted or corrupted after a run completed is
repaired by ``--resume``, with everything that depends on it, and the manifest's counts are
those of the clean build again.

The reference build takes the same ``--run-id`` in another root: run ids are part of the
rows (trajectory ids, snapshot keys), so nothing but clock readings is normalised — points in
time (``*_at``) and elapsed times (``wall_s``, the grader's ``wall 1.23s``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.slow

RUN = "resume-R1"
# The sample's default strategies, so combine (fed by the first strategy) is in the build.
ARGS = ("--max-tasks", "4", "--samples", "2", "--workers", "2", "--seed", "3", "--audit", "0",
        "--policy", "oracle", "--policy", "noisy-oracle:1.0")
PARQUET = ("tasks", "golden", "golden/feed", "candidates", "trajectories", "pairs",
           "difficulty", "corpus/sft", "corpus/dpo", "corpus/holdout", "index/dedup")
_WALL = re.compile(r"\bwall \d+(\.\d+)?s\b")


def _norm(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items() if not k.endswith("_at") and k != "wall_s"}
    if isinstance(value, list):
        return [_norm(v) for v in value]
    if isinstance(value, str):
        if value[:1] in "{[":  # JSON text columns of typed records
            try:
                return _norm(json.loads(value))
            except ValueError:
                pass
        return _WALL.sub("wall <s>", value)
    return value


def _row_hash(row: dict[str, Any]) -> str:
    text = json.dumps(_norm(row), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def marked_rows(root: Path) -> dict[str, list[str]]:
    """Sorted row hashes of every Parquet part that has a completion marker, per stage."""
    out: dict[str, list[str]] = {}
    for stage in PARQUET:
        hashes: list[str] = []
        for marker in sorted(root.glob(f"{stage}/run_id={RUN}/_completions/*.json")):
            part = marker.parent.parent / f"part-{marker.stem}.parquet"
            hashes += [_row_hash(r) for r in pq.read_table(part).to_pylist()]
        out[stage] = sorted(hashes)
    return out


def _snapshots(root: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.glob(f"snapshots/run_id={RUN}/*")}


def _manifest(root: Path) -> dict[str, Any]:
    return json.loads((root / f"manifests/run_id={RUN}.json").read_text())  # type: ignore[no-any-return]


def _counts(root: Path) -> dict[str, Any]:
    counts = _manifest(root)["counts"]
    return {k: v for k, v in counts.items() if k.startswith(("tasks", "rollouts", "corpus"))}


def _swemill(cache: Path, *args: str, **kw: Any) -> subprocess.Popen[str]:
    env = dict(os.environ, SWEMILL_CACHE=str(cache), COLUMNS="200")
    return subprocess.Popen([sys.executable, "-m", "swemill", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, **kw)


def _finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class KillPoint:
    name: str
    fired: Callable[[Path, float], bool]
    """Whether the build reached the point: ``fired(root, started)``."""
    after_s: float = 0.0
    """Kill this long after it fired (the report stage writes one file, at its very end)."""


def appears(pattern: str) -> Callable[[Path, float], bool]:
    """A file matching ``pattern`` (with the run id filled in) written after the start."""
    pattern = pattern.format(run=RUN)

    def fired(root: Path, started: float) -> bool:
        for path in root.glob(pattern):
            try:
                if path.stat().st_mtime >= started:
                    return True
            except FileNotFoundError:
                continue
        return False
    return fired


def stage_running(stage: str) -> Callable[[Path, float], bool]:
    """The manifest says ``stage`` started: the boundary between it and the one before."""
    def fired(root: Path, _started: float) -> bool:
        try:
            stages = _manifest(root)["metadata"]["build"]["stages"]
        except (FileNotFoundError, ValueError, KeyError):
            return False
        return stages.get(stage) == "running"  # type: ignore[no-any-return]
    return fired


# In build order: each boundary, and one point (or two) inside each stage.
KILL_POINTS = (
    KillPoint("gate: verdicts written", appears("gate/run_id={run}/verdicts.jsonl")),
    KillPoint("gate | env", stage_running("env")),
    KillPoint("env: baseline written", appears("envs/*/baseline.json")),
    KillPoint("env | tasks", stage_running("tasks")),
    KillPoint("tasks: procedural shard marked",
              appears("tasks/run_id={run}/_completions/*procedural.json")),
    KillPoint("tasks: pr-mirror shard marked",
              appears("tasks/run_id={run}/_completions/*pr-mirror.json")),
    KillPoint("tasks | rollouts", stage_running("rollouts")),
    KillPoint("rollouts: second shard marked",
              appears("trajectories/run_id={run}/_completions/00001-of-*.json")),
    KillPoint("rollouts | corpus", stage_running("corpus")),
    KillPoint("corpus: SFT shard marked", appears("corpus/sft/run_id={run}/_completions/*.json")),
    KillPoint("corpus | report", stage_running("report")),
    KillPoint("report: rendering", stage_running("report"), after_s=0.02),
)


def kill_at(point: KillPoint, root: Path, cache: Path, args: list[str],
            command: tuple[str, ...] = ("build",)) -> bool:
    """Run ``swemill build ARGS`` and SIGKILL its process group once ``point`` fires; False
    when the build ended first (the point was passed without a kill)."""
    started = time.time() - 1.0  # file times are coarser than time.time()
    proc = _swemill(cache, *command, *args, "--json")
    deadline = time.monotonic() + 400
    try:
        while proc.poll() is None:
            if point.fired(root, started):
                time.sleep(point.after_s)
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=60)
                return True
            assert time.monotonic() < deadline, f"{point.name}: never reached"
            time.sleep(0.005)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        proc.communicate()
    assert proc.returncode == 0, f"{point.name}: the build failed before the point"
    return False


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, build_cache: Path) -> Path:
    """An uninterrupted build under the same run id and seed, in its own root."""
    root = tmp_path_factory.mktemp("reference") / "out"
    out = _finish(_swemill(build_cache, "build", "--out", str(root), "--run-id", RUN, *ARGS,
                           "--json"))
    assert out["status"] == "complete"
    return root


def test_a_build_killed_at_every_boundary_and_inside_every_stage_resumes_to_the_same_rows(
        reference: Path, build_cache: Path, tmp_path: Path) -> None:
    want = marked_rows(reference)
    assert want["tasks"] and want["golden/feed"] and want["trajectories"] and want["corpus/sft"]
    assert want["candidates"]
    assert any("combine" in p.name for p in reference.glob(f"tasks/run_id={RUN}/part-*")), \
        "the reference build has no combine task: the feed is not exercised"
    root = tmp_path / "out"
    first = ["--out", str(root), "--run-id", RUN, *ARGS]
    resume = ["--out", str(root), "--run-id", RUN, "--resume"]
    killed = []
    for n, point in enumerate(KILL_POINTS):
        if not kill_at(point, root, build_cache, first if n == 0 else resume):
            break
        killed.append(point.name)
        assert _manifest(root)["status"] == "running", point.name
        # Whatever is marked finished already is what the clean build has, row for row.
        got = marked_rows(root)
        for stage in PARQUET:
            extra = set(got[stage]) - set(want[stage])
            assert not extra, f"killed at {point.name}: {stage} holds rows a clean build lacks"
    assert len(killed) == len(KILL_POINTS), killed
    out = _finish(_swemill(build_cache, "build", *resume, "--json"))
    assert out["status"] == "complete" and out["run_id"] == RUN
    assert marked_rows(root) == want
    assert _snapshots(root) == _snapshots(reference)
    assert _counts(root) == _counts(reference)


def test_resume_repairs_a_complete_run_whose_shards_were_deleted_or_corrupted(
        reference: Path, build_cache: Path, tmp_path: Path) -> None:
    root = tmp_path / "out"
    shutil.copytree(reference, root)
    resume = ["--out", str(root), "--run-id", RUN, "--resume"]

    # Nothing broken: --resume changes nothing.
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}
    out = _finish(_swemill(build_cache, "build", *resume, "--json"))
    assert out["status"] == "complete" and len(out["skipped_stages"]) == 6
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()} == before

    run = f"run_id={RUN}"
    # A truncated tasks part (its marker left), a task's snapshot deleted, a trajectories
    # shard deleted with its marker, a pairs part deleted without its marker, a corpus
    # marker deleted alone.
    tasks_part = next(root.glob(f"tasks/{run}/part-*procedural.parquet"))
    tasks_part.write_bytes(tasks_part.read_bytes()[:100])
    next(root.glob(f"snapshots/{run}/*pr-mirror*.tar.gz")).unlink()
    traj = root / f"trajectories/{run}/part-00002-of-00004.parquet"
    traj.unlink()
    (traj.parent / "_completions/00002-of-00004.json").unlink()
    next(root.glob(f"pairs/{run}/part-*.parquet")).unlink()
    next(root.glob(f"corpus/dpo/{run}/_completions/*.json")).unlink()
    cands = next(root.glob(f"candidates/{run}/part-*combine.parquet"))  # marker left
    cands.write_bytes(cands.read_bytes()[:-40])

    out = _finish(_swemill(build_cache, "build", *resume, "--json"))
    assert out["status"] == "complete"
    assert out["skipped_stages"] == ["gate", "env"], out["skipped_stages"]
    assert marked_rows(root) == marked_rows(reference)
    assert _snapshots(root) == _snapshots(reference)
    assert _counts(root) == _counts(reference)
    assert out["counts"]["rollouts"]["trajectories"] == _counts(reference)["rollouts"][
        "trajectories"]


def test_the_tasks_and_rollout_commands_resume_to_the_same_rows(
        reference: Path, build_cache: Path, tmp_path: Path) -> None:
    """``swemill tasks --resume`` and ``swemill rollout --resume`` after a SIGKILL inside
    them: the same run_tasks and run_rollouts as the build's, so the build's rows."""
    want = marked_rows(reference)
    root = tmp_path / "out"
    tasks = ["tasks", "sample", "--out", str(root), "--run-id", RUN, "--max-tasks", "4",
             "--workers", "2", "--seed", "3"]
    assert kill_at(KILL_POINTS[4], root, build_cache, tasks, command=())
    _finish(_swemill(build_cache, *tasks, "--resume", "--json"))
    got = marked_rows(root)
    assert {s: got[s] for s in ("tasks", "golden", "golden/feed", "candidates")} == {
        s: want[s] for s in ("tasks", "golden", "golden/feed", "candidates")}

    config = tmp_path / "rollout.json"
    config.write_text(json.dumps({"seed": 3}))
    rollout = ["rollout", "--tasks", RUN, "--out", str(root), "--policy",
               "oracle,noisy-oracle:1.0", "--samples", "2", "--workers", "2",
               "--config", str(config)]
    assert kill_at(KILL_POINTS[7], root, build_cache, rollout, command=())
    _finish(_swemill(build_cache, *rollout, "--resume", "--json"))
    got = marked_rows(root)
    assert {s: got[s] for s in ("trajectories", "pairs")} == {
        s: want[s] for s in ("trajectories", "pairs")}
