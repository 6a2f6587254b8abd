"""The zoo's CI slice: ``benchmarks/bench_zoo.py`` run end to end on three small projects.

Each project is fetched from PyPI, its environment built, ``swemill tasks --max-tasks 2`` run,
and every task it wrote re-validated by the benchmark with plain pytest and no swemill code
(F2P repeated twice). Measured at about 50 s wall on 2 cores with a warm uv cache (see
docs/tasks.md); each swemill command is bounded by ``--budget``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.network]

ZOO = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_zoo.py"
SLICE = ("isodate", "colorama", "pastel")


def test_three_zoo_projects_build_yield_tasks_and_hold_by_hand(tmp_path: Path) -> None:
    rows_file = tmp_path / "rows.json"
    proc = subprocess.run(
        [sys.executable, str(ZOO), "--only", ",".join(SLICE), "--max-tasks", "2",
         "--repeat", "2", "--budget", "240", "--out", str(tmp_path / "zoo"),
         "--json", str(rows_file)],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(rows_file.read_text())
    assert sorted(r["spec"].split(":")[1].split("==")[0] for r in rows) == sorted(SLICE)
    for row in rows:
        where = f"{row['spec']}: {row['error']}"
        assert row["env_ok"], where
        assert row["error"] == "", where
        assert row["valid"] >= 1, where
        assert row["revalidated"] >= 1, where  # every written task re-validated by hand
        assert row["false_tasks"] == [], where
    assert "0 false of" in proc.stdout
