"""Install the test dependencies a recipe names, keeping what cannot be installed visible.

The project and its own dependencies must install, or the build fails. Test dependencies are
tried together first (one resolution, the usual case); when that fails each one is tried
alone beside the project, and those that still fail (no wheel, no such version, a conflict
with the project) are skipped and recorded with the cause line of their failure, so
``swemill env`` and ``swemill tasks`` can say what the tests run without.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn

from packaging.requirements import InvalidRequirement, Requirement

__all__ = ["Skipped", "install_test_deps", "requirement_units", "unpin_self"]

Runner = Callable[[list[str]], tuple[int, str]]
"""Runs ``uv pip install`` with these arguments; returns (exit code, cause line if failed)."""


@dataclass(slots=True, frozen=True)
class Skipped:
    """A test dependency that could not be installed, and why."""

    requirement: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def requirement_units(files: list[Path], options_file: Path) -> list[str]:
    """Requirement lines of ``files`` (already flattened) as separate units; their option
    lines (constraints, index options) go to ``options_file``, used with every attempt."""
    units: list[str] = []
    options: list[str] = []
    for path in files:
        for line in path.read_text().splitlines():
            (options if line.startswith("-") else units).append(line)
    options_file.write_text("".join(f"{ln}\n" for ln in options))
    return units


def unpin_self(units: list[str], project: str | None, pin: str = "") -> list[str]:
    """A test group that names the project itself (``attrs[tests]``, ``pkg>=2[x]``) asks for
    its extras: keep them, never its version, which could swap the development install for a
    release from the index; ``pin`` (``==VERSION``, the installed one) is put instead."""
    if not project:
        return units
    own = _norm(project)
    out = []
    for unit in units:
        try:
            req = Requirement(unit)
        except InvalidRequirement:
            out.append(unit)
            continue
        if _norm(req.name) != own:
            out.append(unit)
        elif req.extras:
            out.append(f"{project}[{','.join(sorted(req.extras))}]{pin}")
    return out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def install_test_deps(run: Runner, required: list[str], optional: list[str],
                      fail: Callable[[str], NoReturn]) -> list[Skipped]:
    """Install ``required`` + ``optional``; ``fail(reason)`` when ``required`` cannot be."""
    optional = [o for o in dict.fromkeys(optional) if o not in required]
    code, _ = run([*required, *optional])
    if code == 0:
        return []
    code, why = run(required)
    if code != 0:
        fail(why)
    skipped: list[Skipped] = []
    for unit in optional:
        code, why = run([*required, unit])
        if code != 0:
            skipped.append(Skipped(unit, why))
    return skipped
