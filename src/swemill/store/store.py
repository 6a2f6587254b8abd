"""The store: one fsspec path for local disk, ``file://`` and ``s3://`` roots.

Everything goes through ``self.fs``; the only place where backends differ is how a finished
object is made to appear atomically (``_put``): a file system gets a hidden temp file in the
same directory and a rename, an object store gets one PUT, which S3 never shows half-done.
Parquet shards leave a completion marker after the part; readers trust only marked parts, so
a crash leaves at worst an unfinished shard that a rerun redoes.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import secrets
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import fsspec
import pyarrow as pa
from fsspec.implementations.local import LocalFileSystem
from pydantic import BaseModel

from swemill.core.errors import MissingDependency, StoreError, SwemillError
from swemill.core.records import RunManifest, utcnow
from swemill.store import layout
from swemill.store.parquet import bytes_to_table, rows_to_table, table_to_bytes, table_to_rows
from swemill.store.parts import PartWriter

__all__ = ["Store", "check_root", "SCHEMES"]

SCHEMES = ("file", "s3", "s3a")
"""URL schemes a root may have; a root without ``://`` is a local path. Anything else
(``ftp://``, ``memory://``, ``http://``, chained ``a::b`` URLs) is refused: a remote store
swemill does not test, or one that vanishes with the process, would lose a run silently."""


def check_root(root: str) -> str:
    """``root`` if it is a local path, ``file://`` or ``s3://`` URL; else one clear error.

    Pure string work, so commands can call it before anything else happens."""
    if not root or not root.strip():
        raise StoreError("the store root is empty; pass a path or an s3:// URL")
    scheme, sep, _ = root.partition("://")
    if "::" in root or (sep and scheme.lower() not in SCHEMES):
        shown = f"{scheme}://" if sep else root
        raise StoreError(f"unsupported store root {shown}: use a local path, file:// or "
                         "s3://bucket/prefix")
    return root


def _default_options(root: str, given: dict[str, Any] | None) -> dict[str, Any]:
    opts = dict(given or {})
    if root.startswith(("s3://", "s3a://")):
        client = dict(opts.pop("client_kwargs", {}) or {})
        endpoint = (
            opts.pop("endpoint_url", None)
            or os.environ.get("AWS_ENDPOINT_URL_S3")
            or os.environ.get("AWS_ENDPOINT_URL")
        )
        if endpoint and "endpoint_url" not in client:
            client["endpoint_url"] = endpoint
        opts["client_kwargs"] = client
        # Fail in seconds, not minutes, when the endpoint is unreachable.
        opts.setdefault("config_kwargs", {"connect_timeout": 5, "retries": {"max_attempts": 3}})
    return opts


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class Store:
    """A dataset root. Keys are relative, ``/``-separated (see :mod:`swemill.store.layout`)."""

    def __init__(self, root: str, *, storage_options: dict[str, Any] | None = None) -> None:
        self.url = check_root(root)
        self.storage_options = _default_options(root, storage_options)
        try:
            self.fs, path = fsspec.core.url_to_fs(root, **self.storage_options)
        except ImportError as exc:
            raise MissingDependency(
                f"{root}: its file system needs an extra ({exc.name}); "
                "for s3:// install 'swemill[s3]'"
            ) from exc
        except (ValueError, TypeError) as exc:
            raise StoreError(f"cannot open store {root}: {_first_line(exc)}") from exc
        self.root = path.rstrip("/") or "/"
        # File systems rename a finished temp file into place; object stores PUT it whole.
        self._rename_atomic = isinstance(self.fs, LocalFileSystem)
        self._denied: tuple[str, ...] = ()

    @property
    def is_local(self) -> bool:
        """Whether the root is a folder on this machine (others cannot see it)."""
        return self._rename_atomic

    @classmethod
    def open(
        cls, root: str, *, storage_options: dict[str, Any] | None = None, check: bool = True
    ) -> Store:
        """Open a root; with ``check`` prove now that it can be written (one clear error)."""
        store = cls(root, storage_options=storage_options)
        if check:
            store.check_writable()
        return store

    def __repr__(self) -> str:
        return f"Store({self.url!r})"

    def without(self, *prefixes: str) -> Store:
        """The same root with ``prefixes`` unreadable and unwritable (any key under them)."""
        view = copy.copy(self)
        view._denied = self._denied + tuple(p.strip("/") for p in prefixes)
        return view

    def policy_view(self) -> Store:
        """What code working for a policy may use: everything but the oracle's ``golden/``
        and ``candidates/`` (which names the function each task's bug is in)."""
        return self.without("golden", "candidates")

    # -- keys and errors ------------------------------------------------------------------

    def path(self, key: str) -> str:
        key = key.strip("/")
        for prefix in self._denied:
            if key == prefix or key.startswith(prefix + "/"):
                raise StoreError(f"{key} is outside what this view of {self.url} may touch")
        return f"{self.root}/{key}" if key else self.root

    def url_for(self, key: str) -> str:
        """A full URL (``file://...`` or ``s3://...``) other tools can open, e.g. ``datasets``."""
        return self.fs.unstrip_protocol(self.path(key))

    @contextlib.contextmanager
    def _io(self, action: str, key: str) -> Iterator[None]:
        where = self.url_for(key) if key else self.url
        try:
            yield
        except SwemillError:
            raise
        except FileNotFoundError as exc:
            raise StoreError(f"cannot {action} {where}: not found") from exc
        except PermissionError as exc:
            raise StoreError(f"cannot {action} {where}: permission denied") from exc
        except (FileExistsError, NotADirectoryError) as exc:
            raise StoreError(f"cannot {action} {where}: a file is in the way ({exc})") from exc
        except Exception as exc:  # the I/O boundary: s3fs/botocore raise many types
            raise StoreError(f"cannot {action} {where}: {_first_line(exc)}") from exc

    def check_writable(self) -> None:
        probe = f".swemill-probe-{secrets.token_hex(6)}"  # at the root: no folder left behind
        self.put_bytes(probe, b"ok")
        with self._io("clean up", probe):
            self.fs.rm(self.path(probe))

    # -- bytes, text, JSON ----------------------------------------------------------------

    def put_bytes(self, key: str, data: bytes) -> None:
        """Write one object atomically: readers see the old one, the new one, or none."""
        path = self.path(key)
        with self._io("write", key):
            if not self._rename_atomic:
                self.fs.pipe_file(path, data)
                return
            parent, _, name = path.rpartition("/")
            self.fs.makedirs(parent or "/", exist_ok=True)
            tmp = f"{parent}/.{name}.tmp-{secrets.token_hex(4)}"
            try:
                self.fs.pipe_file(tmp, data)
                self.fs.mv(tmp, path)
            finally:
                if self.fs.exists(tmp):
                    self.fs.rm(tmp)

    def get_bytes(self, key: str) -> bytes:
        with self._io("read", key):
            return self.fs.cat_file(self.path(key))

    def exists(self, key: str) -> bool:
        with self._io("look up", key):
            self.fs.invalidate_cache(self.path(key))
            return self.fs.exists(self.path(key))

    def delete(self, key: str, *, recursive: bool = False) -> None:
        if self.exists(key):
            with self._io("delete", key):
                self.fs.rm(self.path(key), recursive=recursive)

    def list_keys(self, prefix: str) -> list[str]:
        """Names directly under ``prefix`` (files and folders), sorted; [] when it is absent."""
        path = self.path(prefix)
        with self._io("list", prefix):
            self.fs.invalidate_cache(path)
            try:
                entries = self.fs.ls(path, detail=False)
            except FileNotFoundError:
                return []
        names = {str(e).rstrip("/").rpartition("/")[2] for e in entries}
        return sorted(n for n in names if n and not n.startswith("."))

    def write_text(self, key: str, text: str) -> None:
        self.put_bytes(key, text.encode("utf-8"))

    def read_text(self, key: str) -> str:
        return self.get_bytes(key).decode("utf-8")

    def write_json(self, key: str, obj: Any) -> None:
        self.write_text(key, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True) + "\n")

    def read_json(self, key: str) -> Any:
        text = self.read_text(key)
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise StoreError(f"{self.url_for(key)} is not valid JSON: {exc}") from exc

    def write_jsonl(self, key: str, rows: Sequence[BaseModel | dict[str, Any]]) -> None:
        """One whole file per call (one per shard); never appended to item by item."""
        lines = [
            r.model_dump_json() if isinstance(r, BaseModel) else json.dumps(r, ensure_ascii=False)
            for r in rows
        ]
        self.write_text(key, "".join(line + "\n" for line in lines))

    def read_jsonl(self, key: str) -> list[Any]:
        out = []
        for n, line in enumerate(self.read_text(key).splitlines(), 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise StoreError(f"{self.url_for(key)} line {n}: not JSON ({exc})") from exc
        return out

    # -- Parquet shards with completion markers -------------------------------------------

    def write_records(
        self,
        stage: str,
        run_id: str,
        shard: str,
        records: Sequence[BaseModel] | Sequence[dict[str, Any]],
        schema: pa.Schema | None = None,
    ) -> dict[str, Any]:
        """Write ``part-<shard>.parquet``, then its marker; returns the marker's content."""
        return self.write_table(stage, run_id, shard, rows_to_table(records, schema))

    def write_table(self, stage: str, run_id: str, shard: str, table: pa.Table) -> dict[str, Any]:
        """:meth:`write_records` for rows already in Arrow (``parquet.rows_to_table``), so a
        caller can let the records go before the Parquet is encoded."""
        data = table_to_bytes(table)
        marker = {
            "shard": shard,
            "rows": table.num_rows,
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "written_at": utcnow(),
        }
        # Drop an old marker first: a crash mid-rewrite must read as unfinished, not stale.
        self.delete(layout.marker_key(stage, run_id, shard))
        self.put_bytes(layout.part_key(stage, run_id, shard), data)
        self.write_json(layout.marker_key(stage, run_id, shard), marker)
        return marker

    def open_part(self, stage: str, run_id: str, shard: str) -> PartWriter:
        """A part written row group by row group (see :mod:`swemill.store.parts`); its marker
        is written by ``close()``, so an abandoned part reads as unfinished."""
        return PartWriter(self, stage, run_id, shard)

    def is_complete(self, stage: str, run_id: str, shard: str) -> bool:
        return self.exists(layout.marker_key(stage, run_id, shard))

    def is_intact(self, stage: str, run_id: str, shard: str) -> bool:
        """Whether the shard's marker and part are both there and the part matches the
        marker's sha256: what a resume may keep. Reads the whole part."""
        try:
            marker = self.read_json(layout.marker_key(stage, run_id, shard))
            data = self.get_bytes(layout.part_key(stage, run_id, shard))
        except StoreError:
            return False
        return isinstance(marker, dict) and hashlib.sha256(data).hexdigest() == marker.get(
            "sha256")

    def drop_shard(self, stage: str, run_id: str, shard: str) -> None:
        """Remove a shard: its marker first (so a crash in between reads as unfinished)."""
        self.delete(layout.marker_key(stage, run_id, shard))
        self.delete(layout.part_key(stage, run_id, shard))

    def pending_shards(self, stage: str, run_id: str, shards: Iterable[str]) -> list[str]:
        """The shards of ``shards`` without a completion marker: what a resumed run redoes."""
        done = set(self.complete_shards(stage, run_id))
        return [s for s in shards if s not in done]

    def complete_shards(self, stage: str, run_id: str) -> list[str]:
        names = self.list_keys(layout.markers_prefix(stage, run_id))
        return [n.removesuffix(".json") for n in names if n.endswith(".json")]

    def list_runs(self, stage: str) -> list[str]:
        """Run ids present under a stage (or ``"manifests"``), oldest first."""
        runs = []
        for name in self.list_keys(stage):
            if name.startswith("run_id="):
                runs.append(name.removeprefix("run_id=").removesuffix(".json"))
        return sorted(runs)

    def _finished_parts(self, stage: str, run_id: str) -> list[tuple[str, dict[str, Any]]]:
        prefix = layout.run_prefix(stage, run_id)
        if not self.list_keys(prefix):
            raise StoreError(f"no run {run_id} under {stage}/ in {self.url}")
        shards = self.complete_shards(stage, run_id)
        if not shards:
            raise StoreError(f"run {run_id} has no finished shards under {stage}/ in {self.url}")
        return [(s, self.read_json(layout.marker_key(stage, run_id, s))) for s in shards]

    def _read_part(self, stage: str, run_id: str, shard: str, marker: dict[str, Any]) -> pa.Table:
        key = layout.part_key(stage, run_id, shard)
        data = self.get_bytes(key)
        if hashlib.sha256(data).hexdigest() != marker.get("sha256"):
            raise StoreError(
                f"corrupt Parquet part {self.url_for(key)}: it does not match its completion "
                "marker; delete the run's shard and rerun with --resume"
            )
        return bytes_to_table(data, self.url_for(key))

    def read_tables(self, stage: str, run_id: str) -> list[tuple[str, pa.Table]]:
        """``(shard, table)`` for every finished shard, in shard order."""
        parts = self._finished_parts(stage, run_id)
        return [(s, self._read_part(stage, run_id, s, m)) for s, m in parts]

    def read_records(
        self, stage: str, run_id: str, model: type[BaseModel] | None = None
    ) -> list[Any]:
        """All rows of the finished shards: models when ``model`` is given, else dicts."""
        rows: list[Any] = []
        for shard, table in self.read_tables(stage, run_id):
            where = self.url_for(layout.part_key(stage, run_id, shard))
            rows.extend(table_to_rows(table, model, where))
        return rows

    def read_shard(
        self, stage: str, run_id: str, shard: str, model: type[BaseModel] | None = None
    ) -> list[Any]:
        """The rows of one finished shard (checked against its marker, like every read)."""
        marker = self.read_json(layout.marker_key(stage, run_id, shard))
        table = self._read_part(stage, run_id, shard, marker)
        return table_to_rows(table, model, self.url_for(layout.part_key(stage, run_id, shard)))

    def part_urls(self, stage: str, run_id: str) -> list[str]:
        """URLs of the finished parts, e.g. for ``datasets.load_dataset("parquet", ...)``."""
        return [
            self.url_for(layout.part_key(stage, run_id, s))
            for s, _ in self._finished_parts(stage, run_id)
        ]

    # -- manifests --------------------------------------------------------------------------

    def write_manifest(self, manifest: RunManifest) -> None:
        self.write_json(layout.manifest_key(manifest.run_id), manifest.model_dump(mode="json"))

    def read_manifest(self, run_id: str) -> RunManifest:
        key = layout.manifest_key(run_id)
        if not self.exists(key):
            raise StoreError(f"no run {run_id} in {self.url} (no {key})")
        return RunManifest.model_validate(self.read_json(key))
