"""LoRA SFT on the run's ``sft`` split with TRL's SFTTrainer and PEFT."""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
import warnings
from typing import Any

from swemill.probe.model import Placement
from swemill.probe.probe_config import ProbeConfig, Training
from swemill.sandbox.leftovers import scratch_prefix

__all__ = ["lora_sft", "quiet"]


def quiet() -> None:
    """Keep library progress bars and advice out of the probe's own output."""
    import datasets
    import transformers

    datasets.disable_progress_bars()
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")


def lora_sft(model: Any, tokenizer: Any, train: Any, config: ProbeConfig,
             placement: Placement) -> tuple[Any, Training]:
    """Train LoRA adapters on ``train`` (``messages`` + ``tools``); returns the adapted model."""
    from peft import LoraConfig
    from transformers import PrinterCallback
    from trl import SFTConfig, SFTTrainer

    lora = LoraConfig(r=config.lora_r, lora_alpha=2 * config.lora_r, lora_dropout=0.0,
                      target_modules="all-linear", task_type="CAUSAL_LM")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("probe")) as out:
        args = SFTConfig(
            output_dir=out, max_steps=config.steps, learning_rate=config.learning_rate,
            per_device_train_batch_size=config.batch_size, max_length=config.max_length,
            logging_steps=1, report_to=[], save_strategy="no", disable_tqdm=True,
            seed=config.seed, data_seed=config.seed, use_cpu=placement.device == "cpu",
            bf16=placement.dtype == "bfloat16", dataloader_num_workers=0,
            # Recomputing activations saves GPU memory; on a CPU it only costs time.
            gradient_checkpointing=placement.device == "cuda",
        )
        trainer = SFTTrainer(model=model, args=args, processing_class=tokenizer,
                             train_dataset=train.select_columns(["messages", "tools"]),
                             peft_config=lora)
        trainer.remove_callback(PrinterCallback)  # the losses are kept in probe.json
        with contextlib.redirect_stdout(sys.stderr):  # the trainer prints its log lines
            trainer.train()
    losses = [float(h["loss"]) for h in trainer.state.log_history if "loss" in h]
    trained = trainer.model
    trained.eval()
    return trained, Training(steps=trainer.state.global_step, rows=train.num_rows,
                             first_loss=losses[0], last_loss=losses[-1], losses=losses,
                             seconds=round(time.monotonic() - started, 3))
