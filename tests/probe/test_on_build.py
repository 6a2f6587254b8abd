"""The probe and TRL's trainers on what ``swemill build`` writes (the bundled sample, scripted
policies, no network): the rows a user gets are rows the trainers consume."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from statistics import mean

import pytest

from swemill.store import Store

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sample_build(tmp_path_factory, shared_cache):
    root = tmp_path_factory.mktemp("build") / "root"
    env = dict(os.environ, SWEMILL_CACHE=str(shared_cache))
    done = subprocess.run([sys.executable, "-m", "swemill", "build", "--out", str(root),
                           "--audit", "0", "--json"], capture_output=True, text=True,
                          timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    return str(root), summary["run_id"], summary["counts"]["corpus.split"]


def test_trl_sft_and_dpo_trainers_train_on_the_build(tmp_path, probe_kit, sample_build):
    root, run_id, split = sample_build
    out = tmp_path / "losses.json"
    done = probe_kit.python("tests/probe/trl_steps.py", root, run_id, str(out), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    losses = json.loads(out.read_text())
    assert losses["sft_rows"] == split["sft_train"] > 0
    assert losses["dpo_rows"] == split["dpo_train"] + split["dpo_holdout"] > 0
    sft, dpo = losses["sft"], losses["dpo"]
    assert (len(sft), len(dpo)) == (12, 8)
    assert mean(sft[-3:]) < mean(sft[:3]) - 0.3, sft
    assert dpo[0] == pytest.approx(0.6931, abs=1e-3)  # policy == reference at step 0
    assert mean(dpo[-3:]) < dpo[0] / 2, dpo
    # The rows reached the trainer with their tools and object-valued call arguments.
    assert '<tools>\n{"type": "function", "function": {"name": ' in losses["sample"]
    assert '<tool_call>{"name": "read", "arguments": {"path": "' in losses["sample"]


@pytest.mark.timeout(900)  # the build fixture's time counts too; a busy machine needs it
def test_the_cards_trl_example_trains_with_trls_defaults(tmp_path, probe_kit, sample_build,
                                                         replay_corpus):
    """TRL's defaults but for the card's max_length, on the demo corpus and on a replay
    corpus: every pair's sides still differ within it (with the model's own tokenizer), the
    DPO loss leaves ln 2 and the gradient is real."""
    root, run_id, split = sample_build
    out = tmp_path / "defaults.json"
    done = probe_kit.python("tests/probe/trl_defaults.py", str(out), root, run_id,
                            *replay_corpus, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    demo, replay = json.loads(out.read_text())
    assert demo["dpo_rows"] == split["dpo_train"] + split["dpo_holdout"] > 0
    assert all(loss == loss for loss in demo["sft"]) and demo["sft"]  # finite: rows consumed
    assert replay["dpo_rows"] > 0
    # TRL's default learning rate (1e-6) moves a random tiny model little in 3 steps, the
    # less the fewer rows a batch holds (the replay corpus: a dozen): a falling loss and a
    # real gradient are the signal that the rows train
    for result, fall in ((demo, 0.005), (replay, 1e-4)):
        assert all(result["differ_within"]), result
        dpo = result["dpo"]
        assert dpo[0] == pytest.approx(0.6931, abs=1e-3) and dpo[-1] < dpo[0] - fall, dpo
        assert min(result["dpo_grad_norm"]) > 1e-3, result["dpo_grad_norm"]


def test_probe_on_the_build_writes_probe_json_and_decides(probe_kit, sample_build):
    root, run_id, split = sample_build
    done = probe_kit.probe("--run", run_id, "--model", "tiny", "--out", root, "--steps", "12",
                           "--lr", "3e-3", "--threshold", "0.02", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result == probe_kit.result(Store.open(root), run_id)
    assert result["rows"] == {"sft": split["sft_train"], "sft_holdout": split["sft_holdout"],
                              "dpo": split["dpo_train"], "dpo_holdout": split["dpo_holdout"]}
    margin = result["dpo_margin"]
    assert margin["pairs"] + margin["pairs_unscored"] == split["dpo_train"] + split["dpo_holdout"]
    assert margin["pairs"] > 0
    manifest = Store.open(root).read_manifest(run_id)
    assert manifest.status == "complete" and manifest.accepted is result["accepted"]
    if split["sft_holdout"]:
        held = result["heldout"]
        assert held["rows"] == split["sft_holdout"] and held["tokens"] > 0
        assert held["delta"] == pytest.approx(held["before"] - held["after"])
        assert result["accepted"] is (held["delta"] >= 0.02)
    else:  # a build that held no SFT rows out cannot be judged, and says so
        assert result["accepted"] is None and "no held-out SFT rows" in result["skipped"]["heldout"]
