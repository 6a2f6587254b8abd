"""Bad input to ``swemill probe``: one clear line and exit 2, or a result naming what was
skipped and why."""

from __future__ import annotations

import importlib.util

import pytest

from swemill.store import Store

pytestmark = pytest.mark.slow


def _one_line_error(done, needle: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert needle in done.stderr, done.stderr
    assert done.stderr.strip().count("\n") == 0, done.stderr  # one line, no traceback


def test_missing_model_path_empty_run_and_nothing_to_measure(tmp_path, probe_kit):
    root = str(tmp_path / "root")
    probe_kit.seed(root, "gen1")
    for args, needle in (
        (("--run", "gen1", "--model", str(tmp_path / "no-such-model")), "does not exist"),
        (("--run", "gen1", "--model", "./missing/model"), "model path ./missing/model does not"),
        (("--run", "nope", "--model", "tiny"), "has no SFT rows under corpus/sft/"),
        (("--run", "gen1", "--model", "tiny", "--device", "tpu"), "unknown --device"),
        (("--run", "gen1", "--model", "tiny", "--lr", "0"), "bad probe setting: learning_rate"),
    ):
        done = probe_kit.probe(*args, "--out", root)
        _one_line_error(done, needle)
    store = probe_kit.seed(str(tmp_path / "bare"), "bare", pairs=False, holdout=0.0)
    root = store.url  # a root of its own: the same records in gen1 would be duplicates
    done = probe_kit.probe("--run", "bare",
                            "--model", "tiny", "--out", root)
    _one_line_error(done, "neither held-out SFT rows nor DPO pairs")
    assert not store.exists("reports/run_id=bare/probe.json")
    assert store.read_manifest("bare").accepted is None


def test_no_holdout_rows_leaves_the_run_undecided_and_says_why(tmp_path, probe_kit):
    root = str(tmp_path / "root")
    store = probe_kit.seed(root, "noho", n=8, holdout=0.0)
    done = probe_kit.probe("--run", "noho", "--model",
                            "tiny", "--out", root, "--steps", "3")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "skipped heldout" in done.stderr and "undecided" in done.stderr
    result = probe_kit.result(store, "noho")
    assert result["heldout"] is None and result["accepted"] is None
    assert "no held-out SFT rows" in result["skipped"]["heldout"]
    assert result["dpo_margin"]["pairs"] == 8  # what could be measured was
    assert store.read_manifest("noho").accepted is None


def test_no_dpo_rows_skips_the_margin_and_still_decides(tmp_path, probe_kit):
    root = str(tmp_path / "root")
    store = probe_kit.seed(root, "nodpo", n=8, pairs=False)
    done = probe_kit.probe("--run", "nodpo", "--model",
                            "tiny", "--out", root, "--steps", "3", "--threshold", "-1000")
    assert done.returncode == 0, done.stderr[-3000:]
    result = probe_kit.result(store, "nodpo")
    assert result["dpo_margin"] is None and "no DPO pairs" in result["skipped"]["dpo_margin"]
    assert result["heldout"]["rows"] == 2
    assert result["accepted"] is True  # any delta clears a threshold of -1000
    assert Store.open(root).read_manifest("nodpo").accepted is True


@pytest.mark.skipif(all(importlib.util.find_spec(m) for m in ("torch", "trl", "peft")),
                    reason="this environment has the probe extra installed")
def test_without_the_extra_one_line_says_how_to_install_it(tmp_path, kit):
    root = str(tmp_path / "root")
    kit.seed(root, "gen1")
    done = kit.main("probe", "--run", "gen1", "--model", "tiny", "--out", root)
    _one_line_error(done, "pip install 'swemill[probe]'")
