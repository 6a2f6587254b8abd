"""The corpus as a trainer meets it: Parquet written by the store, loaded by ``datasets``,
rendered through a chat template with tools by a tokenizer built here (no download)."""

from __future__ import annotations

import json

import pytest

from swemill.corpus.assemble import CorpusConfig, assemble
from swemill.corpus.split import SplitConfig
from swemill.corpus.write import write_corpus
from swemill.store import Store

datasets = pytest.importorskip("datasets")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

# A template in the style of common tool-calling templates: the tools list up front, each
# assistant tool call as a JSON object, tool results tied to their call.
CHAT_TEMPLATE = """
{%- if tools %}<|system|>
You may call these tools:
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
<|end|>
{%- endif %}
{%- for message in messages %}
<|{{ message.role }}|>
{%- if message.role == 'tool' %} [{{ message.name }} {{ message.tool_call_id }}]{% endif %}
{%- if message.content %}
{{ message.content }}
{%- endif %}
{%- if message.tool_calls %}
{%- for call in message.tool_calls %}
<tool_call>{"name": "{{ call.function.name }}", "arguments":
{{- ' ' ~ (call.function.arguments | tojson) }}}</tool_call>
{%- endfor %}
{%- endif %}
<|end|>
{%- endfor %}
{%- if add_generation_prompt %}
<|assistant|>
{%- endif %}
"""


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=["[UNK]", "<|end|>", "<|assistant|>"])
    tok.train_from_iterator(["<|system|> <|user|> <|assistant|> <|tool|> <tool_call> read edit"
                             " submit bash run_tests the restock count fails"], trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]",
                                                eos_token="<|end|>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


@pytest.fixture
def written(tmp_path, corpus):
    tables = assemble(corpus.trajectories, corpus.pairs, tasks=corpus.tasks,
                      goldens=corpus.goldens,
                      config=CorpusConfig(split=SplitConfig(holdout_fraction=0.25, seed=3,
                                                        near_dup_threshold=None)))
    store = Store.open(str(tmp_path / "root"))
    write_corpus(store, "run-trl", tables)
    return store, tables


def _files(store: Store, stage: str, pattern: str = "*.parquet") -> str:
    return f"{store.url_for(f'corpus/{stage}/run_id=run-trl')}/{pattern}"


def _load(store: Store, name: str):
    holdout = _files(store, "holdout", f"part-{name}-*.parquet")
    files = {"train": _files(store, name), "test": holdout}
    return datasets.load_dataset("parquet", data_files=files)


def test_datasets_loads_sft_and_dpo_with_json_decoded(written):
    store, tables = written
    sft, dpo = _load(store, "sft"), _load(store, "dpo")
    assert (sft["train"].num_rows, sft["test"].num_rows) == (len(tables.sft),
                                                             len(tables.sft_holdout))
    assert (dpo["train"].num_rows, dpo["test"].num_rows) == (len(tables.dpo),
                                                             len(tables.dpo_holdout))
    assert min(sft["train"].num_rows, sft["test"].num_rows, dpo["test"].num_rows) > 0
    row = sft["train"][0]
    assert isinstance(row["tools"], list) and row["tools"][0]["type"] == "function"
    call = row["messages"][2]["tool_calls"][0]
    assert isinstance(call["function"]["arguments"], dict)  # decoded, not JSON text
    assert row["messages"][0]["tool_calls"] is None  # unused keys are null, not missing
    assert isinstance(dpo["train"][0]["chosen"][0]["tool_calls"][0]["function"]["arguments"],
                      dict)


def test_every_row_renders_through_a_chat_template_with_tools(written, tokenizer):
    store, _ = written
    rendered = 0
    for split in _load(store, "sft").values():
        for row in split:
            text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"],
                                                 tokenize=False)
            assert '"name": "submit"' in text and "<|tool|> [read " in text
            assert '"arguments": {"path": "inventory/mod.py"}' in text  # an object, not a string
            ids = tokenizer.apply_chat_template(row["messages"], tools=row["tools"],
                                                tokenize=True, return_dict=False)
            assert len(ids) > 50
            rendered += 1
    for split in _load(store, "dpo").values():
        for row in split:
            for side in ("chosen", "rejected"):
                text = tokenizer.apply_chat_template(row["prompt"] + row[side],
                                                     tools=row["tools"], tokenize=False)
                assert text.count("<tool_call>") == 4
            prompt = tokenizer.apply_chat_template(row["prompt"], tools=row["tools"],
                                                   tokenize=False, add_generation_prompt=True)
            assert prompt.endswith("<|assistant|>")
            rendered += 1
    assert rendered == 16


def test_parquet_is_readable_without_datasets(written):
    import pyarrow.parquet as pq

    store, tables = written
    (url,) = store.part_urls("corpus/sft", "run-trl")
    table = pq.read_table(url.removeprefix("file://"))
    first = table.to_pylist()[0]
    # Plain Arrow readers get the JSON text, exactly what the row held.
    assert json.loads(first["tools"])[0]["function"]["name"] == "bash"
    assert first == tables.sft[0]
