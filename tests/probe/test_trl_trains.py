"""The proof that TRL trains on swemill's rows: SFTTrainer and DPOTrainer, a few steps each,
on a corpus written by the corpus stage, with a model and tokenizer built from that corpus."""

from __future__ import annotations

import json
from statistics import mean

import pytest

pytestmark = pytest.mark.slow


def test_sft_and_dpo_trainers_consume_the_rows_and_their_loss_falls(tmp_path, probe_kit):
    root = str(tmp_path / "root")
    probe_kit.seed(root, "trl")
    out = tmp_path / "losses.json"
    done = probe_kit.python("tests/probe/trl_steps.py", root, "trl", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    losses = json.loads(out.read_text())
    assert (losses["sft_rows"], losses["dpo_rows"]) == (12, 16)
    sft, dpo = losses["sft"], losses["dpo"]
    assert len(sft) == len(dpo) == 12
    # A random model starts near ln(vocab); twelve steps must bring the SFT loss well down.
    assert mean(sft[-3:]) < mean(sft[:3]) - 0.3, sft
    # DPO starts at ln 2 (policy == reference) and falls as the margin opens up.
    assert dpo[0] == pytest.approx(0.6931, abs=1e-3)
    assert dpo[-1] < dpo[0] / 2, dpo
    assert losses["dpo_margins"][-1] > losses["dpo_margins"][0]
    # The trainer saw tools and calls with object-valued arguments, not JSON strings.
    sample = losses["sample"]
    assert '<tools>\n{"type": "function", "function": {"name": "bash"' in sample
    assert '<tool_call>{"name": "read", "arguments": {"path": "inventory/count.py"}}' in sample
