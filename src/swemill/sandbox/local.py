"""No isolation at all: a plain subprocess with limits. For machines without bubblewrap.

The command runs as the caller, in the workspace's host directory, and can read and write
anything the caller can — including the network and the caller's files. Only the environment
is reduced to the same allow-list as the isolating backends, and the limits still hold: per-command
cgroups where writable (else rlimits), a wall clock that kills the process group (and the
cgroup, which also catches ``setsid`` daemons), and capped output.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

from swemill.core.errors import SandboxError
from swemill.sandbox._tree_sandbox import TreeSandbox
from swemill.sandbox.contract import Bind, Limits

__all__ = ["LocalSandbox", "NOT_ISOLATED"]

DEFAULT_LIMITS = Limits()  # frozen, so one shared default is safe

NOT_ISOLATED = ("swemill 'local' sandbox: commands are NOT isolated (no namespaces: they can "
                "read and write your files and reach the network); install bubblewrap for the "
                "default 'bwrap' sandbox")

log = logging.getLogger(__name__)


class LocalSandbox(TreeSandbox):
    """Plain subprocesses in the workspace's host directory (see the module docstring)."""

    def __init__(self, workspace: Path, *, binds: Sequence[Bind] = (),
                 env: Mapping[str, str] | None = None, limits: Limits = DEFAULT_LIMITS,
                 **kwargs: object) -> None:
        super().__init__(workspace, binds=binds, env=env, limits=limits, **kwargs)  # type: ignore[arg-type]
        if "_tree" not in kwargs:  # once per sandbox, not again for each fork
            warnings.warn(NOT_ISOLATED, RuntimeWarning, stacklevel=2)
            log.warning(NOT_ISOLATED)

    @property
    def workdir(self) -> str:  # type: ignore[override]
        return str(self._tree.path)

    def _command(self, cmd: Sequence[str] | str, cwd: str | None) -> tuple[list[str], str]:
        argv = ["bash", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        if not argv:
            raise SandboxError("empty command")
        return argv, str(self._tree.path if cwd is None else self._tree.path / cwd)
