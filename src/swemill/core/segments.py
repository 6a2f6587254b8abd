"""A trajectory stored as several rows (segments), and joined back into one.

An imported session can be far longer than any row should be: 200 MB of session log is
tens of MB of messages, which as one Parquet cell costs several times that to write and to
read. ``swemill traces ingest`` therefore stores a long trajectory as consecutive rows of
the ``trajectories`` table, each holding the next run of messages (about
``IngestOptions.segment_bytes`` of text) and ``metadata.segment`` (0, 1, ...); the last row
also holds ``metadata.segments`` (how many there are) and every field of the trajectory
(usage, policy, metadata), which only the end of the session settles. A trajectory that
fits in one segment is one ordinary row, without these keys.

Every reader of the table joins the segments with :func:`join_segments`, so what it gets is
the same as if the session had been stored whole.
"""

from __future__ import annotations

from collections.abc import Iterable

from swemill.core.errors import StoreError
from swemill.core.records import Trajectory

__all__ = ["SEGMENT", "SEGMENTS", "join_segments", "is_open_segment"]

SEGMENT = "segment"
"""``metadata`` key of a segment row: its place, from 0."""
SEGMENTS = "segments"
"""``metadata`` key of the last segment row: how many rows the trajectory has."""


def is_open_segment(t: Trajectory) -> bool:
    """A segment row that more rows of the same trajectory follow."""
    return SEGMENT in t.metadata and SEGMENTS not in t.metadata


def _joined(rows: list[Trajectory]) -> Trajectory:
    last = rows[-1]
    meta = {k: v for k, v in last.metadata.items() if k not in (SEGMENT, SEGMENTS)}
    messages = [m for row in rows for m in row.messages]
    return last.model_copy(update={"messages": messages, "metadata": meta})


def join_segments(rows: Iterable[Trajectory]) -> list[Trajectory]:
    """``rows`` with each segmented trajectory joined into one, where its last row was.

    Segments must come in order and complete (the writer puts them consecutively in one
    part); anything else is a damaged store and one clear error."""
    out: list[Trajectory] = []
    open_: dict[str, list[Trajectory]] = {}
    for row in rows:
        k = row.metadata.get(SEGMENT)
        if k is None:
            out.append(row)
            continue
        have = open_.setdefault(row.trajectory_id, [])
        if k != len(have):
            raise StoreError(f"trajectory {row.trajectory_id}: segment {k} where segment "
                             f"{len(have)} was expected (a damaged or mixed store)")
        have.append(row)
        if SEGMENTS in row.metadata:
            del open_[row.trajectory_id]
            if row.metadata[SEGMENTS] != len(have):
                raise StoreError(f"trajectory {row.trajectory_id}: its last segment says "
                                 f"{row.metadata[SEGMENTS]} segments, {len(have)} were read")
            out.append(_joined(have))
    if open_:
        raise StoreError(f"trajectory {next(iter(open_))}: its last segment is missing")
    return out
