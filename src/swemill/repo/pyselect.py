"""Choose the interpreter an environment is built on.

The interpreter swemill itself runs on is preferred: it is installed, and the sandboxes bind
its prefix by default. Another installed interpreter is used only when the project's
``requires-python`` excludes ours; Python is never downloaded.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from swemill.core.errors import EnvBuildError
from swemill.repo.recipe import Recipe

__all__ = ["pick_python", "ours"]


def ours() -> str:
    """Our base interpreter (not our venv's), by its path."""
    v = sys.version_info
    for cand in (Path(sys.base_prefix) / "bin" / f"python{v.major}.{v.minor}",
                 Path(sys.base_prefix) / "bin" / "python3"):
        if cand.exists():
            return str(cand)
    return sys.executable


def _describe(interp: str) -> tuple[str, Path]:
    try:
        out = subprocess.run(
            [interp, "-c", "import sys, platform; print(platform.python_version()); "
             "print(sys.base_prefix)"],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout.split("\n")
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvBuildError(f"cannot run the interpreter {interp}: {exc}") from None
    return out[0].strip(), Path(out[1].strip())


def pick_python(recipe: Recipe, uv: str) -> tuple[str, str, Path, str]:
    """Return ``(interpreter, version, base_prefix, note)``; ``note`` explains a fallback."""
    if recipe.python:
        interp = recipe.python
        if os.path.sep not in interp:
            interp = _uv_find(uv, interp) or interp
        return (interp, *_describe(interp), "")
    mine = ours()
    version, prefix = _describe(mine)
    try:
        spec = SpecifierSet(recipe.requires_python or "")
    except InvalidSpecifier:
        return mine, version, prefix, f"requires-python {recipe.requires_python!r} unreadable"
    if spec.contains(version, prereleases=True):
        return mine, version, prefix, ""
    other = _uv_find(uv, str(spec))
    if other:
        return (other, *_describe(other), f"python: {other} satisfies requires-python {spec}")
    note = f"python: no installed interpreter satisfies requires-python {spec}; using {version}"
    return mine, version, prefix, note


def _uv_find(uv: str, request: str) -> str | None:
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    env.pop("VIRTUAL_ENV", None)
    try:
        proc = subprocess.run([uv, "python", "find", "--no-project", request], env=env,
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    path = proc.stdout.strip()
    return path if proc.returncode == 0 and path else None
