"""Acceptance: ``swemill tasks --executor ray`` on the sample repository writes exactly the
tasks of ``--executor local`` with the same seed. Snapshots are compared by their working
tree: the archive's ``.git`` holds a commit made at snapshot time, so its object ids differ
between any two runs, local ones included."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from swemill.core.records import Golden, Task
from swemill.store import Store
from swemill.store.layout import snapshot_key

pytest.importorskip("ray")
pytestmark = [pytest.mark.slow, pytest.mark.network]


def _tasks(root: Path, executor: str, cache: Path) -> dict[str, Any]:
    env = {**os.environ, "SWEMILL_CACHE": str(cache)}
    proc = subprocess.run(
        [sys.executable, "-m", "swemill", "tasks", "sample", "--out", str(root), "--run-id",
         "s1", "--max-tasks", "2", "--strategies", "procedural,pr-mirror", "--workers", "2",
         "--seed", "3", "--executor", executor, "--json"],
        env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _members(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: (tar.extractfile(m).read() if m.isfile() else b"")  # type: ignore[union-attr]
                for m in tar.getmembers() if not m.name.removeprefix("./").startswith(".git")}


def _written(root: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    store = Store(str(root))
    tasks = sorted((t.model_dump(mode="json", exclude={"created_at"})
                    for t in store.read_records("tasks", "s1", Task)),
                   key=lambda t: t["instance_id"])
    for t in tasks:
        t["metadata"].pop("snapshot_sha256", None)
    goldens = sorted((g.model_dump(mode="json") for g in
                      store.read_records("golden", "s1", Golden)),
                     key=lambda g: g["instance_id"])
    snaps = {t["instance_id"]: _members(store.get_bytes(snapshot_key("s1", t["instance_id"])))
             for t in tasks}
    return tasks, goldens, snaps


def test_ray_yields_the_tasks_of_local(tmp_path: Path, shared_cache: Path) -> None:
    local = _tasks(tmp_path / "local", "local", shared_cache)
    on_ray = _tasks(tmp_path / "ray", "ray", shared_cache)
    assert local["tasks"] == on_ray["tasks"] == 2
    want = _written(tmp_path / "local")
    assert want[0] and _written(tmp_path / "ray") == want
