"""Streaming JSONL: one record at a time, with a ceiling on the length of a line.

A line longer than ``max_line_bytes`` is never held whole: it is read in pieces of at most
that size and thrown away, and only its first bytes are kept for the quarantine row. So the
memory a file costs is bounded by the ceiling, whatever the file's size or shape.
Every line that is not a JSON object — too long, not UTF-8, truncated, not JSON, JSON
that is not an object, or nested deeper than :data:`MAX_DEPTH` — becomes a
:class:`Quarantine` row with its file and line number. Depth matters because everything
after parsing (validation, serialisation) recurses once per level: a line nested 200,000
deep used to end the whole run in ``RecursionError``.
"""

from __future__ import annotations

import errno
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swemill.traces.states import Quarantine

__all__ = ["DEFAULT_MAX_LINE_BYTES", "HEAD_BYTES", "MAX_DEPTH", "Line", "LineReader",
           "head_of", "iter_lines", "iter_records"]

DEFAULT_MAX_LINE_BYTES = 32 * 1024 * 1024
HEAD_BYTES = 200
MAX_DEPTH = 100
"""Deepest nesting of objects and arrays a record may have; real session records stay
under 20 (tool inputs included)."""
_READ_BUFFER = 1 << 20


def _deeper_than(obj: Any, limit: int) -> bool:
    """Whether ``obj`` nests containers more than ``limit`` deep (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        children = value.values() if isinstance(value, dict) else value
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def head_of(data: bytes) -> str:
    return data[:HEAD_BYTES].decode("utf-8", errors="replace")


def _quarantine(path: Path, line_no: int, reason: str, data: bytes, size: int) -> Quarantine:
    return Quarantine(file=str(path), line_no=line_no, reason=reason, head=head_of(data), size=size)


def _skip_rest(f: Any, limit: int) -> int:
    """Read and drop the rest of an over-long line; returns how many bytes were dropped."""
    dropped = 0
    while True:
        piece = f.readline(limit)
        dropped += len(piece)
        if not piece or piece.endswith(b"\n"):
            return dropped


def _decode(path: Path, line_no: int, raw: bytes) -> dict[str, Any] | Quarantine:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _quarantine(path, line_no, f"invalid UTF-8 at byte {exc.start}", raw, len(raw))
    too_deep = f"nested deeper than {MAX_DEPTH} levels"
    try:
        obj = json.loads(text)
    except RecursionError:  # the parser itself gave up, far past MAX_DEPTH
        return _quarantine(path, line_no, too_deep, raw, len(raw))
    except json.JSONDecodeError as exc:
        cut = (not raw.endswith(b"\n") or exc.pos >= len(text.rstrip())
               or exc.msg.startswith("Unterminated string"))
        reason = "truncated JSON" if cut else f"not JSON: {exc.msg}"
        return _quarantine(path, line_no, reason, raw, len(raw))
    if not isinstance(obj, dict):
        reason = f"JSON {type(obj).__name__}, not an object"
        return _quarantine(path, line_no, reason, raw, len(raw))
    # Counting brackets is cheap and bounds the depth from above: most lines stop here.
    if raw.count(b"{") + raw.count(b"[") > MAX_DEPTH and _deeper_than(obj, MAX_DEPTH):
        return _quarantine(path, line_no, too_deep, raw, len(raw))
    return obj


def iter_records(
    path: Path, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> Iterator[tuple[int, dict[str, Any] | Quarantine]]:
    """``(line_no, record or Quarantine)`` for every non-blank line of a JSONL file."""
    for line in iter_lines(path, max_line_bytes):
        yield line.line_no, line.record


@dataclass(frozen=True, slots=True)
class Line:
    line_no: int
    offset: int
    """Where the line starts in the file, so a reader can come back for it (:func:`read_at`)."""
    size: int
    record: dict[str, Any] | Quarantine


def iter_lines(path: Path, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Iterator[Line]:
    """:func:`iter_records` with each line's place in the file."""
    with open(path, "rb", buffering=_READ_BUFFER) as f:
        line_no = offset = 0
        while True:
            raw = f.readline(max_line_bytes + 1)
            if not raw:
                return
            line_no += 1
            start, offset = offset, offset + len(raw)
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                size = len(raw) + _skip_rest(f, max_line_bytes)
                offset = start + size
                reason = f"line longer than {max_line_bytes} bytes ({size} bytes)"
                yield Line(line_no, start, size, _quarantine(path, line_no, reason, raw, size))
                continue
            if not raw.strip():
                continue
            yield Line(line_no, start, len(raw), _decode(path, line_no, raw))


class LineReader:
    """Reads records back by place: a second pass over a file already checked line by line
    (so the lines parse), holding one record at a time instead of the whole file."""

    def __init__(self, path: Path) -> None:
        self._f = open(path, "rb")  # noqa: SIM115 (closed by close() / the with block)

    def __enter__(self) -> LineReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._f.close()

    def read_at(self, offset: int, size: int) -> dict[str, Any]:
        self._f.seek(offset)
        try:
            record = json.loads(self._f.read(size))
        except ValueError:
            record = None
        if not isinstance(record, dict):  # rewritten since the first pass read it
            raise OSError(errno.ESTALE, "the file changed while it was being read")
        return record
