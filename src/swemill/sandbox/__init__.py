"""Sandboxes: run untrusted code against a workspace. See :mod:`swemill.sandbox.contract`.

Backends live in their own modules and are imported only when chosen::

    with open_sandbox(Path("repo")) as sb:
        result = sb.exec("python -m pytest -q", timeout=120)
        with sb.fork() as candidate:
            candidate.write_file("pkg/mod.py", patched)
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from swemill.core.errors import SandboxUnavailable
from swemill.sandbox.bwrap import usable
from swemill.sandbox.contract import WORKSPACE, Bind, ExecResult, Limits, Sandbox

__all__ = ["WORKSPACE", "Bind", "ExecResult", "Limits", "Sandbox", "open_sandbox"]

DEFAULT_LIMITS = Limits()  # frozen, so one shared default is safe

BACKENDS: dict[str, str] = {
    "bwrap": "swemill.sandbox.bwrap:BwrapSandbox",
    "docker": "swemill.sandbox.docker:DockerSandbox",
    "local": "swemill.sandbox.local:LocalSandbox",
}
"""Backend name -> ``module:Class``; the module is imported only when that backend is used."""


def _load(name: str) -> type:
    try:
        target = BACKENDS[name]
    except KeyError:
        choices = ", ".join(["auto", *BACKENDS])
        raise SandboxUnavailable(f"unknown sandbox backend {name!r} (choose from {choices})") \
            from None
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]


def _auto() -> str:
    return "bwrap" if usable()[0] else "local"


def open_sandbox(workspace: Path, *, backend: str = "auto", binds: Sequence[Bind] = (),
                 env: Mapping[str, str] | None = None, limits: Limits = DEFAULT_LIMITS) -> Sandbox:
    """A sandbox over ``workspace``. ``auto`` is bwrap when usable, else local (which warns
    that nothing is isolated). Raises :class:`SandboxUnavailable` (with the fix) when the
    requested backend cannot run here."""
    cls = _load(_auto() if backend == "auto" else backend)
    sandbox: Sandbox = cls(Path(workspace), binds=binds, env=env, limits=limits)
    return sandbox
