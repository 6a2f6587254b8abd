"""Loading the probe's model and tokenizer, on the device the machine offers."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swemill.core.errors import ConfigError

__all__ = ["Placement", "place", "load_model", "looks_like_path", "check_model_spec"]


@dataclass(frozen=True, slots=True)
class Placement:
    device: str
    dtype: str
    """``bfloat16`` on a GPU that supports it, else ``float32``."""


def place(requested: str) -> Placement:
    """``auto`` picks CUDA when a GPU is visible; bf16 where the GPU supports it."""
    import torch

    if requested == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda was asked for, but torch sees no CUDA device")
    if requested in ("cuda", "auto") and torch.cuda.is_available():
        return Placement("cuda", "bfloat16" if torch.cuda.is_bf16_supported() else "float32")
    return Placement("cpu", "float32")


def looks_like_path(spec: str) -> bool:
    """A spec meant as a local directory (a Hub id is ``owner/name``, nothing more)."""
    return (spec.startswith(("/", "./", "../", "~")) or spec.count("/") > 1
            or os.sep in spec and Path(spec).expanduser().exists())


def check_model_spec(spec: str) -> None:
    """Fail early, before any heavy import, on a model directory that is not there."""
    if not spec.strip():
        raise ConfigError("--model is empty: give a model directory, a Hub id or 'tiny'")
    if looks_like_path(spec) and not Path(spec).expanduser().is_dir():
        raise ConfigError(f"model path {spec} does not exist (or is not a directory)")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def load_model(spec: str, placement: Placement) -> tuple[Any, Any]:
    """Model and fast tokenizer from a directory or Hub id; one clear error when unusable."""
    import torch
    import transformers

    check_model_spec(spec)
    where = str(Path(spec).expanduser()) if looks_like_path(spec) else spec
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(where)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            where, dtype=getattr(torch, placement.dtype))
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"cannot load model {spec}: {_first_line(exc)}") from exc
    if not getattr(tokenizer, "is_fast", False):
        raise ConfigError(f"model {spec} has no fast tokenizer (token offsets are needed)")
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError(f"the tokenizer of {spec} has no chat template; the probe renders "
                          "rows through it (use an instruct/chat model)")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(torch.device(placement.device))
    return model, tokenizer
