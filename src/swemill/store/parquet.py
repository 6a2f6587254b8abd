"""How typed records and plain rows become Arrow tables, and back.

Two shapes are supported:

* **pydantic records** (``Task``, ``Trajectory``, ...): scalar fields (and lists of scalars)
  become native Arrow columns so they can be filtered and queried anywhere; nested models,
  dicts and lists of models become JSON text columns, named in the file's metadata
  (``swemill.json_columns``) and decoded on read. Discriminated unions and free-form
  ``metadata`` dicts have no stable Arrow type, and JSON keeps the round trip exact.
* **plain dict rows** (the SFT/DPO corpus): written with full nested Arrow types, inferred by
  pyarrow or given as an explicit schema, so ``datasets.load_dataset("parquet")`` sees
  ``messages`` as a list of structs.
"""

from __future__ import annotations

import io
import json
import os
import struct
import types
from collections.abc import Sequence
from typing import Any, Literal, Union, get_args, get_origin

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from swemill.core.errors import StoreError
from swemill.store.arrays import build_array

__all__ = ["schema_for_model", "rows_to_table", "table_to_rows", "table_to_bytes", "bytes_to_table",
           "read_parquet", "parquet_options"]

JSON_COLUMNS_KEY = b"swemill.json_columns"
MODEL_KEY = b"swemill.model"

_SCALARS: dict[type, pa.DataType] = {
    bool: pa.bool_(),
    int: pa.int64(),
    float: pa.float64(),
    str: pa.string(),
}


def _scalar_type(annotation: Any) -> pa.DataType | None:
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    if get_origin(annotation) is Literal:
        kinds = {type(v) for v in get_args(annotation)}
        return _SCALARS.get(kinds.pop()) if len(kinds) == 1 else None
    return None


def _arrow_type(annotation: Any) -> pa.DataType | None:
    """The native Arrow type for a field, or None when it is stored as JSON text."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        rest = [a for a in get_args(annotation) if a is not type(None)]
        return _arrow_type(rest[0]) if len(rest) == 1 else None
    if origin is list:
        (item,) = get_args(annotation) or (Any,)
        inner = _scalar_type(item)
        return pa.list_(inner) if inner is not None else None
    return _scalar_type(annotation)


def schema_for_model(model: type[BaseModel]) -> pa.Schema:
    """The Arrow schema a model's rows are written with (JSON columns named in metadata)."""
    fields, json_cols = [], []
    for name, info in model.model_fields.items():
        key = info.alias or name
        native = _arrow_type(info.annotation)
        if native is None:
            json_cols.append(key)
        fields.append(pa.field(key, native if native is not None else pa.string()))
    meta = {JSON_COLUMNS_KEY: json.dumps(json_cols).encode(), MODEL_KEY: model.__name__.encode()}
    return pa.schema(fields, metadata=meta)


def _json_columns(schema: pa.Schema) -> list[str]:
    raw = (schema.metadata or {}).get(JSON_COLUMNS_KEY)
    return json.loads(raw) if raw else []


def _storage_type(t: pa.DataType) -> pa.DataType:
    if isinstance(t, pa.BaseExtensionType):
        return _storage_type(t.storage_type)
    if pa.types.is_struct(t):
        return pa.struct([_storage_field(t.field(i)) for i in range(t.num_fields)])
    if pa.types.is_large_list(t):
        return pa.large_list(_storage_field(t.value_field))
    if pa.types.is_list(t):
        return pa.list_(_storage_field(t.value_field))
    return t


def _storage_field(f: pa.Field) -> pa.Field:
    return pa.field(f.name, _storage_type(f.type), f.nullable, f.metadata)


def _has_extension(schema: pa.Schema) -> bool:
    return any(_storage_type(f.type) != f.type for f in schema)


def rows_to_table(
    rows: Sequence[BaseModel] | Sequence[dict[str, Any]], schema: pa.Schema | None = None
) -> pa.Table:
    """One Arrow table from records of one model, or from plain dicts (nested types kept)."""
    models = {type(r) for r in rows if isinstance(r, BaseModel)}
    if models and (len(models) > 1 or len(models) != len({type(r) for r in rows})):
        raise StoreError("a shard holds rows of one kind: one pydantic model or plain dicts")
    if not models:
        try:
            if schema is not None and _has_extension(schema):
                # pyarrow cannot build extension arrays (e.g. pa.json_()) from Python objects:
                # build the storage types, then cast (a no-copy relabel).
                storage = pa.schema([_storage_field(f) for f in schema], metadata=schema.metadata)
                table = pa.Table.from_pylist(list(rows), schema=storage)  # type: ignore[arg-type]
                return table.cast(schema)
            return pa.Table.from_pylist(list(rows), schema=schema)  # type: ignore[arg-type]
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise StoreError(f"rows do not fit one Arrow schema: {exc}") from exc
    model = models.pop()
    schema = schema or schema_for_model(model)
    return _records_table(rows, model, schema)  # type: ignore[arg-type]


def _records_table(rows: Sequence[BaseModel], model: type[BaseModel], schema: pa.Schema
                   ) -> pa.Table:
    """Column by column. A JSON column's text comes straight from pydantic's serializer (the
    same text as ``json.dumps`` of the JSON-mode dump, without building that dump's dicts),
    and each column's Python values are dropped once Arrow holds them: a record holding a
    whole long session is held about twice, not five times."""
    names = {info.alias or name: name for name, info in model.model_fields.items()}
    json_keys = {c for c in _json_columns(schema) if c in names}
    skip = {names[c] for c in json_keys}
    columns: dict[str, list[Any]] = {f.name: [] for f in schema}
    for record in rows:
        row = record.model_dump(mode="json", by_alias=True, exclude=skip)
        for key, values in columns.items():
            values.append(_json_cell(record, names[key], key) if key in json_keys
                          else row.get(key))
    arrays = [_array(columns.pop(f.name), f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def _json_cell(record: BaseModel, name: str, key: str) -> bytes:
    # b'{"<key>":<value>}': the serializer's own text for one field, braces and key cut off
    text: bytes = record.__pydantic_serializer__.to_json(record, include={name}, by_alias=True)
    return text[len(key) + 4 : -1]


def _array(values: list[Any], kind: pa.DataType) -> pa.Array:
    if len(values) == 1 and isinstance(values[0], bytes) and kind == pa.string():
        # one (possibly huge) JSON text: Arrow uses the bytes in place instead of a copy
        data = values[0]
        offsets = pa.py_buffer(struct.pack("<ii", 0, len(data)))
        array = pa.StringArray.from_buffers(1, offsets, pa.py_buffer(data))
        array.validate(full=True)  # UTF-8 checked, as pa.array would
        return array
    built = build_array(values, kind)
    return built if built is not None else pa.array(values, type=kind)


def table_to_rows(
    table: pa.Table, model: type[BaseModel] | None, where: str
) -> list[BaseModel] | list[dict[str, Any]]:
    """Rows back from a table: JSON columns decoded; validated into ``model`` when given."""
    json_cols = _json_columns(table.schema)
    rows = table.to_pylist()
    try:
        for row in rows:
            for col in json_cols:
                if row.get(col) is not None:
                    row[col] = json.loads(row[col])
        if model is None:
            return rows
        return [model.model_validate(row) for row in rows]
    except (json.JSONDecodeError, PydanticValidationError) as exc:
        first = str(exc).splitlines()[0]
        kind = getattr(model, "__name__", "JSON")
        raise StoreError(f"{where}: rows do not match {kind}: {first}") from exc


def parquet_options(schema: pa.Schema) -> dict[str, Any]:
    """How every part is written: zstd, and no min/max statistics for JSON text: no reader
    filters on them, and for a cell holding a long session the writer's copies of min and
    max cost several times the cell."""
    json_cols = set(_json_columns(schema))
    stats = [n for n in schema.names if n not in json_cols] if json_cols else True
    return {"compression": "zstd", "write_statistics": stats or False}


def table_to_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, **parquet_options(table.schema))
    return buf.getvalue()


def read_parquet(source: bytes | str | os.PathLike[str]) -> pa.Table:
    """Read one Parquet file (its bytes or a local path) on the calling thread.

    ``pq.read_table`` goes through pyarrow's dataset layer, which starts its CPU and I/O
    thread pools; a process with those pools running aborts at exit now and then
    (``terminate called without an active exception``, status -6) while they are torn down,
    after its work is done and its output written. Reading the file directly, without
    threads, starts none: the parts swemill writes are small and decode as fast this way.
    """
    file = pa.BufferReader(source) if isinstance(source, bytes) else os.fspath(source)
    return pq.ParquetFile(file).read(use_threads=False)


def bytes_to_table(data: bytes, where: str) -> pa.Table:
    try:
        return read_parquet(data)
    except (pa.ArrowException, OSError) as exc:
        raise StoreError(f"corrupt Parquet part {where}: {str(exc).splitlines()[0]}") from exc
