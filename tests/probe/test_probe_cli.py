"""``swemill probe`` as a user runs it: .venv-probe, a real store, the tiny built model."""

from __future__ import annotations

import json

import pytest

from swemill.store import Store

pytestmark = pytest.mark.slow


def _probe(kit, root: str, run_id: str, *extra: str):
    return kit.probe("--run", run_id, "--model", "tiny", "--out", root, "--lr", "3e-3", *extra)


def test_probe_writes_probe_json_and_accepted_follows_the_threshold(tmp_path, probe_kit):
    root = str(tmp_path / "root")
    store = probe_kit.seed(root, "gen1")
    done = _probe(probe_kit, root, "gen1", "--steps", "16", "--threshold", "0.01", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    printed = json.loads(done.stdout)  # stdout holds the JSON only
    written = probe_kit.result(store, "gen1")
    assert printed == written
    held, margin, train = written["heldout"], written["dpo_margin"], written["training"]
    assert held["rows"] == 4 and held["tokens"] > 100
    assert held["delta"] == pytest.approx(held["before"] - held["after"])
    assert held["after"] < held["before"]  # SFT on the train rows lowered held-out loss
    assert margin["pairs"] == 16 and margin["delta"] == pytest.approx(
        margin["after"] - margin["before"])
    assert train["steps"] == 16 and train["last_loss"] < train["first_loss"]
    assert written["skipped"] == {} and written["device"] == "cpu"
    assert written["accepted"] is (held["delta"] >= 0.01) is True
    manifest = store.read_manifest("gen1")
    assert manifest.accepted is True
    assert manifest.metadata["probe"]["key"] == "reports/run_id=gen1/probe.json"
    assert manifest.source == "probe-tests"  # the rest of the manifest is kept

    # A bar the same generation cannot clear: the flag flips, probe.json says why.
    bar = held["delta"] + 5
    again = _probe(probe_kit, root, "gen1", "--steps", "1", "--max-eval-rows", "2",
                   "--threshold", str(bar))
    assert again.returncode == 0, again.stderr[-3000:]
    assert "not accepted" in again.stderr
    second = probe_kit.result(store, "gen1")
    assert second["accepted"] is False and second["threshold"] == bar
    assert "< threshold" in second["reason"]
    assert Store.open(root).read_manifest("gen1").accepted is False
