"""A run's corpus splits, read through the store as ``datasets`` tables.

``datasets.Dataset`` over the Arrow table keeps the JSON-typed columns (tool-call arguments,
``tools``) as its ``Json`` feature, so rows reach the chat template and TRL as dicts — the
same thing ``load_dataset("parquet", ...)`` gives a user.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from swemill.core.errors import CorpusError
from swemill.store import Store
from swemill.store.layout import run_prefix

__all__ = ["Splits", "load_splits", "present"]


@dataclass(slots=True)
class Splits:
    sft: Any
    """``datasets.Dataset`` of the training SFT rows (never empty)."""
    sft_holdout: Any | None
    dpo: Any | None
    """The DPO pairs of both ``corpus/dpo`` and the held-out DPO shards."""
    rows: dict[str, int] = field(default_factory=dict)


def _shards(store: Store, stage: str, run_id: str) -> list[str]:
    if not store.list_keys(run_prefix(stage, run_id)):
        return []
    return store.complete_shards(stage, run_id)


def present(store: Store, run_id: str) -> dict[str, bool]:
    """Which splits have rows, from the shard markers alone (no Parquet read, no imports).

    The corpus stage writes no shard for an empty table, so a finished shard means rows.
    """
    from swemill.corpus.write import HOLDOUT_DPO_PREFIX, HOLDOUT_SFT_PREFIX

    held = _shards(store, "corpus/holdout", run_id)
    return {
        "sft": bool(_shards(store, "corpus/sft", run_id)),
        "sft_holdout": any(s.startswith(HOLDOUT_SFT_PREFIX) for s in held),
        "dpo": bool(_shards(store, "corpus/dpo", run_id))
        or any(s.startswith(HOLDOUT_DPO_PREFIX) for s in held),
    }


def _tables(store: Store, stage: str, run_id: str, prefix: str = "") -> list[Any]:
    if not _shards(store, stage, run_id):
        return []
    return [t for shard, t in store.read_tables(stage, run_id) if shard.startswith(prefix)]


def _dataset(tables: list[Any]) -> Any | None:
    import datasets
    import pyarrow as pa

    tables = [t for t in tables if t.num_rows]
    return datasets.Dataset(pa.concat_tables(tables)) if tables else None


def no_sft_rows(store: Store, run_id: str) -> CorpusError:
    return CorpusError(
        f"run {run_id} in {store.url} has no SFT rows under corpus/sft/: nothing to train "
        f"the probe on (run `swemill corpus --run {run_id}` first)")


def load_splits(store: Store, run_id: str) -> Splits:
    """The run's SFT, held-out SFT and DPO rows; no SFT rows at all is an error."""
    from swemill.corpus.write import HOLDOUT_DPO_PREFIX, HOLDOUT_SFT_PREFIX

    sft = _dataset(_tables(store, "corpus/sft", run_id))
    if sft is None:
        raise no_sft_rows(store, run_id)
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
