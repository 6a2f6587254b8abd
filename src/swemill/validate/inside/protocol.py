"""The warm server's wire protocol: one JSON object per line, each a typed record with an
``op`` naming its kind and ``v`` the protocol version.

The client writes requests (:class:`Run`, :class:`StartImage`, :class:`RunInImage`,
:class:`Exit`; a grading server :class:`Grade`); the server answers :class:`Ready` once, then
one :class:`ImageReady`, :class:`Result` or :class:`Graded` per request (:class:`Result` with
``unservable`` set when the head image cannot serve a run exactly: nothing ran). A line of
another version, an unknown ``op`` or an unknown field is a :class:`ProtocolError`, never a
guess.

Standard library only, like the rest of :mod:`swemill.validate.inside`.
"""

from __future__ import annotations

import json
import os
import selectors
import time
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing import TypeAlias

VERSION = 1


class ProtocolError(ValueError):
    """A line that is not a record of this protocol version."""


@dataclass
class Flags:
    """Each optimisation of the warm server, switched on (the default) or off. With all off
    every run is a fresh interpreter that imports and collects everything itself: the
    ordinary way, against which the verdicts of the fast paths are compared."""

    fork: bool = True
    """Fork each run from the warmed-up server (off: exec a fresh interpreter per run)."""
    code_cache: bool = True
    """Reuse compiled and assertion-rewritten code by exact source bytes."""
    report_cache: bool = True
    """Reuse parsed modules for failure reports by exact text."""
    head_image: bool = True
    """Serve selected-test runs at head from a process that collected the suite once."""
    hotpatch: bool = True
    """Let the head image serve body-only edits by swapping function code."""
    tree_image: bool = True
    """Serve a tree the head image cannot (an edit of code that ran at import) from a
    process that collected that tree once, when it is run more than once."""

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def off(self) -> list[str]:
        return [name for name in self.names() if not getattr(self, name)]

    @classmethod
    def all_off(cls) -> Flags:
        return cls(**{name: False for name in cls.names()})

    @classmethod
    def without(cls, names: list[str]) -> Flags:
        """All on but ``names``; an unknown name is a :class:`ProtocolError`."""
        unknown = [n for n in names if n not in cls.names()]
        if unknown:
            raise ProtocolError(f"unknown flag {unknown[0]!r}; known: {', '.join(cls.names())}")
        return cls(**{name: name not in names for name in cls.names()})




@dataclass
class Run:
    """Run pytest with ``args`` in a fresh child, within ``timeout`` seconds; ``deadlines``
    and ``cpu_deadlines`` bound single tests (wall / CPU seconds since each started).
    ``cold``: the child is a fresh interpreter (a tree that edits a file the server
    imported itself). ``terse``: outcomes only, failures not formatted (see
    :func:`.forkrun.outcomes_only`). ``maxfail``: stop after that many failures (pytest's
    ``--maxfail``; 0: never). ``cpu_timeout``: the run also ends, timed out, once the child
    has used that many CPU seconds (0: no such limit)."""

    id: int
    args: list[str]
    timeout: float = 60.0
    deadlines: dict[str, float] = field(default_factory=dict)
    cpu_deadlines: dict[str, float] = field(default_factory=dict)
    cold: bool = False
    terse: bool = False
    maxfail: int = 0
    cpu_timeout: float = 0.0
    op: str = "run"
    v: int = VERSION


@dataclass
class StartImage:
    """Fork the head image (the workspace must be the head tree): import the project and
    collect the suite as ``args`` would, then wait for :class:`RunInImage` requests.
    ``tree``: the tree image instead, of the workspace as it is now (any tree; it records
    nothing and swaps no code); the server keeps one of each kind."""

    id: int
    args: list[str]
    timeout: float = 120.0
    tree: bool = False
    op: str = "start_image"
    v: int = VERSION


@dataclass
class RunInImage:
    """Run ``nodeids`` in a fork of the head image; the workspace equals the head tree
    except for the ``hotpatch`` files (workspace-relative ``.py``), whose edited functions
    the fork swaps in. ``whole``: run every item the image collected, in its order (the
    whole suite), instead of ``nodeids``, with the ``hotpatch`` swaps like any run (the host
    asks it on an edited tree only where a selection would stand for the edit: function
    bodies none of which ran outside one test). ``terse``, ``maxfail``, ``cpu_timeout``: as
    :class:`Run`'s.
    ``tree``: run in the tree image (the host asks only while the workspace is the tree it
    collected; ``hotpatch`` must be empty)."""

    id: int
    nodeids: list[str]
    hotpatch: list[str] = field(default_factory=list)
    timeout: float = 60.0
    deadlines: dict[str, float] = field(default_factory=dict)
    cpu_deadlines: dict[str, float] = field(default_factory=dict)
    whole: bool = False
    terse: bool = False
    maxfail: int = 0
    tree: bool = False
    cpu_timeout: float = 0.0
    op: str = "run_in_image"
    v: int = VERSION


@dataclass
class Grade:
    """A grading run (only a server started with ``--grade``): pytest with ``args`` in a
    fork whose environment is the server's plus ``env``, its stdout and stderr captured
    (``output_bytes`` each, head and tail kept); whatever the run left is then ended (every
    descendant, the ``scratch`` directories' contents, System V IPC objects), so nothing of
    one run reaches the next. ``disk_mb``: the workspace's cap, polled while it runs."""

    id: int
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 900.0
    scratch: list[str] = field(default_factory=list)
    disk_mb: int | None = None
    output_bytes: int = 1_000_000
    nice: int = 0
    """Added to the run's scheduling niceness (the server's own stays as it is)."""
    op: str = "grade"
    v: int = VERSION


@dataclass
class Graded:
    """What one :class:`Grade` did. ``clean``: nothing of the run is left (else the server
    must not serve another run)."""

    id: int
    exit_code: int = -1
    timed_out: bool = False
    over_disk: bool = False
    stdout: str = ""
    stderr: str = ""
    truncated: bool = False
    wall_s: float = 0.0
    cpu_s: float = 0.0
    clean: bool = True
    op: str = "graded"
    v: int = VERSION


@dataclass
class Exit:
    id: int = 0
    op: str = "exit"
    v: int = VERSION


@dataclass
class Ready:
    """The server's first line: warmed up (or why not)."""

    ready: bool
    startup_s: float = 0.0
    pid: int = 0
    preloaded: list[str] = field(default_factory=list)
    """Workspace files the server imported itself: a tree that edits one must run cold."""
    flags_off: list[str] = field(default_factory=list)
    error: str = ""
    op: str = "ready"
    v: int = VERSION


@dataclass
class ImageReady:
    id: int
    ready: bool
    items: int = 0
    collect_errors: int = 0
    startup_s: float = 0.0
    cpu_s: float = 0.0
    error: str = ""
    op: str = "image_ready"
    v: int = VERSION


@dataclass
class Result:
    """What one run did: per-test outcomes, the exit code the process itself gave, the log's
    tail. ``unservable``: the head image could not serve the run exactly and nothing ran
    (``log_tail`` says what it was about)."""

    id: int
    exit_code: int = -1
    timed_out: bool = False
    outcomes: dict[str, str] = field(default_factory=dict)
    durations: dict[str, float] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    log_tail: str = ""
    wall_s: float = 0.0
    cpu_s: float = 0.0
    hung: str | None = None
    """The test that ran past its own deadline (the run was then killed: timed out)."""
    cached_asts: int = 0
    hotpatched: int | None = None
    """Served by the head image: how many live functions took the edited code."""
    unservable: str | None = None
    op: str = "result"
    v: int = VERSION


if TYPE_CHECKING:  # annotations only: the server runs under the repository's Python
    Request: TypeAlias = Run | StartImage | RunInImage | Grade | Exit
    Reply: TypeAlias = Ready | ImageReady | Result | Graded
    Message: TypeAlias = Request | Reply
_KINDS: dict[str, type[Any]] = {cls.op: cls for cls in  # type: ignore[attr-defined]
                                (Run, StartImage, RunInImage, Grade, Exit, Ready, ImageReady,
                                 Result, Graded)}


def refusal(rid: int, reason: str, detail: str = "") -> Result:
    """The head image's answer when it cannot serve a run exactly (nothing ran)."""
    return Result(id=rid, unservable=reason, log_tail=detail or reason)


def encode(message: Message) -> bytes:
    return (json.dumps(asdict(message)) + "\n").encode()


def decode(line: bytes | str) -> Message:
    """The record on one line; :class:`ProtocolError` for anything else."""
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise ProtocolError(f"not JSON: {line[:200]!r}") from exc
    if not isinstance(data, dict):
        raise ProtocolError(f"not a JSON object: {line[:200]!r}")
    if data.get("v") != VERSION:
        raise ProtocolError(f"protocol version {data.get('v')!r}, expected {VERSION}")
    kind = _KINDS.get(str(data.get("op")))
    if kind is None:
        raise ProtocolError(f"unknown op {data.get('op')!r}")
    try:
        return kind(**data)  # type: ignore[no-any-return]
    except TypeError as exc:
        raise ProtocolError(f"bad {data['op']} record: {exc}") from exc


class Lines:
    """Records over a pipe, with a deadline per line."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = b""

    def read(self, timeout: float | None = None) -> Message | None:
        """The next record; None at end of file or when ``timeout`` passes first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self.fd, selectors.EVENT_READ)
            while b"\n" not in self.buf:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and (left <= 0 or not sel.select(left)):
                    return None
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    return None
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return decode(line)


def write(fd: int, message: Message) -> None:
    data = encode(message)
    while data:
        data = data[os.write(fd, data):]
