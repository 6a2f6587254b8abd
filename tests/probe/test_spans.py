"""Which tokens the probe scores: assistant turns, found from the chat template alone.

Runs in the main environment (tokenizers and transformers, no torch)."""

from __future__ import annotations

import pytest

from swemill.probe import ProbeConfig, decide
from swemill.probe.probe_config import HeldOut
from swemill.probe.score import assistant_spans
from swemill.probe.tiny import CHAT_TEMPLATE

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

MESSAGES = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "fix it"},
    {"role": "assistant", "content": "reading",
     "tool_calls": [{"type": "function", "function": {"name": "read",
                                                       "arguments": {"path": "a.py"}}}]},
    {"role": "tool", "name": "read", "tool_call_id": "r1", "content": "x = 1"},
    {"role": "assistant", "content": "done"},
]
TOOLS = [{"type": "function", "function": {"name": "read", "parameters": {}}}]


def _tokenizer(template: str):
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(unk_token="[UNK]"))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")
    fast.chat_template = template
    return fast


def test_spans_cover_exactly_the_assistant_turns():
    text, spans = assistant_spans(_tokenizer(CHAT_TEMPLATE), MESSAGES, TOOLS)
    assert spans is not None and len(spans) == 2
    first, second = (text[a:b] for a, b in spans)
    assert first.startswith("<|start|>assistant\nreading\n<tool_call>{\"name\": \"read\"")
    assert second == "<|start|>assistant\ndone\n<|end|>\n"
    outside = text[:spans[0][0]] + text[spans[0][1]:spans[1][0]]
    assert "fix it" in outside and "x = 1" in outside and "reading" not in outside


def test_spans_start_at_the_completion_of_a_pair():
    _, spans = assistant_spans(_tokenizer(CHAT_TEMPLATE), MESSAGES, TOOLS, start=3)
    assert spans is not None and len(spans) == 1


def test_a_template_that_is_not_prefix_stable_gives_no_spans():
    # Shows the last message differently from the others (as templates that drop old
    # reasoning do): the probe must notice and score the whole row instead.
    template = ("{% for m in messages %}{% if loop.last %}[LAST]{% endif %}"
                "{{ m.role }}: {{ m.content }}\n{% endfor %}")
    _, spans = assistant_spans(_tokenizer(template), MESSAGES, None)
    assert spans is None


def test_decide_follows_the_threshold_and_is_undecided_without_a_measurement():
    held = HeldOut(before=3.0, after=2.5, delta=0.5, tokens=10, rows=1, all_token_before=3.0,
                   all_token_after=2.5)
    assert decide(held, 0.5)[0] is True and decide(held, 0.51)[0] is False
    assert decide(held, -1)[0] is True
    assert decide(None, 0.0) == (None, "undecided: held-out loss was not measured")


def test_config_rejects_nonsense():
    with pytest.raises(ValueError):
        ProbeConfig(model="tiny", steps=0)
    with pytest.raises(ValueError):
        ProbeConfig(model="tiny", device="tpu")  # type: ignore[arg-type]
