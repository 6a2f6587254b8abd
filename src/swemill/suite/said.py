"""What a test run said, in one line: pytest's exit codes, the signal that ended a process,
the line of a run's output that best says what went wrong.

Pure text work. The suite uses it for a run that ended without pytest's summary; the
validator (:mod:`swemill.validate.explain`) for every candidate it refuses.
"""

from __future__ import annotations

import re
import signal

__all__ = ["PYTEST_EXIT", "EXCEPTION_LINE", "signal_name", "exit_meaning", "one_line",
           "first_error"]

EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)?(Error|Exception|Warning|Exit|Interrupt)\b:?")
"""An exception's own line (``ValueError: ...``)."""

PYTEST_EXIT = {
    0: "all tests passed",
    1: "some tests failed",
    2: "interrupted",
    3: "internal error",
    4: "usage error: the command line or the test configuration",
    5: "no tests collected",
}
"""What pytest's own exit codes mean (``pytest.ExitCode``)."""

_LINE_MAX = 240
_ELAPSED = re.compile(r" in \d+(\.\d+)?s\b")
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")
_FRAME = re.compile(r'", line \d+(, in | in )\S+$')


def signal_name(exit_code: int) -> str:
    """``SIGSEGV`` for exit 139 (a shell's 128 + n, as bwrap reports it) or -11 (Python's),
    else ""."""
    n = exit_code - 128 if exit_code > 128 else -exit_code
    try:
        return signal.Signals(n).name
    except ValueError:
        return ""


def exit_meaning(code: int) -> str:
    """``"pytest exit 4 (usage error: ...)"``, or the signal that killed the process."""
    if code < 0:
        name = signal_name(code) or f"signal {-code}"
        why = " (the sandbox's memory limit, or a timeout)" if -code == signal.SIGKILL else ""
        return f"killed by {name}{why}"
    if code in PYTEST_EXIT:
        return f"pytest exit {code} ({PYTEST_EXIT[code]})"
    return f"exit {code} (not a pytest exit code: the code under test ended the process)"


def one_line(text: str) -> str:
    """``text`` on one line, at most 240 characters, with clock readings and object addresses
    masked (so a rerun writes the same line)."""
    text = _ADDRESS.sub("0x…", _ELAPSED.sub("", " ".join(text.split())))
    return text if len(text) <= _LINE_MAX else text[: _LINE_MAX - 1] + "…"


def first_error(text: str) -> str:
    """The line of ``text`` that best says what went wrong: the first line pytest marks with
    ``E`` (the first exception line among them, when they quote a traceback), else a fatal
    error's first line, else the last exception line of a traceback, else
    a line pytest starts with ``ERROR:``, else the last line that is not a stack frame; ""
    for empty text."""
    lines = [ln.rstrip().removeprefix("INTERNALERROR> ") for ln in text.splitlines() if ln.strip()]
    marked = [ln[1:].strip() for ln in lines if ln.startswith("E ") and ln[1:].strip()]
    for ln in marked:  # an exception's own line, where the marked lines quote a traceback
        if EXCEPTION_LINE.match(ln):
            return one_line(ln)
    if marked:
        return one_line(marked[0])
    for ln in lines:
        if ln.startswith("Fatal Python error"):  # faulthandler: the frames below say little
            return one_line(ln)
    for ln in reversed(lines):
        if EXCEPTION_LINE.match(ln.strip()):
            return one_line(ln)
    for ln in lines:
        if ln.startswith("ERROR:"):
            return one_line(ln)
    rest = [ln for ln in lines if not _FRAME.search(ln) and not ln.startswith("Current thread")]
    return one_line(rest[-1]) if rest else ""
