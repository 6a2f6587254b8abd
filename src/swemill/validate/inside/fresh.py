"""What a fresh interpreter has that a fork of a warm server must be given: its standard
streams as Python's start-up makes them, and its way out (threads, ``atexit``, the streams
flushed). The grading server's runs use both (:mod:`.grade`)."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

__all__ = ["fresh_stdio", "interpreter_exit"]

_SERVER_STDIO: list[Any] = []
"""The server's own standard streams, held so that collecting them never closes fds 0-2."""


def fresh_stdio() -> None:
    """``sys.stdin``/``stdout``/``stderr`` (and their ``__x__``) as a fresh interpreter makes
    them over fds 0-2: the server's were made under ``-u`` (unbuffered, write-through); a
    fresh one's stdout is block-buffered and its stderr line-buffered, neither write-through."""
    import io

    for fd, name, mode in ((0, "stdin", "rb"), (1, "stdout", "wb"), (2, "stderr", "wb")):
        old = getattr(sys, "__" + name + "__")
        _SERVER_STDIO.append(old)
        stream = io.TextIOWrapper(open(fd, mode, closefd=False),  # noqa: SIM115
                                  encoding=old.encoding,
                                  errors=old.errors, newline="\n",
                                  line_buffering=name == "stderr")
        setattr(sys, name, stream)
        setattr(sys, "__" + name + "__", stream)


def interpreter_exit(code: int) -> int:
    """What a fresh interpreter does on its way out: wait for its threads, run ``atexit``
    (which may itself end the process), flush the standard streams."""
    import atexit
    import threading

    with contextlib.suppress(BaseException):
        shutdown = getattr(threading, "_shutdown", None)
        if shutdown is not None:
            shutdown()
    try:
        atexit._run_exitfuncs()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: S110 - an atexit error does not change the status
        pass
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    return code
