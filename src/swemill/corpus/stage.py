"""The corpus stage over a store: read a run's records, assemble, write, record.

Reads ``trajectories/`` (Trajectory, imported sessions included; ``traces/`` holds per-turn
states, not trajectories), ``pairs/`` (PreferencePair), ``tasks/`` and ``golden/`` (the
guard needs the golden patches; nothing golden is written back) of one run; writes
``corpus/*`` (each row labelled easy / medium / hard from ``difficulty/``, else the task's
proxies; ``--difficulty`` and ``--curriculum`` select and order by it), the run's near-dup
signatures under ``index/dedup/``, the corpus counts into the run manifest and the dataset
card as ``reports/run_id=<id>/README.md``.

Rerunning is safe: the rows are a pure function of the inputs and of the *other* runs'
dedup signatures, every write replaces its object atomically, and the card is written last,
so ``resume=True`` skips a run whose card and corpus counts are both there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from swemill.core.errors import CorpusError
from swemill.core.records import Golden, PreferencePair, RunManifest, Task, Trajectory
from swemill.core.segments import join_segments
from swemill.corpus.assemble import CorpusConfig, CorpusTables, assemble, empty_reason
from swemill.corpus.card import dataset_card, write_card
from swemill.corpus.dedup import NearDupIndex
from swemill.corpus.write import HOLDOUT_DPO_PREFIX, HOLDOUT_SFT_PREFIX, write_corpus
from swemill.store import Store
from swemill.store.layout import gate_verdicts_key, manifest_key, report_key, run_prefix
from swemill.validate.difficulty import load_difficulty

__all__ = ["CorpusSummary", "run_corpus", "read_inputs", "read_trajectories", "load_corpus_tables",
           "PAIRS_STAGE"]

PAIRS_STAGE = "pairs"
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class CorpusSummary:
    run_id: str
    rows: dict[str, int]
    counts: dict[str, dict[str, int]]
    card_key: str
    skipped: bool = False


def optional_records(store: Store, stage: str, run_id: str, model: type[M]) -> list[M]:
    if not store.list_keys(run_prefix(stage, run_id)):
        return []
    return store.read_records(stage, run_id, model)


def read_trajectories(store: Store, run_id: str) -> list[Trajectory]:
    """The run's trajectories, a long session's segment rows joined into one (absent: [])."""
    return join_segments(optional_records(store, "trajectories", run_id, Trajectory))


def read_inputs(store: Store, run_id: str) -> dict[str, Any]:
    """The run's trajectories, pairs, tasks and goldens (absent stages read as empty)."""
    trajs = read_trajectories(store, run_id)
    pairs = optional_records(store, PAIRS_STAGE, run_id, PreferencePair)
    if not trajs and not pairs:
        raise CorpusError(f"run {run_id} in {store.url} has no trajectories, traces or pairs")
    tasks = {t.instance_id: t for t in optional_records(store, "tasks", run_id, Task)}
    goldens = {g.instance_id: g for g in optional_records(store, "golden", run_id, Golden)}
    return {"trajectories": trajs, "pairs": pairs, "tasks": tasks, "goldens": goldens}


def _manifest(store: Store, run_id: str) -> RunManifest:
    if store.exists(manifest_key(run_id)):
        return store.read_manifest(run_id)  # a corrupt one is an error, never overwritten
    return RunManifest(run_id=run_id, command="corpus")  # records imported without a run


def _licenses(store: Store, run_id: str, tasks: Iterable[Task]) -> list[str]:
    """SPDX ids of the run's sources: from the tasks, else from the run's gate verdicts (the
    tasks stage records the tier on each task but the SPDX id only in ``gate/``)."""
    found = {str(t.metadata["license_spdx"]) for t in tasks if t.metadata.get("license_spdx")}
    key = gate_verdicts_key(run_id)
    if not found and store.exists(key):
        found = {str(v["license_spdx"]) for v in store.read_jsonl(key)
                 if v.get("allowed", True) and v.get("license_spdx")}
    return sorted(found)


def run_corpus(store: Store, run_id: str, config: CorpusConfig | None = None, *,
               resume: bool = False, allow_empty: bool = False) -> CorpusSummary:
    """Build and write the corpus of ``run_id``; see the module docstring for the keys."""
    card_key = report_key(run_id, "README.md")
    manifest = _manifest(store, run_id)
    if resume and store.exists(card_key) and "corpus.sft" in manifest.counts:
        return CorpusSummary(run_id, {}, manifest.counts, card_key, skipped=True)
    inputs = read_inputs(store, run_id)
    index = NearDupIndex.load(store, run_id)
    tables = assemble(inputs["trajectories"], inputs["pairs"], tasks=inputs["tasks"],
                      goldens=inputs["goldens"], config=config, dedup_index=index,
                      allow_empty=True,
                      difficulty=load_difficulty(store, run_id, inputs["tasks"].values()))
    rows = write_corpus(store, run_id, tables)
    index.save(store)
    manifest.counts.update(tables.manifest_counts())
    if config is not None and config.scrub_keep:
        manifest.metadata["scrub_keep"] = sorted(config.scrub_keep)
    if config is not None and (config.difficulty != "all" or config.curriculum):
        manifest.metadata["corpus_selection"] = {"difficulty": config.difficulty,
                                                 "curriculum": config.curriculum}
    store.write_manifest(manifest)
    if not any(rows[k] for k in ("sft", "sft_holdout", "dpo", "dpo_holdout")):
        if not allow_empty:
            raise CorpusError(empty_reason(tables))
    else:
        card = dataset_card(manifest, tables,
                            licenses=_licenses(store, run_id, inputs["tasks"].values()))
        write_card(store, run_id, card)
    return CorpusSummary(run_id, rows, tables.manifest_counts(), card_key)


def load_corpus_tables(store: Store, run_id: str) -> CorpusTables:
    """The written corpus of a run, read back (for the report); absent tables are empty."""
    tables = CorpusTables()
    for stage, attr in (("corpus/sft", "sft"), ("corpus/dpo", "dpo"), ("corpus/wm", "wm")):
        if store.complete_shards(stage, run_id):
            setattr(tables, attr, store.read_records(stage, run_id))
    for shard, table in (store.read_tables("corpus/holdout", run_id)
                         if store.complete_shards("corpus/holdout", run_id) else []):
        target = tables.sft_holdout if shard.startswith(HOLDOUT_SFT_PREFIX) else (
            tables.dpo_holdout if shard.startswith(HOLDOUT_DPO_PREFIX) else None)
        if target is not None:
            target.extend(table.to_pylist())
    manifest = _manifest(store, run_id)
    tables.counts = {k: Counter(v) for k, v in manifest.counts.items() if k.startswith("corpus.")}
    return tables
