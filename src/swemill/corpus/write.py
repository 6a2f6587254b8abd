"""Writing a built corpus through the store: one shard per table, each with its marker.

Layout (``swemill.store.layout``): ``corpus/sft`` and ``corpus/dpo`` hold the training rows;
``corpus/holdout`` holds the held-out rows of both, as ``part-sft-*`` and ``part-dpo-*``
shards (their schemas differ, so a reader picks one by name); ``corpus/wm`` the optional
world-model tuples. An empty table is not written at all: ``datasets`` cannot read a
zero-row Parquet file ("BatchSize must be greater than 0"), so the card names only the
splits that have rows (see :func:`swemill.corpus.card.dataset_card`).
"""

from __future__ import annotations

from swemill.corpus.assemble import CorpusTables
from swemill.corpus.rows import DPO_SCHEMA, SFT_SCHEMA, WM_SCHEMA
from swemill.store import Store, shard_name

__all__ = ["write_corpus", "HOLDOUT_SFT_PREFIX", "HOLDOUT_DPO_PREFIX"]

HOLDOUT_SFT_PREFIX = "sft-"
HOLDOUT_DPO_PREFIX = "dpo-"


def write_corpus(
    store: Store, run_id: str, tables: CorpusTables, *, index: int = 0, total: int = 1
) -> dict[str, int]:
    """Write shard ``index`` of ``total`` of every corpus table; returns rows per table."""
    shard = shard_name(index, total)
    plan = [
        ("corpus/sft", shard, tables.sft, SFT_SCHEMA, "sft"),
        ("corpus/dpo", shard, tables.dpo, DPO_SCHEMA, "dpo"),
        ("corpus/holdout", HOLDOUT_SFT_PREFIX + shard, tables.sft_holdout, SFT_SCHEMA,
         "sft_holdout"),
        ("corpus/holdout", HOLDOUT_DPO_PREFIX + shard, tables.dpo_holdout, DPO_SCHEMA,
         "dpo_holdout"),
    ]
    plan.append(("corpus/wm", shard, tables.wm, WM_SCHEMA, "wm"))
    written = {}
    for stage, name, rows, schema, label in plan:
        if rows:
            store.write_records(stage, run_id, name, rows, schema=schema)
        else:  # a rebuilt corpus must not keep an earlier build's rows of this table
            store.drop_shard(stage, run_id, name)
        written[label] = len(rows)
    return written
