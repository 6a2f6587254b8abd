"""One Parquet part written a row group at a time, then its completion marker.

:meth:`Store.write_table` encodes a whole part in memory; a part that must hold more than
should be in memory at once (every row of a long session, which readers expect in one part)
is written through a :class:`PartWriter` instead: each :meth:`~PartWriter.write` adds one
row group and frees it, the bytes go to the file (a hidden temp file renamed into place on a
file system, one upload that appears when complete on an object store) and are hashed on
the way, and :meth:`~PartWriter.close` writes the same marker ``write_table`` writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from swemill.core.records import utcnow
from swemill.store import layout
from swemill.store.parquet import parquet_options

if TYPE_CHECKING:
    from swemill.store.store import Store

__all__ = ["PartWriter"]


class _Hashing:
    """A writable file that hashes and counts what goes through it."""

    def __init__(self, raw: Any) -> None:
        self.raw, self.sha, self.size, self.closed = raw, hashlib.sha256(), 0, False
        self.dropping = False
        """Set when the part is abandoned: the writer's last bytes go nowhere."""

    def write(self, data: Any) -> int:
        view = memoryview(data)
        if self.dropping:
            return view.nbytes
        self.sha.update(view)
        self.size += view.nbytes
        self.raw.write(view)
        return view.nbytes

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        self.raw.flush()

    def close(self) -> None:
        self.closed = True  # the raw file is closed by the writer's owner, after the footer


class PartWriter:
    """``part-<shard>.parquet`` of ``stage``/``run_id``, one row group per :meth:`write`."""

    def __init__(self, store: Store, stage: str, run_id: str, shard: str) -> None:
        self.store, self.stage, self.run_id, self.shard = store, stage, run_id, shard
        self.rows = 0
        self._key = layout.part_key(stage, run_id, shard)
        self._writer: pq.ParquetWriter | None = None
        path = store.path(self._key)
        parent, _, name = path.rpartition("/")
        # On a file system the part is built under a hidden name and renamed into place;
        # an object store shows an upload only once it is complete.
        self._tmp = f"{parent}/.{name}.tmp-{secrets.token_hex(4)}" if store.is_local else None
        store.delete(layout.marker_key(stage, run_id, shard))  # a rewrite reads as unfinished
        with store._io("write", self._key):
            if store.is_local:
                store.fs.makedirs(parent or "/", exist_ok=True)
            self._raw = store.fs.open(self._tmp or path, "wb")
        self._file = _Hashing(self._raw)

    def write(self, table: pa.Table) -> None:
        """Add ``table``'s rows as one row group (the first table sets the schema)."""
        with self.store._io("write", self._key):
            if self._writer is None:
                self._writer = pq.ParquetWriter(self._file, table.schema,
                                                **parquet_options(table.schema))
            self._writer.write_table(table, row_group_size=max(1, table.num_rows))
        self.rows += table.num_rows

    def close(self, schema: pa.Schema | None = None) -> dict[str, Any]:
        """Finish the part and write its marker (an empty part needs ``schema``)."""
        with self.store._io("write", self._key):
            if self._writer is None:
                if schema is None:
                    raise ValueError("an empty part needs its schema")
                self._writer = pq.ParquetWriter(self._file, schema, **parquet_options(schema))
            self._writer.close()
            self._raw.close()
            if self._tmp is not None:
                self.store.fs.mv(self._tmp, self.store.path(self._key))
        marker = {"shard": self.shard, "rows": self.rows, "bytes": self._file.size,
                  "sha256": self._file.sha.hexdigest(), "written_at": utcnow()}
        self.store.write_json(layout.marker_key(self.stage, self.run_id, self.shard), marker)
        return marker

    def abort(self) -> None:
        """Leave no part behind (the marker was never written)."""
        self._file.dropping = True
        if self._writer is not None:
            with contextlib.suppress(Exception):  # its footer goes nowhere; only free it
                self._writer.close()
        discard = getattr(self._raw, "discard", None)
        if self._tmp is None and discard is not None:
            discard()  # an object store drops the upload instead of completing it
            self._raw.closed = True
            return
        self._raw.close()
        if self._tmp is not None and self.store.fs.exists(self._tmp):
            self.store.fs.rm(self._tmp)
