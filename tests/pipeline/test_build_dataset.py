"""``swemill build`` with no source on a fresh root, as the README runs it: the dataset loads
with ``datasets``, renders through a chat template with tools, and the run is fully described."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swemill.pipeline import STAGES, BuildConfig
from swemill.store import Store

pytestmark = pytest.mark.slow

datasets = pytest.importorskip("datasets")
transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

# A tool-calling template of the usual shape: tool schemas up front, calls as JSON objects,
# results tied to their call id.
TEMPLATE = """
{%- if tools %}<|system|>tools:
{%- for tool in tools %} {{ tool.function.name }}={{ tool | tojson }}{% endfor %}<|end|>
{%- endif %}
{%- for m in messages %}<|{{ m.role }}|>
{%- if m.role == 'tool' %}[{{ m.tool_call_id }}]{% endif %}
{%- if m.content %}{{ m.content }}{% endif %}
{%- for c in m.tool_calls or [] %}<call>{{ {'name': c.function.name,
   'arguments': c.function.arguments} | tojson }}</call>{% endfor %}<|end|>
{%- endfor %}
{%- if add_generation_prompt %}<|assistant|>{% endif %}"""


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(["<|system|> <|user|> <|assistant|> <|tool|> <call> read edit"],
                            trainers.WordLevelTrainer(special_tokens=["[UNK]", "<|end|>"]))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]",
                                                eos_token="<|end|>")
    fast.chat_template = TEMPLATE
    return fast


def _manifest(built) -> dict:
    path = built.root / "manifests" / f"run_id={built.run_id}.json"
    return json.loads(path.read_text())


def test_the_run_is_complete_and_described(sample_build) -> None:
    m = _manifest(sample_build)
    assert m["status"] == "complete" and m["finished_at"] and m["command"] == "build"
    assert m["source"] == "sample" and m["parent_run_id"] is None
    states = m["metadata"]["build"]["stages"]
    assert states == {s.name: "complete" for s in STAGES}
    assert set(m["timings_s"]) >= {s.name for s in STAGES}
    config = BuildConfig.from_manifest(m["config"])
    assert config.tasks.max_tasks == 3 and config.policies == ("oracle", "noisy-oracle:1.0")
    assert m["config_hash"] == config.hash()
    assert sorted(m["policies"]) == ["noisy-oracle:1.0", "oracle"]
    assert m["license_tiers"] and set(m["license_tiers"]) <= {"redistributable"}
    assert m["counts"]["gate"]["out"] == 1 and m["counts"]["env"]["tests"] > 60
    assert m["counts"]["tasks"]["out"] == 3
    drops = sample_build.out["drop_summary"]  # read back from candidates/
    assert drops["candidates"] == m["counts"]["tasks"]["in"]
    assert drops["dropped"] == sum(v for k, v in m["counts"]["tasks"].items()
                                   if k.startswith("dropped_"))
    assert m["counts"]["corpus.sft"]["out"] > 0 and m["counts"]["corpus.dpo"]["out"] > 0
    assert m["cost_usd"] == 0.0  # scripted policies: no calls, no key


def test_parquet_card_and_report_are_where_the_output_says(sample_build) -> None:
    where = sample_build.out["locations"]
    store = Store.open(str(sample_build.root))
    for stage in ("corpus/sft", "corpus/dpo"):
        assert store.part_urls(stage, sample_build.run_id)
    assert where["sft"] == store.url_for(f"corpus/sft/run_id={sample_build.run_id}")
    card = (sample_build.root / where["card"].split(str(sample_build.root) + "/", 1)[1])
    text = card.read_text()
    assert text.startswith("---\n") and "configs:" in text and "sft" in text and "dpo" in text
    # The sample is MIT: the tasks carry only the tier, the card finds the id in gate/.
    assert "\nlicense: mit\n" in text and "licensed MIT" in text
    report = sample_build.root / f"reports/run_id={sample_build.run_id}/index.html"
    html = report.read_text()
    assert sample_build.run_id in html and "complete" in html and "<svg" in html


def _load(built, table: str):
    base = built.out["locations"]
    files = {"train": f"{base[table]}/*.parquet"}
    if built.out["rows"][f"{table}_holdout"]:
        files["test"] = f"{base['holdout']}/part-{table}-*.parquet"
    return datasets.load_dataset("parquet", data_files=files)


def test_datasets_loads_both_tables_with_the_counted_rows(sample_build) -> None:
    rows = sample_build.out["rows"]
    for table in ("sft", "dpo"):
        ds = _load(sample_build, table)
        assert ds["train"].num_rows == rows[f"{table}_train"] > 0
        if "test" in ds:
            assert ds["test"].num_rows == rows[f"{table}_holdout"]
    sft = _load(sample_build, "sft")["train"]
    assert {"messages", "tools", "task_id", "repo", "strategy", "grade", "source",
            "license_tier", "synthetic"} <= set(sft.column_names)
    assert all(sft["synthetic"])  # scripted policies: marked synthetic on every row
    dpo = _load(sample_build, "dpo")["train"]
    assert {"prompt", "chosen", "rejected", "tools", "preference_source"} <= set(dpo.column_names)


def test_every_row_renders_through_a_chat_template_with_tools(sample_build, tokenizer) -> None:
    rendered = 0
    for split in _load(sample_build, "sft").values():
        for row in split:
            text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"],
                                                 tokenize=False)
            assert text.count("<call>") == sum(len(m["tool_calls"] or [])
                                               for m in row["messages"]) > 0
            assert '"name": "submit"' in text or '"name":"submit"' in text
            rendered += 1
    for split in _load(sample_build, "dpo").values():
        for row in split:
            for side in ("chosen", "rejected"):
                ids = tokenizer.apply_chat_template(row["prompt"] + row[side], tools=row["tools"],
                                                    tokenize=True, return_dict=False)
                assert len(ids) > 10
            prompt = tokenizer.apply_chat_template(row["prompt"], tools=row["tools"],
                                                   tokenize=False, add_generation_prompt=True)
            assert prompt.endswith("<|assistant|>")
            rendered += 1
    out = sample_build.out["rows"]
    assert rendered == sum(out.values())


def test_no_duplicate_rows(sample_build) -> None:
    sft = _load(sample_build, "sft")
    ids = [i for split in sft.values() for i in split["trajectory_id"]]
    assert len(ids) == len(set(ids))
    dpo = _load(sample_build, "dpo")
    pairs = [i for split in dpo.values() for i in split["pair_id"]]
    assert len(pairs) == len(set(pairs))


def test_resume_of_a_complete_run_does_nothing_and_says_where_things_are(sample_build, cli
                                                                        ) -> None:
    before = {p: p.stat().st_mtime_ns for p in sample_build.root.rglob("*") if p.is_file()}
    proc = cli.run("build", "--out", str(sample_build.root), "--resume", "--run-id",
                   sample_build.run_id, cache=sample_build.cache)
    assert proc.returncode == 0, proc.stderr
    for key in ("sft", "dpo", "card", "report"):
        assert sample_build.out["locations"][key] in proc.stdout.replace("\n", "")
    assert "datasets.load_dataset" in proc.stdout
    after = {p: p.stat().st_mtime_ns for p in sample_build.root.rglob("*") if p.is_file()}
    assert after == before


def test_no_argument_build_on_a_fresh_root(tmp_path, build_cache, cli) -> None:
    """The README's command exactly: no source, no settings (the other tests use a smaller,
    fixed-outcome configuration to share one build)."""
    out = cli.build_json("--out", str(tmp_path / "swemill-out"), cache=build_cache)
    assert out["status"] == "complete" and out["skipped_stages"] == []
    assert out["rows"]["sft_train"] > 0 and out["rows"]["dpo_train"] > 0
    m = json.loads((tmp_path / "swemill-out" / "manifests" / f"run_id={out['run_id']}.json")
                   .read_text())
    assert m["config"] == BuildConfig().resolved() and m["source"] == "sample"
    for table in ("sft", "dpo"):
        ds = datasets.load_dataset("parquet", data_files=f"{out['locations'][table]}/*.parquet")
        assert ds["train"].num_rows == out["rows"][f"{table}_train"]
    for key in ("card", "report"):
        assert Path(out["locations"][key].removeprefix("file://")).is_file()


def test_no_absolute_local_path_in_rows_cards_or_report(sample_build) -> None:
    """What a user would publish (corpus rows, tasks, both copies of the card, the report)
    names no path of the machine that built it: not the store, the cache, the home folder."""
    import os

    import pyarrow.parquet as pq

    root = sample_build.root
    local = [str(root), str(sample_build.cache), os.path.expanduser("~") + "/", "/tmp/"]
    published = [*root.glob("corpus/**/*.parquet"), *root.glob("tasks/**/*.parquet"),
                 root / "README.md", *root.glob("reports/**/*")]
    assert root / "README.md" in published and (root / "README.md").exists()
    found = []
    for path in published:
        if not path.is_file():
            continue
        text = json.dumps(pq.read_table(path).to_pylist(), default=str) \
            if path.suffix == ".parquet" else path.read_text(errors="replace")
        found += [f"{path.relative_to(root)}: {p}" for p in local if p in text]
    assert found == []
