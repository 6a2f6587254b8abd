"""Trace ingestion as a Spark job (the Glue 5.0 job): files are spread over partitions, each
partition runs :func:`swemill.traces.ingest.iter_items` on its files and writes its own
shards, the driver adds up the counts into the run manifest.

The rows equal ``swemill traces ingest`` on the same files. A session key seen twice gets a
``#2`` suffix in the order files are walked; files that can share a key (the same name
stem, or the same session folder for sub-agents) go to one partition in walk order, so the
suffixes fall as they do locally. (Two files with unrelated names that hold the same
session id inside would still each keep the bare key.) Inputs are local paths (every
executor must see them, as on one machine or a shared mount) or ``s3://`` prefixes, which
executors copy to local disk first; rows from S3 name the copy's path as their source file.

    spark-submit --master local[2] traces_job.py --out ROOT --input PATH...
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from swemill.core.errors import IngestError
from swemill.core.records import Trajectory
from swemill.sandbox.leftovers import scratch_prefix
from swemill.spark.common import StoreRef, job_parser
from swemill.store import new_run_id
from swemill.store.store import Store
from swemill.traces.claude_code import IngestOptions
from swemill.traces.ingest import (
    QUARANTINE,
    STATES,
    TRAJECTORIES,
    IngestResult,
    _manifest,
    discover,
    iter_items,
    nothing_usable,
    relabel,
    state_schema,
)
from swemill.traces.scrub_hook import Scrubber
from swemill.traces.states import IngestCounts, Quarantine, TraceState

__all__ = ["ingest_spark", "list_inputs", "main"]


def list_inputs(paths: list[str], storage_options: dict[str, Any] | None = None) -> list[str]:
    """Every input file, sorted as the local path walks them (local paths or s3:// URLs)."""
    local = [Path(p) for p in paths if not p.startswith("s3://")]
    out = [str(p) for p in discover(local)] if local else []
    for url in (p for p in paths if p.startswith("s3://")):
        import fsspec

        fs, root = fsspec.core.url_to_fs(url, **(storage_options or {}))
        found = sorted(fs.find(root))
        if not found:
            raise IngestError(f"no trace files under {url}")
        out += [fs.unstrip_protocol(f) for f in found]
    if not out:
        raise IngestError("no trace files to ingest")
    return out


_SUFFIXES = (".traj.json", ".traj", ".jsonl", ".json")


def _key_group(path: str) -> str:
    """What a file's session key is derived from: its name stem, or for a sub-agent log
    (``<session>/subagents/agent-*.jsonl``) its session folder."""
    parts = path.rstrip("/").split("/")
    if len(parts) >= 3 and parts[-2] == "subagents":
        return parts[-3]
    name = parts[-1]
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name


def _groups(files: list[str]) -> list[list[str]]:
    """Files grouped by :func:`_key_group`, groups and members in walk order."""
    groups: dict[str, list[str]] = {}
    for f in files:
        groups.setdefault(_key_group(f), []).append(f)
    return list(groups.values())


def _staged(files: list[str], tmp: str, storage_options: dict[str, Any] | None) -> list[Path]:
    paths = []
    for f in files:
        if not f.startswith("s3://"):
            paths.append(Path(f))
            continue
        import fsspec

        local = Path(tmp) / f.removeprefix("s3://")
        local.parent.mkdir(parents=True, exist_ok=True)
        fs, path = fsspec.core.url_to_fs(f, **(storage_options or {}))
        fs.get(path, str(local))
        paths.append(local)
    return paths


def _partition(ref: StoreRef, run_id: str, opts: IngestOptions, total: int,
               storage_options: dict[str, Any] | None, inputs: list[str], k: int,
               groups: Iterator[list[str]]) -> Iterator[dict[str, Any]]:
    files = [f for group in groups for f in group]
    store, counts, scrub = ref.open(), IngestCounts(), Scrubber(opts.scrub_keep)
    buffers: dict[str, list[BaseModel]] = {STATES: [], TRAJECTORIES: [], QUARANTINE: []}
    stage_of = {TraceState: STATES, Trajectory: TRAJECTORIES, Quarantine: QUARANTINE}
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("spark")) as tmp:
        # files are named relative to the input they came from, as the local path names them
        roots = [Path(tmp) / p.removeprefix("s3://") if p.startswith("s3://") else Path(p)
                 for p in inputs]
        for item in iter_items(_staged(files, tmp, storage_options), counts, opts, scrub):
            if isinstance(item, TraceState):
                item = item.model_copy(update={"messages": []})  # as the local path stores
            item = relabel(item, roots)
            buffers[stage_of[type(item)]].append(item)
    shard = f"p{k:05d}-of-{total:05d}"
    written = {}
    for stage, records in buffers.items():
        if records:
            schema = state_schema() if stage == STATES else None
            store.write_records(stage, run_id, shard, records, schema)
        written[stage] = 1 if records else 0
    counts.scrubbed = dict(scrub.counts)
    yield {"counts": counts.model_dump(mode="json"), "written": written}


def ingest_spark(spark: Any, paths: list[str], store: Store, run_id: str | None = None,
                 opts: IngestOptions | None = None, *, partitions: int | None = None,
                 input_options: dict[str, Any] | None = None) -> IngestResult:
    """Ingest ``paths`` into ``store`` as one run, one shard per partition and stage."""
    files = list_inputs(paths, input_options)
    run_id = run_id or new_run_id()
    opts = opts or IngestOptions()
    groups = _groups(files)
    n = max(1, min(partitions or spark.sparkContext.defaultParallelism, len(groups)))
    store.write_manifest(_manifest(run_id, [Path(p) for p in paths], IngestCounts(), "running"))
    work = partial(_partition, StoreRef.of(store), run_id, opts, n, input_options, paths)
    rdd = spark.sparkContext.parallelize(groups, n)
    parts = rdd.mapPartitionsWithIndex(work).collect()
    counts = IngestCounts()
    shards = dict.fromkeys((STATES, TRAJECTORIES, QUARANTINE), 0)
    for part in parts:
        counts.merge(IngestCounts.model_validate(part["counts"]))
        for stage, w in part["written"].items():
            shards[stage] += w
    error = nothing_usable(counts, run_id)
    store.write_manifest(_manifest(run_id, [Path(p) for p in paths], counts,
                                   "failed" if error else "complete", error))
    return IngestResult(run_id, counts, shards, error)


def main(argv: list[str] | None = None) -> int:
    """``spark-submit ... traces_job.py --out ROOT --input PATH...`` (Glue adds its own)."""
    from swemill.spark.spark_session import spark_session

    parser = job_parser("Ingest agent session logs into a swemill store with Spark.")
    # An option, not positional: Glue appends "--JOB_NAME name ..." which must be left alone.
    parser.add_argument("--input", nargs="+", required=True, dest="paths",
                        help="trace files, folders or s3:// prefixes")
    args, _glue_extras = parser.parse_known_args(argv)
    spark = spark_session("swemill-traces-ingest", args.master)
    store = Store.open(args.out, storage_options=args.storage_options)
    result = ingest_spark(spark, args.paths, store, args.run_id, partitions=args.partitions,
                          input_options=args.storage_options)
    sys.stdout.write(f"{result.run_id} {result.counts.model_dump_json()}\n")
    return 1 if result.error else 0


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    raise SystemExit(main())
