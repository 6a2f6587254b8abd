"""The corpus stage's normalise + dedup as a Spark job (the EMR Serverless job).

Same code, other placement:

1. *normalise* — one Spark task per Parquet part of ``trajectories/`` (a long session's
   segment rows, all in one part, joined there) and ``pairs/`` (``traces/`` holds per-turn
   states, which the local path does not read either):
   :func:`swemill.corpus.assemble.assemble` with dedup and the held-out split
   switched off does admission, scrubbing, rows, the golden guard and the filters; each kept
   row gets its global position (the order the local path reads), its dedup text, digest and
   MinHash signature, and is checked against earlier runs' saved index;
2. *dedup across partitions* — rows meet by exact digest and by LSH band key (the index's
   own bands) in a shuffle; candidate pairs are verified by Jaccard estimate as the index
   does; the driver then walks the (small) edge list in position order, so "the first row
   wins" holds exactly as in the sequential index;
3. *split and write* — the split runs on the driver over the kept rows' split keys and texts;
   each partition writes its rows with :func:`swemill.corpus.write.write_corpus` as shard
   ``k of n`` and its rows' signatures as shard ``k of n`` of ``index/dedup``.

The rows equal ``swemill corpus`` on the same run (order aside), and so do the counts.
Known cost: a cluster of ``m`` exact duplicates makes ``m*(m-1)/2`` candidate pairs.

    spark-submit --master local[2] corpus_job.py --out ROOT --run-id RUN
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sys
from collections import Counter
from collections.abc import Iterator
from functools import partial
from itertools import combinations
from typing import Any, cast

import numpy as np

from swemill.core.errors import CorpusError, StoreError
from swemill.core.records import Drop, Golden, PreferencePair, RunManifest, Task, Trajectory
from swemill.core.segments import join_segments
from swemill.corpus.assemble import (
    CorpusConfig,
    CorpusTables,
    assemble,
    dedup_text,
    empty_reason,
    pair_digest,
    row_text,
)
from swemill.corpus.card import dataset_card, write_card
from swemill.corpus.dedup import NearDupIndex, text_hash
from swemill.corpus.split import Split, SplitItem, family_of, split
from swemill.corpus.stage import (
    PAIRS_STAGE,
    load_corpus_tables,
    optional_records,  # absent stage: no rows
)
from swemill.corpus.write import write_corpus
from swemill.spark.common import StoreRef, job_parser
from swemill.store import Store, shard_name
from swemill.store.layout import manifest_key, marker_key, part_key
from swemill.store.parquet import bytes_to_table, table_to_rows
from swemill.validate.difficulty import load_difficulty

__all__ = ["corpus_spark", "SparkCorpusSummary", "main"]

# The stages the corpus reads, in the order the local path reads them (corpus.stage).
_INPUTS = (("trajectories", "sft"), (PAIRS_STAGE, "dpo"))
_EMPTY = np.iinfo(np.uint32).max


@dataclasses.dataclass(frozen=True, slots=True)
class SparkCorpusSummary:
    run_id: str
    rows: dict[str, int]
    counts: dict[str, dict[str, int]]
    partitions: int


def _units(store: Store, run_id: str) -> list[tuple[str, str, str, int]]:
    """``(stage, shard, kind, first position)`` per finished part, in the local read order."""
    units, pos = [], 0
    for stage, kind in _INPUTS:
        for shard in store.complete_shards(stage, run_id):
            units.append((stage, shard, kind, pos))
            pos += int(store.read_json(marker_key(stage, run_id, shard))["rows"])
    return units


def _read_part(store: Store, run_id: str, stage: str, shard: str, model: Any) -> list[Any]:
    marker = store.read_json(marker_key(stage, run_id, shard))
    data = store.get_bytes(part_key(stage, run_id, shard))
    where = store.url_for(part_key(stage, run_id, shard))
    if hashlib.sha256(data).hexdigest() != marker.get("sha256"):
        raise StoreError(f"corrupt Parquet part {where}: it does not match its marker")
    rows = table_to_rows(bytes_to_table(data, where), model, where)
    # a long session's segment rows are all in one part (the ingest writer keeps them so)
    if model is Trajectory:
        return join_segments(cast("list[Trajectory]", rows))
    return rows


def _row_id(row: dict[str, Any], kind: str) -> str:
    return str(row["trajectory_id"] if kind == "sft" else row["pair_id"])


def _normalise(ref: StoreRef, run_id: str, cfg: CorpusConfig, shared: Any,
               units: Iterator[tuple[str, str, str, int]]) -> Iterator[dict[str, Any]]:
    store, ctx = ref.open(), shared.value
    prior: NearDupIndex = ctx["prior"]
    per_part = dataclasses.replace(cfg, dedup=False,
                                   split=dataclasses.replace(cfg.split, holdout_fraction=0.0))
    for stage, shard, kind, first in units:
        model = Trajectory if kind == "sft" else PreferencePair
        recs = _read_part(store, run_id, stage, shard, model)
        trajs, pairs = (recs, []) if kind == "sft" else ([], recs)
        tables = assemble(trajs, pairs, tasks=ctx["tasks"], goldens=ctx["goldens"],
                          config=per_part, allow_empty=True, difficulty=ctx["difficulty"])
        made = tables.sft if kind == "sft" else tables.dpo  # input order (nothing held out)
        rows, it = [], iter(enumerate(recs))
        for row in made:  # rows are a subsequence of the records: match them in order
            pos = next(p for p, r in it if _rec_id(r, kind) == _row_id(row, kind))
            text = dedup_text(row["messages"]) if kind == "sft" else pair_digest(row)
            sig = prior.signature(text)
            match = prior.check(text, sig) if cfg.dedup else None
            rows.append({"idx": first + pos, "kind": kind, "row": row, "sig": sig,
                         "digest": text_hash(text, lowercase=prior.config.lowercase),
                         "prior": match.kind if match else None, "split": _split_item(
                             row, kind, ctx["tasks"])})
        counts = {k: dict(v) for k, v in tables.counts.items() if k != "corpus.split"}
        yield {"rows": rows, "counts": counts, "drops": tables.drops, "wm": tables.wm}


def _rec_id(rec: Any, kind: str) -> str:
    return str(rec.trajectory_id if kind == "sft" else rec.pair_id)


def _split_item(row: dict[str, Any], kind: str, tasks: dict[str, Any]) -> SplitItem:
    family = family_of(tasks.get(row["task_id"] or ""))
    if kind == "sft":
        return SplitItem(f"sft:{row['trajectory_id']}", row["repo"], row["task_id"], family,
                         row_text(row["messages"], system=False))
    return SplitItem(f"dpo:{row['pair_id']}", row["repo"], row["task_id"], family)


def _buckets(shared: Any, unit: dict[str, Any]) -> Iterator[tuple[Any, tuple[int, Any, str]]]:
    """Bucket keys a row meets others under: its digest and, unless empty, its LSH bands."""
    bands = shared.value["prior"]._bands  # the index's own banding, so candidates match it
    for r in unit["rows"]:
        value = (r["idx"], r["sig"], r["digest"])
        yield ("exact", r["digest"]), value
        if r["sig"][0] != _EMPTY:
            for j, key in enumerate(bands.keys(r["sig"])[0].tolist()):
                yield (j, key), value


def _edges(threshold: float, bucket: tuple[Any, Any]) -> Iterator[tuple[int, int, bool, float]]:
    """Verified duplicate pairs ``(earlier, later, exact, jaccard)`` within one bucket."""
    members = sorted(bucket[1], key=lambda m: m[0])
    for (i, si, di), (j, sj, dj) in combinations(members, 2):
        if di == dj:
            yield i, j, True, 1.0
        elif bucket[0][0] != "exact" and si[0] != _EMPTY and sj[0] != _EMPTY:
            jaccard = float(np.mean(si == sj))
            if jaccard >= threshold:
                yield i, j, False, jaccard


def _resolve(edges: list[tuple[int, int, bool, float]],
             prior: dict[int, str]) -> dict[int, str]:
    """Walk positions in order, as the sequential index does: a row is dropped when an
    earlier *kept* row (or an earlier run) duplicates it; returns position -> reason."""
    earlier: dict[int, list[tuple[int, bool]]] = {}
    for i, j, exact, _ in edges:
        earlier.setdefault(j, []).append((i, exact))
    dropped: dict[int, str] = {}
    for j in sorted(set(earlier) | set(prior)):
        kept = [(i, exact) for i, exact in earlier.get(j, ()) if i not in dropped]
        if any(exact for _, exact in kept) or prior.get(j) == "exact":
            dropped[j] = "exact_duplicate"
        elif kept or j in prior:
            dropped[j] = "near_duplicate"
    return dropped


def _write(ref: StoreRef, run_id: str, cfg: CorpusConfig, total: int, shared: Any, k: int,
           units: Iterator[dict[str, Any]]) -> Iterator[dict[str, int]]:
    store, ctx = ref.open(), shared.value
    tables, index = CorpusTables(), NearDupIndex(run_id, ctx["prior"].config)
    for unit in units:
        tables.wm.extend(unit["wm"])
        for r in sorted(unit["rows"], key=lambda r: r["idx"]):
            if r["idx"] in ctx["dropped"]:
                continue
            held = r["split"].key in ctx["holdout"]
            if r["kind"] == "sft":
                (tables.sft_holdout if held else tables.sft).append(r["row"])
            else:
                (tables.dpo_holdout if held else tables.dpo).append(r["row"])
            if cfg.dedup:
                index.check_and_add(_row_id(r["row"], r["kind"]),
                                    dedup_text(r["row"]["messages"]) if r["kind"] == "sft"
                                    else pair_digest(r["row"]))
    yield write_corpus(store, run_id, tables, index=k, total=total)
    index.save(store, shard_name(k, total))  # as the stage does, even when it is empty


def _sum_counts(parts: list[dict[str, Any]], dropped: dict[int, str],
                kind_of: dict[int, str]) -> dict[str, Counter[str]]:
    counts: dict[str, Counter[str]] = {}
    for part in parts:
        for stage, c in part["counts"].items():
            counts.setdefault(stage, Counter()).update(c)
    for pos, reason in dropped.items():
        stage = f"corpus.{kind_of[pos]}"
        counts[stage]["out"] -= 1
        counts[stage][f"dropped_{reason}"] += 1
    for stage in ("corpus.sft", "corpus.dpo"):
        if stage in counts:
            counts[stage] = +counts[stage]  # the local counters hold no zero entries
    return counts


def _split_counts(rows: Counter[str], result: Split) -> Counter[str]:
    return Counter({
        "sft_train": rows["sft"], "sft_holdout": rows["sft_holdout"],
        "dpo_train": rows["dpo"], "dpo_holdout": rows["dpo_holdout"],
        "groups": len(result.sizes), "holdout_groups": len(result.holdout_groups),
        "merged_near_dup_groups": result.merged_groups,
    })


def corpus_spark(spark: Any, store: Store, run_id: str, config: CorpusConfig | None = None, *,
                 allow_empty: bool = False) -> SparkCorpusSummary:
    """Build and write the corpus of ``run_id`` with Spark (see the module docstring)."""
    cfg = config or CorpusConfig()
    if cfg.curriculum:  # rows are written in input order, partition by partition
        raise CorpusError("the Spark corpus job keeps input order: build a curriculum-ordered "
                          "corpus with `swemill corpus --curriculum` (local)")
    units = _units(store, run_id)
    if not units:
        raise CorpusError(f"run {run_id} in {store.url} has no trajectories, traces or pairs")
    tasks = {t.instance_id: t for t in optional_records(store, "tasks", run_id, Task)}
    goldens = {g.instance_id: g for g in optional_records(store, "golden", run_id, Golden)}
    sc, ref = spark.sparkContext, StoreRef.of(store)
    prior = NearDupIndex.load(store, run_id)
    # each task's label (the difficulty/ table, else its proxies), as the local stage has it
    ctx = {"tasks": tasks, "goldens": goldens, "prior": prior,
           "difficulty": load_difficulty(store, run_id, tasks.values())}
    norm = sc.parallelize(units, len(units)).mapPartitions(
        partial(_normalise, ref, run_id, cfg, sc.broadcast(ctx))).cache()
    try:
        parts = norm.map(lambda u: {"counts": u["counts"], "drops": u["drops"], "meta": [
            (r["idx"], r["kind"], r["prior"], r["split"]) for r in u["rows"]]}).collect()
        meta = sorted((m for p in parts for m in p["meta"]), key=lambda m: m[0])
        dropped: dict[int, str] = {}
        if cfg.dedup:
            threshold = prior.config.jaccard_threshold
            edges = (norm.flatMap(partial(_buckets, sc.broadcast({"prior": prior})))
                     .groupByKey().flatMap(partial(_edges, threshold)).distinct().collect())
            dropped = _resolve(edges, {i: p for i, _, p, _ in meta if p})
        kept = [m for m in meta if m[0] not in dropped]
        result = split([m[3] for m in kept], cfg.split)
        holdout = {m[3].key for m in kept if result.is_holdout(m[3].key)}
        shared = sc.broadcast({"prior": prior, "dropped": set(dropped),
                               "holdout": holdout})
        n = len(units)
        written = norm.mapPartitionsWithIndex(
            partial(_write, ref, run_id, cfg, n, shared)).collect()
    finally:
        norm.unpersist()
    rows = Counter[str]()
    for w in written:
        rows.update(w)
    counts = _sum_counts(parts, dropped, {m[0]: m[1] for m in meta})
    kinds = {m[0]: m[1] for m in meta}
    drops = [d for p in parts for d in p["drops"]] + [
        Drop(stage=f"corpus.{kinds[i]}", reason=r, item_id=str(i)) for i, r in dropped.items()]
    counts["corpus.split"] = _split_counts(rows, result)
    summary = SparkCorpusSummary(run_id, dict(rows), {k: dict(v) for k, v in counts.items()}, n)
    _record(store, run_id, summary, drops, result, allow_empty)
    return summary


def _record(store: Store, run_id: str, summary: SparkCorpusSummary, drops: list[Drop],
            result: Split, allow_empty: bool) -> None:
    """Manifest counts, then the dataset card (from the written corpus), as the stage does."""
    if store.exists(manifest_key(run_id)):
        manifest = store.read_manifest(run_id)
    else:
        manifest = RunManifest(run_id=run_id, command="corpus")
    manifest.counts.update(summary.counts)
    store.write_manifest(manifest)
    if not any(summary.rows.get(k) for k in ("sft", "sft_holdout", "dpo", "dpo_holdout")):
        if not allow_empty:
            raise CorpusError(empty_reason(CorpusTables(drops=drops)))
        return
    written = load_corpus_tables(store, run_id)
    written.split = result
    tasks = optional_records(store, "tasks", run_id, Task)
    licenses = sorted({str(t.metadata["license_spdx"]) for t in tasks
                       if t.metadata.get("license_spdx")})
    write_card(store, run_id, dataset_card(manifest, written, licenses=licenses))


def main(argv: list[str] | None = None) -> int:
    """``spark-submit ... corpus_job.py --out ROOT --run-id RUN`` (EMR adds its own args)."""
    from swemill.spark.spark_session import spark_session

    parser = job_parser("Build a run's corpus (normalise + cross-partition dedup) with Spark.")
    parser.add_argument("--holdout", type=float, default=None)
    args, _extras = parser.parse_known_args(argv)
    if not args.run_id:
        parser.error("--run-id is required")
    cfg = CorpusConfig()
    if args.holdout is not None:
        cfg = dataclasses.replace(cfg, split=dataclasses.replace(
            cfg.split, holdout_fraction=args.holdout))
    spark = spark_session("swemill-corpus", args.master)
    store = Store.open(args.out, storage_options=args.storage_options)
    summary = corpus_spark(spark, store, args.run_id, cfg)
    sys.stdout.write(f"{summary.run_id} {summary.rows}\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    raise SystemExit(main())
