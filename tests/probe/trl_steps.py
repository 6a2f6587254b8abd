"""Run in .venv-probe: a few steps of TRL's SFTTrainer and DPOTrainer on a run's corpus.

The model is built here (random init, a tokenizer trained on the corpus, a chat template with
tools), so nothing is downloaded. Writes the per-step training losses as JSON
(the trainers print their logs on stdout).

    python trl_steps.py STORE_ROOT RUN_ID OUT_JSON [MAX_LENGTH|none]
"""

from __future__ import annotations

import json
import sys
import tempfile

import datasets
import transformers
from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

from swemill.probe.data import load_splits
from swemill.probe.tiny import build_tiny_model, row_texts
from swemill.store import Store

SFT_STEPS, DPO_STEPS = 12, 8


def _losses(trainer) -> list[float]:
    trainer.train()
    return [float(h["loss"]) for h in trainer.state.log_history if "loss" in h]


def main(root: str, run_id: str, out: str, max_length: str = "none") -> None:
    datasets.disable_progress_bars()
    transformers.logging.set_verbosity_error()
    transformers.set_seed(0)
    splits = load_splits(Store.open(root), run_id)
    sft, dpo = splits.sft, splits.dpo
    common = dict(per_device_train_batch_size=1, learning_rate=3e-3,
                  logging_steps=1, report_to=[], save_strategy="no", disable_tqdm=True,
                  use_cpu=True,
                  # No truncation by default: a pair cut inside the prefix its two sides share
                  # has identical sides, a zero margin and a loss stuck at ln 2.
                  max_length=None if max_length == "none" else int(max_length),
                  seed=0, dataloader_num_workers=0)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_tiny_model(row_texts([*sft, *dpo]), f"{tmp}/model")
        tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
        load = transformers.AutoModelForCausalLM.from_pretrained
        # What the trainer sees, to show the rows were rendered with their tools and calls.
        sample = tokenizer.apply_chat_template(sft[0]["messages"], tools=sft[0]["tools"],
                                               tokenize=False)
        sft_trainer = SFTTrainer(
            model=load(model_dir), processing_class=tokenizer,
            args=SFTConfig(output_dir=f"{tmp}/sft", max_steps=SFT_STEPS, **common),
            train_dataset=sft.select_columns(["messages", "tools"]))
        sft_losses = _losses(sft_trainer)
        dpo_trainer = DPOTrainer(
            model=load(model_dir), processing_class=tokenizer,
            args=DPOConfig(output_dir=f"{tmp}/dpo", max_steps=DPO_STEPS, **common),
            train_dataset=dpo.select_columns(["prompt", "chosen", "rejected", "tools"]))
        dpo_losses = _losses(dpo_trainer)
        margins = [float(h["rewards/margins"]) for h in dpo_trainer.state.log_history
                   if "rewards/margins" in h]
    with open(out, "w") as fh:
        json.dump({"sft": sft_losses, "dpo": dpo_losses, "dpo_margins": margins,
                   "sft_rows": sft.num_rows, "dpo_rows": dpo.num_rows, "sample": sample}, fh)


if __name__ == "__main__":
    main(*sys.argv[1:])
