"""A tiny random-init causal LM whose tokenizer is trained on a run's own rows.

For smoke runs and CI: it proves that rows render, tokenize and train, with no download.
Its numbers say nothing about a real model (a random model learns the corpus's token
statistics in a few steps, so its held-out loss always falls a lot).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["CHAT_TEMPLATE", "SPECIAL_TOKENS", "row_texts", "build_tiny_model"]

SPECIAL_TOKENS = ["<|pad|>", "<|end|>", "<|start|>", "<tool_call>", "</tool_call>",
                  "<tools>", "</tools>"]

# Roles are opened with <|start|>ROLE, closed with <|end|>; the tools list goes first, each
# call is a JSON object inside <tool_call>, a tool result names the call it answers.
NL = "{{ '\\n' }}"  # an explicit newline: chat templates run with trim_blocks
CHAT_TEMPLATE = (
    "{% if tools %}<|start|>system" + NL + "<tools>" + NL
    + "{% for tool in tools %}{{ tool | tojson }}" + NL + "{% endfor %}</tools><|end|>" + NL
    + "{% endif %}{% for message in messages %}<|start|>{{ message.role }}"
    + "{% if message.role == 'tool' %} {{ message.name }} {{ message.tool_call_id }}{% endif %}"
    + NL + "{% if message.reasoning_content %}<think>{{ message.reasoning_content }}</think>"
    + NL + "{% endif %}{% if message.content %}{{ message.content }}" + NL + "{% endif %}"
    + "{% if message.tool_calls %}{% for call in message.tool_calls %}<tool_call>"
    + '{"name": {{ call.function.name | tojson }}, "arguments": '
    + "{{ call.function.arguments | tojson }}}</tool_call>" + NL + "{% endfor %}{% endif %}"
    + "<|end|>" + NL + "{% endfor %}"
    + "{% if add_generation_prompt %}<|start|>assistant" + NL + "{% endif %}"
)


def _message_texts(messages: Iterable[dict[str, Any]]) -> Iterator[str]:
    for message in messages or ():
        for key in ("role", "content", "reasoning_content", "name"):
            if message.get(key):
                yield str(message[key])
        for call in message.get("tool_calls") or ():
            yield json.dumps(call["function"], sort_keys=True)


def row_texts(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    """Every string an SFT or DPO row holds, as the template will show it."""
    for row in rows:
        if row.get("tools"):
            yield json.dumps(row["tools"])
        for column in ("messages", "prompt", "chosen", "rejected"):
            yield from _message_texts(row.get(column) or ())


def build_tiny_model(texts: Iterable[str], out_dir: str | Path, *, vocab_size: int = 1024,
                     hidden_size: int = 64, layers: int = 2, seed: int = 0) -> Path:
    """Train a byte-level BPE on ``texts``, random-init a small Llama, save both to ``out_dir``."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|end|>", pad_token="<|pad|>")
    tokenizer.chat_template = CHAT_TEMPLATE
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=8192, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, bos_token_id=None, tie_word_embeddings=True)
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(config)
    out = Path(out_dir)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
