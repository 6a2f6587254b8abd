"""Install the test dependencies a recipe names, keeping what cannot be installed visible.

The project and its own dependencies must install, or the build fails. Test dependencies are
tried together first (one resolution, the usual case); when that fails each one is tried
alone beside the project, and those that still fail (no wheel, no such version, a conflict
with the project) are skipped and recorded with the cause line of their failure, so
``swemill env`` and ``swemill tasks`` can say what the tests run without. An extra of the
project that fails as a whole is tried again requirement by requirement (its
``Requires-Dist`` lines, :func:`extra_requirements`), so one requirement without a wheel
costs that requirement, not the whole extra.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import Any, NoReturn

from packaging.markers import UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet

__all__ = ["Skipped", "describe_skipped", "extra_requirements", "install_test_deps",
           "requirement_units", "unconstrained", "unpin_self"]

Runner = Callable[[list[str]], tuple[int, str]]
"""Runs ``uv pip install`` with these arguments; returns (exit code, cause line if failed)."""


@dataclass(slots=True, frozen=True)
class Skipped:
    """A test dependency that could not be installed, and why."""

    requirement: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def describe_skipped(skipped: list[Skipped], most: int = 3) -> str:
    """The skipped test dependencies in a few words each, for an error line that may be
    their consequence ("" when none): ``requests-wsgi-adapter (no wheel)``."""
    def why(s: Skipped) -> str:
        if "sdist did not build" in s.reason:
            return "no wheel, and its sdist did not build"
        return "no wheel" if "no usable wheels" in s.reason or "no wheels" in s.reason \
            else "could not be installed"
    parts = [f"{s.requirement} ({why(s)})" for s in skipped[:most]]
    more = f" and {len(skipped) - most} more" if len(skipped) > most else ""
    return f"{', '.join(parts)}{more}" if parts else ""


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


def unconstrained(unit: str) -> str | None:
    """``unit`` without its version specifier (extras and marker kept); None when it has
    none or is no requirement."""
    try:
        req = Requirement(unit)
    except InvalidRequirement:
        return None
    if not req.specifier or req.url:
        return None
    req.specifier = SpecifierSet()
    return str(req)


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


def extra_requirements(venv: Path, project: str, extras: list[str]) -> dict[str, list[str]]:
    """``{extra: its requirements}`` from the installed ``project``'s ``Requires-Dist`` lines,
    for the venv's Python, markers dropped (zipp 3.20.2's ``test`` extra holds big-O, which
    has no wheel, and the six requirements its tests import)."""
    meta = _installed_metadata(venv, project)
    if meta is None:
        return {}
    with meta.open(errors="replace") as fh:
        lines = HeaderParser().parse(fh).get_all("Requires-Dist") or []
    env = _marker_env(venv)
    out: dict[str, list[str]] = {}
    for extra in extras:
        reqs = []
        for line in lines:
            try:
                req = Requirement(line)
                wanted = req.marker is not None and req.marker.evaluate({**env, "extra": extra})
                base = req.marker is not None and req.marker.evaluate({**env, "extra": ""})
            except (InvalidRequirement, UndefinedComparison, UndefinedEnvironmentName):
                continue
            if wanted and not base:  # the project's own dependencies are installed already
                req.marker = None
                reqs.append(str(req))
        out[extra] = reqs
    return out


def _installed_metadata(venv: Path, project: str) -> Path | None:
    for meta in venv.glob("lib/python*/site-packages/*.dist-info/METADATA"):
        with meta.open(errors="replace") as fh:
            name = HeaderParser().parse(fh).get("Name") or ""
        if _norm(name) == _norm(project):
            return meta
    return None


def _marker_env(venv: Path) -> dict[str, str]:
    """The venv's Python version, as markers name it (the platform is this machine's)."""
    try:
        cfg = (venv / "pyvenv.cfg").read_text()
    except OSError:
        return {}
    m = re.search(r"^(?:version_info|version)\s*=\s*(\d+)\.(\d+)\.(\d+)", cfg, re.M)
    if not m:
        return {}
    return {"python_version": f"{m[1]}.{m[2]}", "python_full_version": ".".join(m.groups())}


def install_test_deps(run: Runner, required: list[str], optional: list[str],
                      fail: Callable[[str], NoReturn],
                      parts: Mapping[str, list[str]] | None = None) -> list[Skipped]:
    """Install ``required`` + ``optional``; ``fail(reason)`` when ``required`` cannot be.
    ``parts``: what an optional unit is made of (an extra's requirements); a unit that fails
    is tried again part by part, and only the parts that fail are skipped."""
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
        if code == 0:
            continue
        pieces = (parts or {}).get(unit) or []
        if not pieces:
            skipped.append(Skipped(unit, why))
            continue
        if pieces == [unconstrained(unit)]:  # the unit without its version, tried alone
            if run([*required, *pieces])[0] != 0:
                skipped.append(Skipped(unit, why))
            continue
        for piece in pieces:
            code, why = run([*required, piece])
            if code != 0:
                skipped.append(Skipped(f"{piece} (of {unit})", why))
    return skipped
