"""A run's corpus splits, read through the store as ``datasets`` tables.

``datasets.Dataset`` over the Arrow table keeps the JSON-typed columns (tool-call arguments,
``tools``) as its ``Json`` feature, so rows reach the chat template and TRL as dicts — the
same thing ``load_dataset("parquet", ...)`` gives a user.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from swemill.core.errors import CorpusError
from swemill.corpus.write import HOLDOUT_DPO_PREFIX, HOLDOUT_SFT_PREFIX
from swemill.store import Store
from swemill.store.layout import run_prefix

__all__ = ["Splits", "load_splits"]


@dataclass(slots=True)
class Splits:
    sft: Any
    """``datasets.Dataset`` of the training SFT rows (never empty)."""
    sft_holdout: Any | None
    dpo: Any | None
    """The DPO pairs of both ``corpus/dpo`` and the held-out DPO shards."""
    rows: dict[str, int] = field(default_factory=dict)


def _tables(store: Store, stage: str, run_id: str, prefix: str = "") -> list[Any]:
    if not store.list_keys(run_prefix(stage, run_id)) or not store.complete_shards(stage, run_id):
        return []
    return [t for shard, t in store.read_tables(stage, run_id) if shard.startswith(prefix)]


def _dataset(tables: list[Any]) -> Any | None:
    import datasets
    import pyarrow as pa

    tables = [t for t in tables if t.num_rows]
    return datasets.Dataset(pa.concat_tables(tables)) if tables else None


def load_splits(store: Store, run_id: str) -> Splits:
    """The run's SFT, held-out SFT and DPO rows; no SFT rows at all is an error."""
    sft = _dataset(_tables(store, "corpus/sft", run_id))
    if sft is None:
        raise CorpusError(
            f"run {run_id} in {store.url} has no SFT rows under corpus/sft/: nothing to train "
            f"the probe on (run `swemill corpus --run {run_id}` first)"
        )
    holdout = _dataset(_tables(store, "corpus/holdout", run_id, HOLDOUT_SFT_PREFIX))
    dpo_train = _tables(store, "corpus/dpo", run_id)
    dpo_held = _tables(store, "corpus/holdout", run_id, HOLDOUT_DPO_PREFIX)
    dpo = _dataset(dpo_train + dpo_held)
    rows = {
        "sft": sft.num_rows,
        "sft_holdout": holdout.num_rows if holdout is not None else 0,
        "dpo": sum(t.num_rows for t in dpo_train),
        "dpo_holdout": sum(t.num_rows for t in dpo_held),
    }
    return Splits(sft=sft, sft_holdout=holdout, dpo=dpo, rows=rows)
