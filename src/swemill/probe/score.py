"""Token log-probabilities of the assistant turns of chat rows, under any chat template.

Which tokens belong to an assistant turn is found from the template itself: rendering the
first ``k`` messages must give a prefix of the whole rendering, so the characters added by
message ``k`` are ``render(messages[:k+1])[len(render(messages[:k])):]``. A template that
is not prefix-stable for a row (some drop old reasoning) gets every token of that row scored,
and the row is counted. Tokens map to characters through the fast tokenizer's offsets.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Scored", "assistant_spans", "score_rows", "score_pairs", "PairScores"]


@dataclass(slots=True)
class Scored:
    """Summed negative log-likelihood and token counts over a set of rows."""

    nll: float = 0.0
    tokens: int = 0
    all_nll: float = 0.0
    all_tokens: int = 0
    rows: int = 0
    rows_scored_whole: int = 0
    rows_truncated: int = 0

    @property
    def per_token(self) -> float:
        return self.nll / self.tokens if self.tokens else math.nan

    @property
    def all_per_token(self) -> float:
        return self.all_nll / self.all_tokens if self.all_tokens else math.nan


def _render(tokenizer: Any, messages: Sequence[dict[str, Any]], tools: Any) -> str:
    if not messages:
        return ""
    text = tokenizer.apply_chat_template(list(messages), tools=tools or None, tokenize=False)
    return str(text)


def assistant_spans(
    tokenizer: Any, messages: Sequence[dict[str, Any]], tools: Any, start: int = 0
) -> tuple[str, list[tuple[int, int]] | None]:
    """The rendered text and the character spans of assistant messages at index >= ``start``.

    The spans are None when the template is not prefix-stable for this conversation.
    """
    full = _render(tokenizer, messages, tools)
    spans: list[tuple[int, int]] = []
    for k, message in enumerate(messages):
        if k < start or message.get("role") != "assistant":
            continue
        before, through = _render(tokenizer, messages[:k], tools), \
            _render(tokenizer, messages[: k + 1], tools)
        if not (through.startswith(before) and full.startswith(through)):
            return full, None
        spans.append((len(before), len(through)))
    return full, spans


def _token_logprobs(model: Any, tokenizer: Any, text: str, spans: list[tuple[int, int]] | None,
                    max_length: int, lower: int, keep_end: bool = False) -> tuple[Any, Any, bool]:
    """Log-probabilities of tokens 1..n under ``model`` and which of them are scored.

    A row longer than ``max_length`` tokens keeps its start (as SFT training does), or its end
    with ``keep_end`` (a pair's completions sit at the end; the prompt is what gets cut).
    """
    import torch

    enc = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    truncated = len(ids) > max_length
    cut = slice(-max_length, None) if keep_end else slice(0, max_length)
    ids, offsets = ids[cut], offsets[cut]
    if spans is None:  # not prefix-stable: every token after ``lower`` characters
        mask = [s >= lower for s, _ in offsets]
    else:
        mask = [any(a <= s < b for a, b in spans) for s, _ in offsets]
    device = next(model.parameters()).device
    with torch.inference_mode():
        input_ids = torch.tensor([ids], device=device)
        logits = model(input_ids=input_ids).logits[0, :-1].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        picked = logprobs.gather(1, input_ids[0, 1:, None])[:, 0]
    return picked.cpu(), torch.tensor(mask[1:], dtype=torch.bool), truncated


def score_rows(model: Any, tokenizer: Any, rows: Iterable[dict[str, Any]],
               max_length: int) -> Scored:
    """NLL of the assistant tokens (and of all tokens) of SFT rows (``messages``, ``tools``)."""
    out = Scored()
    for row in rows:
        text, spans = assistant_spans(tokenizer, row["messages"], row.get("tools"))
        picked, mask, truncated = _token_logprobs(model, tokenizer, text, spans, max_length, 0)
        out.nll -= float(picked[mask].sum())
        out.tokens += int(mask.sum())
        out.all_nll -= float(picked.sum())
        out.all_tokens += int(picked.numel())
        out.rows += 1
        out.rows_scored_whole += spans is None
        out.rows_truncated += truncated
    return out


@dataclass(slots=True)
class PairScores:
    margins: list[float]
    rows_truncated: int = 0
    unscored: int = 0
    """Pairs left out: a side had no assistant token within ``max_length`` tokens."""

    @property
    def mean(self) -> float:
        return sum(self.margins) / len(self.margins) if self.margins else math.nan

    @property
    def accuracy(self) -> float:
        return sum(m > 0 for m in self.margins) / len(self.margins) if self.margins else math.nan


def _completion_logprob(model: Any, tokenizer: Any, row: dict[str, Any], side: str,
                        max_length: int) -> tuple[float, int, bool]:
    prompt = list(row["prompt"])
    messages = prompt + list(row[side])
    text, spans = assistant_spans(tokenizer, messages, row.get("tools"), start=len(prompt))
    lower = len(_render(tokenizer, prompt, row.get("tools")))
    picked, mask, truncated = _token_logprobs(model, tokenizer, text, spans, max_length, lower,
                                              keep_end=True)
    return float(picked[mask].sum()), int(mask.sum()), truncated


def score_pairs(model: Any, tokenizer: Any, rows: Iterable[dict[str, Any]],
                max_length: int) -> PairScores:
    """Per pair: log p(chosen | prompt) - log p(rejected | prompt), assistant tokens only."""
    out = PairScores(margins=[])
    for row in rows:
        chosen, n_c, cut_c = _completion_logprob(model, tokenizer, row, "chosen", max_length)
        rejected, n_r, cut_r = _completion_logprob(model, tokenizer, row, "rejected", max_length)
        out.rows_truncated += cut_c or cut_r
        if n_c and n_r:
            out.margins.append(chosen - rejected)
        else:
            out.unscored += 1
    return out
