"""``swemill traces ingest``: find trace files, read them one at a time, write the store.

What goes where (one kind of record per stage, so every stage reads back as one model):

- ``traces/run_id=<id>/part-*.parquet`` — :class:`TraceState`, one row per assistant turn,
  without the history (``trajectory_id`` + ``prefix_len`` point into it);
- ``trajectories/run_id=<id>/part-*.parquet`` — the whole-session ``Trajectory`` records,
  the same prefix rollouts write, so later stages read imported and generated runs alike;
- ``quarantine/run_id=<id>/part-*.parquet`` — :class:`Quarantine` rows (file, line, reason);
- ``manifests/run_id=<id>.json`` — the run's counts.

Each stage writes its parts a row group at a time, and a long session reaches
``trajectories/`` as several segment rows (:mod:`swemill.core.segments`) written as the
session is read, so memory stays bounded however large the corpus or one of its files is.

The manifest says ``running`` while the run goes on, then ``complete``, or ``failed`` with
the reason in ``metadata.error``: on any error (and on SIGTERM), and when nothing at all was
usable (no trajectory came out of the input: all garbage, binary, empty), which the CLI turns
into a non-zero exit after printing the counts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from swemill.core.errors import IngestError, SwemillError
from swemill.core.records import RunManifest, Trajectory, utcnow
from swemill.core.segments import is_open_segment
from swemill.store import Store, new_run_id, schema_for_model
from swemill.store.parquet import rows_to_table
from swemill.store.parts import PartWriter
from swemill.traces.claude_code import IngestOptions, ingest_session_file
from swemill.traces.codex import ingest_codex_file
from swemill.traces.codex import sniff as sniff_codex
from swemill.traces.imports import import_mini_swe_agent, import_swe_agent
from swemill.traces.lines import HEAD_BYTES, head_of
from swemill.traces.scrub_hook import Scrubber
from swemill.traces.states import IngestCounts, Quarantine, TraceState
from swemill.traces.stream import message_bytes

__all__ = ["discover", "iter_items", "ingest", "IngestResult", "state_schema", "classify",
           "nothing_usable", "relabel", "shown_path"]

STATES, TRAJECTORIES, QUARANTINE = "traces", "trajectories", "quarantine"


def classify(path: Path) -> str:
    """``claude_code`` | ``codex`` | ``mini-swe-agent`` | ``swe-agent`` | ``unknown``: by file
    name, and for ``.jsonl`` by its first line (Codex rollouts wrap each line in an envelope)."""
    name = path.name
    if name.endswith(".traj.json"):
        return "mini-swe-agent"
    if name.endswith(".traj"):
        return "swe-agent"
    if name.endswith(".jsonl"):
        return "codex" if sniff_codex(path) else "claude_code"
    return "unknown"


def check_paths(paths: list[Path]) -> None:
    if not paths:
        raise IngestError("no paths to ingest")
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise IngestError(f"no such file or directory: {', '.join(missing)}")


def discover(paths: list[Path]) -> Iterator[Path]:
    """Every file under the given paths, sorted; a path that does not exist is an error."""
    check_paths(paths)
    for p in paths:
        if p.is_file():
            yield p
            continue
        for dirpath, dirnames, filenames in os.walk(p):
            dirnames.sort()
            for name in sorted(filenames):
                yield Path(dirpath) / name


def iter_items(
    paths: list[Path], counts: IngestCounts, opts: IngestOptions, scrub: Scrubber
) -> Iterator[TraceState | Trajectory | Quarantine]:
    keys: set[str] = set()
    for path in discover(paths):
        counts.files += 1
        kind = classify(path)
        try:
            if not path.is_file():  # a FIFO or socket would block or fail on open
                counts.quarantined_files += 1
                yield Quarantine(file=str(path), line_no=0, reason="not a regular file")
            elif kind == "claude_code":
                yield from ingest_session_file(path, counts, keys, opts, scrub)
            elif kind == "codex":
                yield from ingest_codex_file(path, counts, keys, opts, scrub)
            elif kind == "mini-swe-agent":
                yield from import_mini_swe_agent(path, counts, keys, opts.max_line_bytes, scrub)
            elif kind == "swe-agent":
                yield from import_swe_agent(path, counts, keys, opts.max_line_bytes, scrub)
            else:
                counts.quarantined_files += 1
                reason = "not a trace file (.jsonl, .traj.json or .traj)"
                yield Quarantine(file=str(path), line_no=0, reason=reason, size=_size(path),
                                 head=_head(path))
        except OSError as exc:  # one unreadable file is that file's failure, not the run's
            counts.quarantined_files += 1
            yield Quarantine(file=str(path), line_no=0, reason=f"unreadable: {exc.strerror}")


def _head(path: Path) -> str:
    with open(path, "rb") as f:
        return head_of(f.read(HEAD_BYTES))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def state_schema() -> Any:
    """TraceState's Parquet schema without the history column (it is not stored)."""
    import json

    base = schema_for_model(TraceState)
    schema = base.remove(base.get_field_index("messages"))
    meta = dict(base.metadata)
    cols = [c for c in json.loads(meta[b"swemill.json_columns"]) if c != "messages"]
    meta[b"swemill.json_columns"] = json.dumps(cols).encode()
    return schema.with_metadata(meta)


def _approx_bytes(record: BaseModel) -> int:
    if isinstance(record, Trajectory):
        return sum(message_bytes(m) for m in record.messages) + 512
    if isinstance(record, TraceState):
        return message_bytes(record.response) + sum(len(r.content) for r in record.results) + 512
    return 256


class _Shards:
    """The rows of one stage, as parts of up to ``max_rows`` rows or about ``max_bytes`` of
    text, each written a row group (about ``group_bytes``) at a time, so only one row
    group's rows are buffered. A part is closed only between trajectories: the segments
    of one stay in one part, which per-part readers rely on."""

    def __init__(self, store: Store, stage: str, run_id: str, max_rows: int, max_bytes: int,
                 group_bytes: int, schema: Any = None) -> None:
        self.store, self.stage, self.run_id, self.schema = store, stage, run_id, schema
        self.max_rows, self.max_bytes, self.group_bytes = max_rows, max_bytes, group_bytes
        self.rows: list[BaseModel] = []
        self.bytes = self.part_rows = self.part_bytes = 0
        self.part: PartWriter | None = None
        self.written = 0

    def add(self, record: BaseModel) -> None:
        """Take a row (the caller then drops its own reference, so a row group's records go
        as soon as they are in Arrow)."""
        size = _approx_bytes(record)
        boundary = not (isinstance(record, Trajectory) and is_open_segment(record))
        self.rows.append(record)
        self.bytes += size
        self.part_rows, self.part_bytes = self.part_rows + 1, self.part_bytes + size
        del record
        if self.bytes >= self.group_bytes or len(self.rows) >= self.max_rows:
            self._write_group()
        if boundary and (self.part_rows >= self.max_rows or self.part_bytes >= self.max_bytes):
            self.close()

    def _write_group(self) -> None:
        rows, self.rows, self.bytes = self.rows, [], 0
        table = rows_to_table(rows, self.schema)
        del rows  # the buffer was the last holder: the records go before Parquet encoding
        if self.part is None:
            self.part = self.store.open_part(self.stage, self.run_id, f"{self.written:05d}")
        self.part.write(table)

    def close(self) -> None:
        """Finish the part being written, if any."""
        if self.rows:
            self._write_group()
        if self.part is not None:
            self.part.close()
            self.part, self.part_rows, self.part_bytes = None, 0, 0
            self.written += 1

    def abort(self) -> None:
        if self.part is not None:
            part, self.part = self.part, None
            part.abort()


@dataclass(slots=True)
class IngestResult:
    run_id: str
    counts: IngestCounts
    shards: dict[str, int]
    error: str | None = None
    """Why the run is ``failed`` though it ended normally: nothing in the input was usable."""


def nothing_usable(counts: IngestCounts, run_id: str) -> str | None:
    """The reason a run with these counts produced nothing, or None when it produced some."""
    if counts.trajectories:
        return None
    dropped = counts.quarantined + counts.quarantined_files
    where = f"; see quarantine/run_id={run_id}/" if dropped else ""
    return (f"nothing usable in {counts.files} file(s): {counts.lines} line(s) read, "
            f"{counts.quarantined} line(s) and {counts.quarantined_files} file(s) quarantined, "
            f"no conversation found{where}")


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    if isinstance(exc, SwemillError | SystemExit) and lines:  # SystemExit: SIGTERM's message
        return lines[0]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


_HOME_SEGMENT = re.compile(r"^-(?:home|Users)-[^-]+|^-root(?=-|$)")


def shown_path(path: str | Path, roots: list[Path]) -> str:
    """How a file is named in rows and the manifest: relative to the input it was found
    under (``projects/-proj/abc.jsonl``), never an absolute local path; a home directory in a
    Claude Code project folder name (``-home-alice-proj``) becomes ``~``."""
    p = Path(path).absolute()
    for root in sorted((r.absolute() for r in roots), key=lambda r: -len(r.parts)):
        if p == root or root in p.parents:
            p = p.relative_to(root.parent)
            break
    else:
        p = Path(p.name)
    return "/".join(_HOME_SEGMENT.sub("~", part) for part in p.parts)


def relabel(item: TraceState | Trajectory | Quarantine, roots: list[Path]
             ) -> TraceState | Trajectory | Quarantine:
    """``item`` with its file named by :func:`shown_path`."""
    if isinstance(item, Quarantine):
        return item.model_copy(update={"file": shown_path(item.file, roots)})
    if isinstance(item, TraceState):
        return item.model_copy(update={"source_file": shown_path(item.source_file, roots)})
    if item.metadata.get("source_file"):
        meta = dict(item.metadata, source_file=shown_path(item.metadata["source_file"], roots))
        return item.model_copy(update={"metadata": meta})
    return item


def _manifest(run_id: str, paths: list[Path], counts: IngestCounts, status: str,
              error: str | None = None, keep: frozenset[str] = frozenset()) -> RunManifest:
    flat: dict[str, int] = {}
    for name, value in counts:
        if isinstance(value, dict):
            flat.update({f"{name}.{k}": v for k, v in value.items()})
        elif isinstance(value, int):
            flat[name] = value
    return RunManifest(
        run_id=run_id, command="traces ingest",
        source=" ".join(shown_path(p, paths) for p in paths),
        counts={"traces": flat}, cost_usd=counts.cost_usd, status=status,  # type: ignore[arg-type]
        finished_at=None if status == "running" else utcnow(),
        metadata={"scrubbed": Scrubber.active} | ({"error": error} if error else {})
        | ({"scrub_keep": sorted(keep)} if keep else {}),
    )


def ingest(
    paths: list[Path],
    store: Store,
    run_id: str | None = None,
    opts: IngestOptions | None = None,
    *,
    max_rows: int = 2000,
    max_bytes: int = 16 * 1024 * 1024,
    group_bytes: int = 1024 * 1024,
) -> IngestResult:
    """Ingest every trace file under ``paths`` into ``store`` as one run.

    A stage's part ends at ``max_rows`` rows or about ``max_bytes`` of text and is written a
    row group of about ``group_bytes`` at a time; with a session read a segment at a time
    (``IngestOptions.segment_bytes``) this bounds memory whatever the size of the corpus or
    of one file (see ``benchmarks/bench_ingest.py``)."""
    check_paths(paths)  # before anything is written
    run_id = run_id or new_run_id()
    # States are stored without their history: do not build it only to drop it.
    opts = dataclasses.replace(opts or IngestOptions(), state_history=False)
    counts, scrub = IngestCounts(), Scrubber(opts.scrub_keep)
    sinks = {
        TraceState: _Shards(store, STATES, run_id, max_rows, max_bytes, group_bytes,
                            state_schema()),
        Trajectory: _Shards(store, TRAJECTORIES, run_id, max(1, max_rows // 10), max_bytes,
                            group_bytes),
        Quarantine: _Shards(store, QUARANTINE, run_id, max_rows, max_bytes, group_bytes),
    }
    store.write_manifest(_manifest(run_id, paths, counts, "running", keep=opts.scrub_keep))
    try:
        for item in iter_items(paths, counts, opts, scrub):
            if isinstance(item, TraceState):
                # The history is not stored; holding it in the buffer would keep whole
                # sessions alive until the shard is written.
                item = item.model_copy(update={"messages": []})
            item = relabel(item, paths)
            sink = sinks[type(item)]
            sink.add(item)
            del item  # a trajectory segment is freed as soon as it is in Arrow
        for sink in sinks.values():
            sink.close()
    except BaseException as exc:  # any stop, SIGTERM included: the manifest must not say running
        for sink in sinks.values():
            with contextlib.suppress(Exception):  # the first error is the one to report
                sink.abort()
        counts.scrubbed = dict(scrub.counts)
        failed = _manifest(run_id, paths, counts, "failed", _first_line(exc), opts.scrub_keep)
        with contextlib.suppress(SwemillError):  # the store may be what failed: its error wins
            store.write_manifest(failed)
        raise
    counts.scrubbed = dict(scrub.counts)
    error = nothing_usable(counts, run_id)
    store.write_manifest(_manifest(run_id, paths, counts, "failed" if error else "complete",
                                   error, opts.scrub_keep))
    return IngestResult(run_id, counts, {s.stage: s.written for s in sinks.values()}, error)
