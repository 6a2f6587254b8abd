"""The probe's settings and its result, as written to ``reports/run_id=<id>/probe.json``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ProbeConfig", "HeldOut", "Margin", "Training", "ProbeResult", "TINY_MODEL"]

TINY_MODEL = "tiny"
"""``--model tiny``: a random-init model whose tokenizer is trained on the run's own rows."""


class ProbeConfig(BaseModel):
    """How the probe trains and measures. Every field is recorded in ``probe.json``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    """A local model directory, a Hugging Face Hub id, or ``tiny`` (see :data:`TINY_MODEL`)."""
    steps: int = Field(30, ge=1)
    """LoRA SFT optimizer steps on the run's ``sft`` split."""
    lora_r: int = Field(8, ge=1)
    """LoRA rank; alpha is twice the rank."""
    learning_rate: float = Field(2e-4, gt=0)
    batch_size: int = Field(1, ge=1)
    """Rows per optimizer step."""
    max_length: int = Field(4096, ge=16)
    """Tokens kept per row: SFT rows keep their start (training and held-out), pairs their
    end (the completions)."""
    max_eval_rows: int = Field(64, ge=1)
    """At most this many held-out rows and DPO pairs are measured (the first ones)."""
    threshold: float = 0.01
    """Accepted when the held-out NLL falls by at least this much (nats per token)."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """``auto``: CUDA (bf16 where supported) when a GPU is visible, else CPU (float32)."""
    seed: int = 0


class HeldOut(BaseModel):
    """Negative log-likelihood per token of the assistant turns of the held-out SFT rows."""

    before: float
    after: float
    delta: float
    """``before - after``: positive when training on the run lowered held-out loss."""
    tokens: int
    rows: int
    all_token_before: float
    """The same over every token of the rendered conversation (tool results included)."""
    all_token_after: float
    rows_scored_whole: int = 0
    """Rows whose chat template is not prefix-stable: every token is scored for them."""
    rows_truncated: int = 0


class Margin(BaseModel):
    """Chosen-minus-rejected log-probability of the completions' assistant tokens, per pair."""

    before: float
    after: float
    delta: float
    accuracy_before: float
    """Share of pairs whose chosen completion is the more likely one."""
    accuracy_after: float
    pairs: int
    rows_truncated: int = 0
    """Pairs longer than ``max_length`` tokens: their prompts' starts were cut."""
    pairs_unscored: int = 0
    """Pairs left out: a completion had no assistant token within ``max_length`` tokens."""


class Training(BaseModel):
    steps: int
    rows: int
    first_loss: float
    last_loss: float
    losses: list[float]
    seconds: float


class ProbeResult(BaseModel):
    """What ``swemill probe`` found; ``accepted`` is None when held-out loss was not measured."""

    run_id: str
    model: str
    device: str
    dtype: str
    config: dict[str, Any]
    rows: dict[str, int]
    heldout: HeldOut | None = None
    dpo_margin: Margin | None = None
    training: Training | None = None
    threshold: float
    accepted: bool | None
    reason: str
    skipped: dict[str, str] = Field(default_factory=dict)
    """What was not measured, and why."""
    seconds: float = 0.0
