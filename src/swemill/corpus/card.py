"""The dataset card: ``README.md`` with Hugging Face YAML front matter, and provenance.

The front matter names the license (``other`` with an explanation when any row is not
redistributable), the task category, tags, size category, one config per table whose
``data_files`` point at the store layout (``corpus/sft/run_id=<id>/*.parquet`` ...) and, per
config, ``dataset_info`` with its features (read off the Parquet schema) and split sizes. The
paths are relative to the store root, so the corpus stage writes the card there
(:data:`ROOT_CARD_KEY`, the latest corpus run's) as well as under ``reports/run_id=<id>/``.
Only splits that have rows are named.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import yaml

from swemill.core.records import RunManifest
from swemill.corpus.assemble import CorpusTables
from swemill.corpus.rows import DPO_SCHEMA, SFT_SCHEMA, WM_SCHEMA
from swemill.corpus.write import HOLDOUT_DPO_PREFIX, HOLDOUT_SFT_PREFIX
from swemill.store.layout import report_key, run_prefix

__all__ = ["ROOT_CARD_KEY", "dataset_card", "write_card", "card_metadata", "features",
           "size_category", "provenance"]

ROOT_CARD_KEY = "README.md"
"""Where the card's ``data_files`` paths resolve: the store root (as uploaded to a hub)."""

_SIZES = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
          (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M")]


def size_category(n: int) -> str:
    for bound, name in _SIZES:
        if n < bound:
            return name
    return "n>10M"


def _rows(tables: CorpusTables) -> list[dict[str, Any]]:
    return tables.sft + tables.sft_holdout + tables.dpo + tables.dpo_holdout


def provenance(tables: CorpusTables) -> dict[str, Counter[str]]:
    """Counts per license tier, strategy, policy, source, repository and synthetic flag."""
    rows = _rows(tables)
    keys = ("license_tier", "strategy", "policy", "source", "repo")
    out = {k: Counter(str(r.get(k) or "unknown") for r in rows) for k in keys}
    out["synthetic"] = Counter("synthetic" if r["synthetic"] else "not synthetic" for r in rows)
    return out


def _feature(name: str | None, t: pa.DataType) -> dict[str, Any]:
    head: dict[str, Any] = {} if name is None else {"name": name}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = t.value_type
        if pa.types.is_struct(inner):
            return {**head, "list": [_feature(f.name, f.type) for f in inner]}
        return {**head, "list": _feature(None, inner)}
    if pa.types.is_struct(t):
        return {**head, "struct": [_feature(f.name, f.type) for f in t]}
    if isinstance(t, pa.JsonType):
        return {**head, "dtype": "json"}
    dtype = {"bool": "bool", "double": "float64", "float": "float32"}.get(str(t), str(t))
    return {**head, "dtype": dtype}


def features(schema: pa.Schema) -> list[dict[str, Any]]:
    """A Parquet schema as the card's ``dataset_info.features`` (Hugging Face's YAML form:
    ``dtype`` for scalars, ``list`` of sub-features for lists of structs, ``struct``)."""
    return [_feature(f.name, f.type) for f in schema]


_SPDX = "https://spdx.org/licenses/{}.html"
_TIER_MEANING = {
    "redistributable": "the source's license allows republishing the text (see the link)",
    "trainable-only": "the source may be used for training, but its text may not be "
                      "republished: keep these rows private",
    "unknown": "no license could be established for the source (sessions you ingested "
               "are yours to judge): do not share these rows before you have",
}


def _license(tiers: Counter[str], spdx: Iterable[str]) -> tuple[str, str]:
    """(front-matter license, sentence for the body)."""
    restricted = {t: n for t, n in tiers.items() if t != "redistributable"}
    ids = sorted({s for s in spdx if s})
    if not restricted and len(ids) == 1:
        return ids[0].lower(), f"All rows come from sources licensed {ids[0]}."
    if not restricted:
        return "other", ("All rows come from redistributable sources, under several licenses ("
                         + ", ".join(ids or ["not recorded"]) + "); each row's source is named.")
    parts = ", ".join(f"{n} row(s) `{t}`" for t, n in sorted(restricted.items()))
    return "other", (f"Not every row may be redistributed: {parts}. `trainable-only` sources "
                     "allow training but not republishing their text; `unknown` means no "
                     "license could be established. Filter on the `license_tier` column "
                     "before sharing this dataset.")


def _license_table(tiers: Counter[str], spdx: Iterable[str]) -> list[str]:
    ids = sorted({s for s in spdx if s})
    links = ", ".join(f"[{i}]({_SPDX.format(i)})" for i in ids) or "none recorded"
    lines = ["| license tier | rows | licenses | what it means |", "|---|---:|---|---|"]
    for tier, n in sorted(tiers.items(), key=lambda kv: (-kv[1], kv[0])):
        names = links if tier == "redistributable" else "—"
        lines.append(f"| `{tier}` | {n} | {names} | {_TIER_MEANING.get(tier, '')} |")
    return lines + [""]


def _sources(tables: CorpusTables) -> list[str]:
    """One line per kind of row, saying what it is and how its label was obtained."""
    sft = Counter(str(r.get("source") or "unknown") for r in tables.sft + tables.sft_holdout)
    dpo = Counter(str(r.get("preference_source") or "unknown")
                  for r in tables.dpo + tables.dpo_holdout)
    what = {
        "execution": "DPO pairs ranked by execution: both sides were graded by running the "
                     "task's tests; the chosen side scored higher",
        "error_signal": "DPO pairs ranked by an error signal: the rejected side's tool call "
                        "failed where the chosen side's did not (no test run decided it)",
        "consensus": "DPO pairs from replaying ingested sessions across teacher models, ranked "
                     "by teacher consensus (the continuation most teachers agreed on is "
                     "chosen); not graded by running tests",
        "judge": "DPO pairs ranked by a judge model; not graded by running tests",
    }
    kinds = {
        "rollout": "agent runs on validated tasks, graded by running the task's tests "
                   "(execution-graded)",
        "replay": "teacher models' continuations of ingested sessions (not graded by tests)",
    }
    out = [f"- {n} SFT row(s) from `{src}` trajectories: "
           + kinds.get(src, "imported agent sessions, as their tool wrote them (not graded "
                            "by tests)") for src, n in sorted(sft.items())]
    out += [f"- {n} {what.get(src, f'DPO pairs with preference source `{src}`')}"
            for src, n in sorted(dpo.items())]
    return out + [""]


def _config(name: str, run_id: str, stage: str, holdout: str, n_train: int, n_test: int,
            ) -> dict[str, Any] | None:
    files = []
    if n_train:
        files.append({"split": "train", "path": f"{run_prefix(stage, run_id)}/*.parquet"})
    if n_test:
        path = f"{run_prefix('corpus/holdout', run_id)}/part-{holdout}*.parquet"
        files.append({"split": "test", "path": path})
    return {"config_name": name, "data_files": files} if files else None


def card_metadata(manifest: RunManifest, tables: CorpusTables,
                  licenses: Iterable[str] = ()) -> dict[str, Any]:
    tiers = provenance(tables)["license_tier"]
    license_id, _ = _license(tiers, licenses)
    rid = manifest.run_id
    configs = [c for c in (
        _config("sft", rid, "corpus/sft", HOLDOUT_SFT_PREFIX, len(tables.sft),
                len(tables.sft_holdout)),
        _config("dpo", rid, "corpus/dpo", HOLDOUT_DPO_PREFIX, len(tables.dpo),
                len(tables.dpo_holdout)),
    ) if c]
    if tables.wm:
        configs.append({"config_name": "wm", "data_files": [
            {"split": "train", "path": f"{run_prefix('corpus/wm', rid)}/*.parquet"}]})
    sizes = {"sft": (len(tables.sft), len(tables.sft_holdout)),
             "dpo": (len(tables.dpo), len(tables.dpo_holdout)), "wm": (len(tables.wm), 0)}
    schemas = {"sft": SFT_SCHEMA, "dpo": DPO_SCHEMA, "wm": WM_SCHEMA}
    info = [{"config_name": c["config_name"], "features": features(schemas[c["config_name"]]),
             "splits": [{"name": split, "num_examples": n} for split, n in
                        zip(("train", "test"), sizes[c["config_name"]], strict=True) if n]}
            for c in configs]
    meta: dict[str, Any] = {
        "license": license_id,
        "task_categories": ["text-generation"],
        "language": ["en", "code"],
        "tags": ["code", "software-engineering", "agents", "tool-use", "sft", "dpo", "swemill"],
        "size_categories": [size_category(len(_rows(tables)))],
        "pretty_name": f"swemill corpus {rid}",
        "configs": configs,
        "dataset_info": info,
    }
    if license_id == "other":
        meta["license_name"] = "mixed"
        meta["license_details"] = _license(tiers, licenses)[1]
        ids = sorted({s for s in licenses if s})
        if ids:
            meta["license_link"] = _SPDX.format(ids[0]) if len(ids) == 1 else "README.md#license"
    return meta


def _table(header: tuple[str, str], counts: Counter[str] | dict[str, int],
           ordered: bool = False) -> list[str]:
    """A Markdown table, largest first unless ``ordered`` keeps the given order."""
    items = list(counts.items())
    if not ordered:
        items.sort(key=lambda kv: (-kv[1], kv[0]))
    lines = [f"| {header[0]} | {header[1]} |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in items]
    return lines + [""]


def _drops(tables: CorpusTables, manifest: RunManifest) -> Counter[str]:
    out: Counter[str] = Counter()
    for stage, counts in {**manifest.counts, **tables.manifest_counts()}.items():
        for key, n in counts.items():
            if key.startswith("dropped_"):
                out[f"{stage}: {key.removeprefix('dropped_')}"] += n
    return out


_LOADING = '''```python
from datasets import load_dataset

sft = load_dataset("{repo}", "sft")   # or: load_dataset("parquet", data_files=...)
dpo = load_dataset("{repo}", "dpo")
row = sft["train"][0]
text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
```

With TRL, the columns are the ones its trainers read (`messages` + `tools` for SFT;
`prompt`, `chosen`, `rejected` + `tools` for DPO):

```python
from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

SFTTrainer(model=model_id, train_dataset=sft["train"],
           args=SFTConfig(output_dir="sft", max_length={sft_max}))
DPOTrainer(model=model_id, train_dataset=dpo["train"],
           args=DPOConfig(output_dir="dpo", max_length={dpo_max}))
```

Everything else is TRL's default. `max_length` is the one setting that matters: TRL's default
(1024 tokens) cuts a DPO row from its start, and a row whose prompt fills it is dropped or
its two sides become the same text (a loss stuck at ln 2, no gradient).
'''

CHARS_PER_TOKEN = 2.5
"""A low estimate of characters per token for code and tool output (tokenizers of code models
give 3-4), so lengths derived from it err on the long side."""


def _chars(messages: list[dict[str, Any]]) -> int:
    return sum(len(m["content"] or "") + len(m["reasoning_content"] or "") + sum(
        len(c["function"]["name"]) + len(str(c["function"]["arguments"])) + 16
        for c in m["tool_calls"] or []) + 16 for m in messages)


def _first_difference(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> int:
    """Characters of ``a`` before it first differs from ``b`` (rendered alike)."""
    x, y = json.dumps(a, sort_keys=True), json.dumps(b, sort_keys=True)
    n = next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), min(len(x), len(y)))
    return n


def length_budget(tables: CorpusTables) -> dict[str, int]:
    """Token lengths (at :data:`CHARS_PER_TOKEN`) that keep every row whole enough to train:
    an SFT row whole, a DPO row up to the point where its sides differ (plus 64 tokens);
    rounded up to a multiple of 128."""
    def tokens(chars: int) -> int:
        return -(-int(chars / CHARS_PER_TOKEN + 64) // 128) * 128

    sft = [_chars(r["messages"]) + len(r["tools"] or "")
           for r in tables.sft + tables.sft_holdout]
    dpo = [_chars(r["prompt"]) + len(r["tools"] or "")
           + _first_difference(r["chosen"], r["rejected"])
           for r in tables.dpo + tables.dpo_holdout]
    return {"sft_max_length": tokens(max(sft, default=0)),
            "dpo_max_length": tokens(max(dpo, default=0))}

_FORMAT = """Each message is `{role, content, reasoning_content, tool_calls, tool_call_id, name}`;
keys a message does not use are null. Tool calls are OpenAI-shaped
(`{id, type: "function", function: {name, arguments}}`). `arguments` and `tools` use Arrow's
JSON type: `datasets` (4.8 or later) gives dicts and lists, other Parquet readers the JSON
text. Thinking is never inside `content`; it is in `reasoning_content` when kept. The held-out
split (`test`) is grouped by {group_by}, and groups whose rows are near-duplicates were
merged first, so no near-duplicate sits on both sides.
"""


def dataset_card(manifest: RunManifest, tables: CorpusTables, *, licenses: Iterable[str] = (),
                 hub_repo: str = "<user>/<dataset>") -> str:
    """The whole ``README.md``: front matter, then provenance, counts, drops and usage."""
    meta = card_metadata(manifest, tables, licenses)
    prov = provenance(tables)
    _, license_text = _license(prov["license_tier"], licenses)
    group_by = tables.split.group_by if tables.split else "repository"
    budget = length_budget(tables)
    sizes = {"sft / train": len(tables.sft), "sft / test": len(tables.sft_holdout),
             "dpo / train": len(tables.dpo), "dpo / test": len(tables.dpo_holdout)}
    if tables.wm:
        sizes["wm / train"] = len(tables.wm)
    body = [
        f"# {meta['pretty_name']}", "",
        "Training data for coding agents made by swemill. What the rows are, and how each "
        "label was obtained:", "", *_sources(tables),
        f"- run: `{manifest.run_id}` (parent: `{manifest.parent_run_id or 'none'}`), "
        f"schema version {manifest.schema_version}",
        f"- source: `{manifest.source or 'not recorded'}`", "",
        "## Contents", "", *_table(("config / split", "rows"), sizes, ordered=True),
        "## License", "", license_text, "", *_license_table(prov["license_tier"], licenses),
        "## Provenance", "",
        *_table(("repository", "rows"), prov["repo"]),
        *_table(("strategy", "rows"), prov["strategy"]),
        *_table(("policy", "rows"), prov["policy"]),
        *_table(("source", "rows"), prov["source"]),
        "## What is synthetic", "",
        "Rows marked `synthetic` were produced by swemill's scripted policies (the oracle, "
        "which applies the known fix through ordinary tool calls, and the noisy oracle); "
        "they teach the tool protocol and the shape of a fix, not a model's reasoning.", "",
        *_table(("kind", "rows"), prov["synthetic"]),
        "## Drops", "", "Every row left out was counted with its reason:", "",
        *_table(("stage: reason", "rows"), _drops(tables, manifest) or {"none": 0}),
        "## Format", "", _FORMAT.replace("{group_by}", group_by),
        "## Loading", "", _LOADING.replace("{repo}", hub_repo)
        .replace("{sft_max}", str(budget["sft_max_length"]))
        .replace("{dpo_max}", str(budget["dpo_max_length"])),
    ]
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{front}---\n\n" + "\n".join(body)


def write_card(store: Any, run_id: str, card: str) -> str:
    """Write the card under the run's reports and at the store root; the run's key."""
    key = report_key(run_id, "README.md")
    store.write_text(key, card)
    store.write_text(ROOT_CARD_KEY, card)  # where its data_files paths resolve
    return key
