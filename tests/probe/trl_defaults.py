"""Run in .venv-probe: the dataset card's own TRL example, as a user would copy it.

TRL's trainers with their default arguments, except the ``max_length`` the card states (and
what a CPU test needs: a step count, logging, no checkpoints). Also checks, with the tokenizer
the model uses, that every DPO row's two sides still differ within that ``max_length``.
Writes per-step losses and gradient norms as JSON, one object per corpus (one process for
several corpora: the imports are most of its cost).

    python trl_defaults.py OUT_JSON STORE_ROOT RUN_ID [STORE_ROOT RUN_ID ...]
"""

from __future__ import annotations

import json
import re
import sys
import tempfile

import datasets
import transformers
from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

from swemill.probe.data import load_splits
from swemill.probe.tiny import build_tiny_model, row_texts
from swemill.store import Store

STEPS = 3


def _card_lengths(root: str, run_id: str) -> dict[str, int]:
    card = Store.open(root).read_text(f"reports/run_id={run_id}/README.md")
    found = dict(re.findall(r"(SFT|DPO)Config\(output_dir=\"\w+\", max_length=(\d+)\)", card))
    return {k.lower(): int(v) for k, v in found.items()}


def _ids(tokenizer, messages, tools) -> list[int]:
    out = tokenizer.apply_chat_template(messages, tools=tools, tokenize=True)
    return list(out["input_ids"] if hasattr(out, "keys") else out)


def _history(trainer) -> list[dict[str, float]]:
    trainer.train()
    return [h for h in trainer.state.log_history if "loss" in h]


def main(out: str, *corpora: str) -> None:
    datasets.disable_progress_bars()
    transformers.logging.set_verbosity_error()
    results = [one(root, run_id) for root, run_id in zip(corpora[::2], corpora[1::2],
                                                         strict=True)]
    with open(out, "w") as fh:
        json.dump(results, fh)


def one(root: str, run_id: str) -> dict:
    transformers.set_seed(0)
    lengths = _card_lengths(root, run_id)
    splits = load_splits(Store.open(root), run_id)
    sft, dpo = splits.sft, splits.dpo
    # bf16 (TRL's default) is emulated on a CPU and several times slower; it changes
    # precision, not what the rows train.
    cpu = dict(max_steps=STEPS, logging_steps=1, report_to=[], save_strategy="no",
               disable_tqdm=True, use_cpu=True, bf16=False)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_tiny_model(row_texts([*sft, *dpo]), f"{tmp}/model")
        tok = transformers.AutoTokenizer.from_pretrained(model_dir)
        within = []
        for r in dpo:
            a = _ids(tok, r["prompt"] + r["chosen"], r["tools"])
            b = _ids(tok, r["prompt"] + r["rejected"], r["tools"])
            first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                         min(len(a), len(b)))
            within.append(first < lengths["dpo"])
        load = transformers.AutoModelForCausalLM.from_pretrained
        sft_hist = _history(SFTTrainer(  # a replay corpus may hold DPO rows only
            model=load(model_dir), processing_class=tok, train_dataset=sft,
            args=SFTConfig(output_dir=f"{tmp}/sft", max_length=lengths["sft"], **cpu))
        ) if sft.num_rows else []
        dpo_hist = _history(DPOTrainer(
            model=load(model_dir), processing_class=tok, train_dataset=dpo,
            args=DPOConfig(output_dir=f"{tmp}/dpo", max_length=lengths["dpo"], **cpu)))
    return {"lengths": lengths, "dpo_rows": dpo.num_rows, "sft_rows": sft.num_rows,
            "differ_within": within, "sft": [h["loss"] for h in sft_hist],
            "dpo": [h["loss"] for h in dpo_hist],
            "dpo_grad_norm": [h.get("grad_norm", 0.0) for h in dpo_hist]}


if __name__ == "__main__":
    main(*sys.argv[1:])
