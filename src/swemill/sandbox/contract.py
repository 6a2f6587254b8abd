"""The Sandbox protocol and the values it speaks: limits, binds, exec results.

A sandbox runs commands against one *workspace* (a directory on the host). Inside an isolating
backend the workspace always appears at :data:`WORKSPACE`, whatever its host path, so that one
read-only environment (with the project installed in development mode at that path) serves
every workspace and every fork of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, Self, runtime_checkable

if TYPE_CHECKING:
    from swemill.sandbox._spawn import Spawned

__all__ = [
    "WORKSPACE",
    "KilledReason",
    "Limits",
    "Bind",
    "ExecResult",
    "Sandbox",
]

WORKSPACE = "/workspace"
"""Where the workspace appears inside an isolating sandbox."""

KilledReason = Literal["timeout", "memory", "pids", "file_size", "disk", "signal"]


@dataclass(slots=True, frozen=True)
class Limits:
    """Resource limits for one command. ``None`` means no limit of that kind."""

    timeout_s: float = 60.0
    """Wall-clock limit; on expiry the whole process tree is killed."""
    memory_mb: int | None = 4096
    pids: int | None = 1024
    file_size_mb: int | None = 1024
    disk_mb: int | None = 4096
    """What the workspace may hold in total: a plain directory's whole size, an overlay fork's
    own writes. Polled while the command runs; over it, the tree is killed (``disk``)."""
    output_bytes: int = 1_000_000
    """Per stream; past it the head and the tail are kept and the middle is dropped."""
    net: bool = False
    """Share the host network (only for environment builds that must reach a registry)."""


@dataclass(slots=True, frozen=True)
class Bind:
    """A host path made visible inside the sandbox (read-only unless ``writable``)."""

    host: Path
    inside: str
    writable: bool = False


@dataclass(slots=True)
class ExecResult:
    """What one command did. Produced by a sandbox, judged elsewhere."""

    exit_code: int
    timed_out: bool
    killed_reason: KilledReason | None
    stdout: str
    stderr: str
    wall_s: float
    truncated: bool = False
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.killed_reason is None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@runtime_checkable
class Sandbox(Protocol):
    """Runs commands against one workspace. Backends: bwrap, docker, local."""

    @property
    def workspace(self) -> Path:
        """The workspace's host path (a real directory, also for forks)."""
        ...

    workdir: str
    """Where the workspace appears to the commands (``/workspace`` when isolated)."""
    limits: Limits
    can_spawn: bool
    """Whether :meth:`spawn` can start a long-lived process here (validation then keeps a warm
    pytest server in the sandbox; otherwise every test run is a cold ``exec``)."""

    def exec(
        self,
        cmd: Sequence[str] | str,
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        """Run ``cmd`` (argv, or a string for ``bash -c``) and return its result."""
        ...

    def spawn(self, cmd: Sequence[str] | str, *, env: Mapping[str, str] | None = None,
              cwd: str | None = None) -> Spawned:
        """Start a long-lived ``cmd`` with pipes, under the sandbox's isolation and limits
        but no wall clock (only where :attr:`can_spawn`)."""
        ...

    def keep_warm(self, *, wait: bool = False) -> bool:
        """Run later commands in one long-lived sandbox, each forked inside it, where the
        backend can do so with every guarantee of a sandbox per command (bwrap); returns
        whether it will (``wait``: waits until that sandbox is up). It starts in the
        background (a command waits for it); a command while another one runs keeps a
        sandbox of its own."""
        ...

    def read_file(self, path: str) -> bytes:
        """Read a file by its path relative to the workspace root."""
        ...

    def write_file(self, path: str, data: bytes | str) -> None:
        """Write a file by its path relative to the workspace root (parents created)."""
        ...

    def fork(self) -> Sandbox:
        """A sandbox over a copy-on-write snapshot of this workspace; writes never cross."""
        ...

    def close(self) -> None:
        """Release everything; a fork's private workspace copy is deleted."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...
