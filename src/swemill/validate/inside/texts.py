"""Small helpers on source texts and paths shared by the inside modules."""

from __future__ import annotations

import hashlib
import io
import os
import resource
import tokenize


def decoded(data: bytes) -> str:
    """Source bytes as the compiler reads them: decoded by their coding cookie (or BOM),
    every line end made ``\\n``. Raises SyntaxError or UnicodeDecodeError when it cannot."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    with io.TextIOWrapper(io.BytesIO(data), encoding, newline=None) as fh:
        return fh.read()


def report_text(source: str) -> str:
    """A decoded source as pytest reads it for a report, the key of the report cache: its
    lines (as :mod:`linecache` reads them), trailing whitespace stripped."""
    return "\n".join(line.rstrip() for line in io.StringIO(source, newline="\n").readlines())


def read_source(path: str) -> str | None:
    """:func:`decoded` of a file; None if unreadable."""
    try:
        with open(path, "rb") as fh:
            return decoded(fh.read())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def is_inside(path: str, root: str) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
