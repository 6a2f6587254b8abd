"""``swemill corpus`` and ``swemill report`` as a user runs them: real processes, a real store."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from swemill.core.records import RunManifest
from swemill.store import Store

pytestmark = pytest.mark.slow


def _swemill(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "swemill", *args], capture_output=True,
                          text=True, timeout=120)


def _seed(root: str, run_id: str, corpus) -> Store:
    store = Store.open(root)
    store.write_manifest(RunManifest(run_id=run_id, source="sample", timings_s={"rollout": 3.0},
                                     counts={"synth.procedural": {"in": 20, "out": 4}}))
    store.write_records("tasks", run_id, "00000-of-00001", list(corpus.tasks.values()))
    store.write_records("golden", run_id, "00000-of-00001", list(corpus.goldens.values()))
    store.write_records("trajectories", run_id, "00000-of-00001", corpus.trajectories)
    store.write_records("pairs", run_id, "00000-of-00001", corpus.pairs)
    return store


def test_corpus_then_report_then_a_second_run_drops_duplicates(tmp_path, corpus):
    root = str(tmp_path / "root")
    store = _seed(root, "run1", corpus)
    done = _swemill("corpus", "--run", "run1", "--out", root, "--emit", "wm", "--holdout", "0.25",
                    "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["rows"]["sft"] + summary["rows"]["sft_holdout"] == 8
    assert summary["rows"]["dpo"] + summary["rows"]["dpo_holdout"] == 8
    assert summary["rows"]["wm"] == 32
    assert store.exists("reports/run_id=run1/README.md")
    # the copy at the root is the one whose data_files paths resolve
    assert store.read_text("README.md") == store.read_text("reports/run_id=run1/README.md")
    assert store.read_manifest("run1").counts["corpus.sft"]["out"] == 8
    assert len(store.read_records("index/dedup", "run1")) == 16  # 8 rows + 8 pair digests

    again = _swemill("corpus", "--run", "run1", "--out", root, "--resume", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["skipped"] is True

    report = _swemill("report", "--run", "run1", "--out", root)
    assert report.returncode == 0, report.stderr
    html = store.read_text("reports/run_id=run1/index.html")
    assert html.count("<svg") == 7 and "run1" in html

    _seed(root, "run2", corpus)  # the same records again: all duplicates of run1
    second = _swemill("corpus", "--run", "run2", "--out", root)
    assert second.returncode == 2
    assert second.stderr.strip().count("\n") == 0  # one line
    assert "empty after filtering (exact_duplicate=16" in second.stderr
    counts = store.read_manifest("run2").counts["corpus.sft"]
    assert counts["dropped_exact_duplicate"] == 8  # recorded before failing


def test_bad_input_is_one_clear_line(tmp_path, corpus):
    root = str(tmp_path / "root")
    Store.open(root)
    for args, needle in (
        (("corpus", "--run", "nope", "--out", root), "no trajectories, traces or pairs"),
        (("report", "--run", "nope", "--out", root), "no run nope"),
        (("corpus", "--run", "r", "--out", root, "--emit", "xyz"), "unknown --emit"),
    ):
        done = _swemill(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert needle in done.stderr and done.stderr.strip().count("\n") == 0
    store = _seed(root, "bad", corpus)
    store.put_bytes("trajectories/run_id=bad/part-00000-of-00001.parquet", b"PAR1 torn")
    done = _swemill("corpus", "--run", "bad", "--out", root)
    assert done.returncode == 2 and "corrupt Parquet part" in done.stderr
