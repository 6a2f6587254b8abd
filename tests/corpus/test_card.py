"""The dataset card: front matter a Hub loader understands, license logic, provenance body."""

from __future__ import annotations

import pytest
import yaml

from swemill.core.records import Drop, RunManifest
from swemill.corpus.assemble import CorpusConfig, assemble
from swemill.corpus.card import card_metadata, dataset_card, features, size_category
from swemill.corpus.split import SplitConfig
from swemill.corpus.write import write_corpus
from swemill.store import Store


def _front(card: str) -> dict:
    assert card.startswith("---\n")
    head, _, _ = card[4:].partition("\n---\n")
    return yaml.safe_load(head)


@pytest.fixture
def tables(corpus):
    return assemble(corpus.trajectories, corpus.pairs, tasks=corpus.tasks, goldens=corpus.goldens,
                    config=CorpusConfig(split=SplitConfig(holdout_fraction=0.25,
                                                          near_dup_threshold=None)))


def test_size_categories():
    assert [size_category(n) for n in (0, 999, 1000, 54_321, 2_000_000)] == [
        "n<1K", "n<1K", "1K<n<10K", "10K<n<100K", "1M<n<10M"]


def test_front_matter_and_body(tables):
    manifest = RunManifest(run_id="r1", source="sample", counts={
        "validate": {"in": 30, "out": 8, "dropped_not_failing": 22}})
    card = dataset_card(manifest, tables, licenses=["MIT"])
    meta = _front(card)
    assert meta["license"] == "mit" and meta["task_categories"] == ["text-generation"]
    assert meta["size_categories"] == ["n<1K"]
    names = [c["config_name"] for c in meta["configs"]]
    assert names == ["sft", "dpo"]
    sft = meta["configs"][0]["data_files"]
    assert sft[0] == {"split": "train", "path": "corpus/sft/run_id=r1/*.parquet"}
    assert sft[1] == {"split": "test", "path": "corpus/holdout/run_id=r1/part-sft-*.parquet"}
    assert "| acme/inventory | 10 |" in card  # 5 trajectories + 5 pairs
    assert "| synthetic | 16 |" in card
    assert "| validate: not_failing | 22 |" in card
    assert "scripted policies" in card and "load_dataset" in card and "DPOTrainer" in card


def test_restricted_tiers_make_the_license_other(corpus, tables):
    tables.sft[0]["license_tier"] = "trainable-only"
    tables.dpo[0]["license_tier"] = "unknown"
    meta = card_metadata(RunManifest(run_id="r2"), tables, licenses=["MIT"])
    assert meta["license"] == "other"
    assert "1 row(s) `trainable-only`" in meta["license_details"]
    assert "1 row(s) `unknown`" in meta["license_details"]


def test_drops_of_this_corpus_are_listed(corpus, tables):
    tables.drops.append(Drop(stage="corpus.sft", reason="unresolved", item_id="x"))
    tables.counts["corpus.sft"]["dropped_unresolved"] += 3
    card = dataset_card(RunManifest(run_id="r3"), tables)
    assert "| corpus.sft: unresolved | 3 |" in card


def test_features_are_the_hub_libraries_own_reading_of_the_schemas():
    datasets = pytest.importorskip("datasets")
    from swemill.corpus.rows import DPO_SCHEMA, SFT_SCHEMA, WM_SCHEMA

    for schema in (SFT_SCHEMA, DPO_SCHEMA, WM_SCHEMA):
        theirs = datasets.Features.from_arrow_schema(schema)._to_yaml_list()
        assert features(schema) == theirs


def test_dataset_info_license_links_and_sources(tables):
    tables.dpo[0]["preference_source"] = "consensus"
    tables.dpo[0]["license_tier"] = "unknown"
    card = dataset_card(RunManifest(run_id="r5"), tables, licenses=["MIT"])
    meta = _front(card)
    info = {i["config_name"]: i for i in meta["dataset_info"]}
    assert set(info) == {c["config_name"] for c in meta["configs"]}
    assert info["dpo"]["splits"] == [
        {"name": "train", "num_examples": len(tables.dpo)},
        {"name": "test", "num_examples": len(tables.dpo_holdout)}][:1 + bool(tables.dpo_holdout)]
    assert {f["name"] for f in info["dpo"]["features"]} >= {"prompt", "chosen", "rejected"}
    assert meta["license"] == "other" and meta["license_link"].startswith("https://spdx.org/")
    assert "[MIT](https://spdx.org/licenses/MIT.html)" in card
    assert "| `unknown` | 1 |" in card
    # what each kind of pair is, said plainly: consensus is not execution-graded
    assert "1 DPO pairs from replaying ingested sessions" in card
    assert "ranked by teacher consensus" in card and "not graded by running tests" in card
    n_exec = sum(r["preference_source"] == "execution" for r in tables.dpo + tables.dpo_holdout)
    assert f"{n_exec} DPO pairs ranked by execution" in card


def test_hub_loader_reads_the_card_configs(tmp_path, tables):
    datasets = pytest.importorskip("datasets")
    store = Store.open(str(tmp_path / "root"))
    write_corpus(store, "r4", tables)
    card = dataset_card(RunManifest(run_id="r4"), tables, licenses=["MIT"])
    (tmp_path / "root" / "README.md").write_text(card)
    for name, train, test in (("sft", tables.sft, tables.sft_holdout),
                              ("dpo", tables.dpo, tables.dpo_holdout)):
        ds = datasets.load_dataset(str(tmp_path / "root"), name)
        assert (ds["train"].num_rows, ds["test"].num_rows) == (len(train), len(test))
