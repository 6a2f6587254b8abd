"""Arrow arrays of records' scalar columns, built from their buffers.

``pa.array`` asks, for every Python list it is given, whether the list is a pandas object,
and that question imports pandas (about 50 MB of memory, most of what a small ingest
needs). A record column holds only strings (JSON text included), integers, floats,
booleans or lists of those, whose Arrow layout is simple enough to write directly: a
validity bitmap, offsets and data. Anything else is left to ``pa.array``.
"""

from __future__ import annotations

from array import array
from itertools import accumulate
from typing import Any

import pyarrow as pa

__all__ = ["build_array"]

_NUMBERS = {pa.int64(): ("q", int), pa.float64(): ("d", float)}
_MAX_OFFSET = 2**31 - 1


def _validity(values: list[Any]) -> tuple[pa.Buffer | None, int]:
    nulls = sum(v is None for v in values)
    if not nulls:
        return None, 0
    bits = bytearray((len(values) + 7) // 8)
    for i, v in enumerate(values):
        if v is not None:
            bits[i >> 3] |= 1 << (i & 7)
    return pa.py_buffer(bits), nulls


def _bitmap(flags: list[bool]) -> pa.Buffer:
    bits = bytearray((len(flags) + 7) // 8)
    for i, v in enumerate(flags):
        if v:
            bits[i >> 3] |= 1 << (i & 7)
    return pa.py_buffer(bits)


def _strings(values: list[Any]) -> pa.Array | None:
    encoded = [b"" if v is None else v.encode("utf-8") if isinstance(v, str) else v
               for v in values]
    if not all(isinstance(v, bytes) for v in encoded):
        return None
    offsets = array("q", accumulate((len(v) for v in encoded), initial=0))
    if offsets[-1] > _MAX_OFFSET:
        return None  # past 32-bit offsets: pa.array splits it into chunks
    validity, nulls = _validity(values)
    out = pa.Array.from_buffers(pa.string(), len(values), [
        validity, pa.py_buffer(array("i", offsets)), pa.py_buffer(b"".join(encoded))], nulls)
    if any(isinstance(v, bytes) for v in values):
        out.validate(full=True)  # bytes given as text: UTF-8 checked, as pa.array would
    return out


def _numbers(values: list[Any], kind: pa.DataType) -> pa.Array | None:
    code, cast = _NUMBERS[kind]
    if not all(v is None or (isinstance(v, int | float) and not isinstance(v, bool)
                             and (cast is float or isinstance(v, int))) for v in values):
        return None
    try:
        data = array(code, (cast(0) if v is None else cast(v) for v in values))
    except OverflowError:
        return None  # pa.array raises the error users know for an int past 64 bits
    validity, nulls = _validity(values)
    return pa.Array.from_buffers(kind, len(values), [validity, pa.py_buffer(data)], nulls)


def _bools(values: list[Any]) -> pa.Array | None:
    if not all(v is None or isinstance(v, bool) for v in values):
        return None
    validity, nulls = _validity(values)
    return pa.Array.from_buffers(pa.bool_(), len(values), [validity, _bitmap(values)], nulls)


def _lists(values: list[Any], kind: pa.ListType) -> pa.Array | None:
    if not all(v is None or isinstance(v, list) for v in values):
        return None
    items = [x for v in values if v is not None for x in v]
    child = build_array(items, kind.value_type)
    if child is None:
        return None
    offsets = array("i", accumulate((0 if v is None else len(v) for v in values), initial=0))
    validity, nulls = _validity(values)
    return pa.Array.from_buffers(kind, len(values), [validity, pa.py_buffer(offsets)], nulls,
                                 children=[child])


def build_array(values: list[Any], kind: pa.DataType) -> pa.Array | None:
    """``values`` as an Arrow array of type ``kind`` without ``pa.array``, or None when the
    type or a value is one this module does not handle."""
    if kind == pa.string():
        return _strings(values)
    if kind in _NUMBERS:
        return _numbers(values, kind)
    if kind == pa.bool_():
        return _bools(values)
    if pa.types.is_list(kind) and not pa.types.is_large_list(kind):
        return _lists(values, kind)
    return None
