"""Versions of projects that take theirs from git (setuptools-scm, hatch-vcs, pdm's scm source,
poetry-dynamic-versioning, versioningit, flit-scm...).

The install runs over a copy of the working copy without ``.git`` (the sandbox must not see
or change the history), so such a backend cannot ask git for the version. swemill asks instead,
on the host, reading files only: the ``Version:`` of an sdist's ``PKG-INFO`` first (the
version the project was released as), else ``git describe`` of the working copy, else
``0.0.0``. The version reaches the backend through the variables each one documents for
exactly this case (:func:`version_env`).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.version import InvalidVersion, Version

from swemill.core.errors import SourceError
from swemill.repo.sources import git

__all__ = ["scm_versioned", "derive_version", "version_env"]

_SCM_REQUIRES = re.compile(
    r"^\s*(setuptools[-_.]?scm|hatch[-_.]vcs|versioningit|poetry[-_.]dynamic[-_.]versioning|"
    r"flit[-_.]scm|vcs[-_.]versioning|dunamai|setuptools[-_.]git[-_.]versioning|pbr)\b", re.I)
FALLBACK = "0.0.0"


def scm_versioned(work: Path, build_requires: list[str]) -> bool:
    """Whether the project's version comes from its version-control history."""
    if any(_SCM_REQUIRES.match(r) for r in build_requires):
        return True
    try:
        data = tomllib.loads((work / "pyproject.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return False
    pdm = data.get("tool", {}).get("pdm", {}).get("version", {})
    return isinstance(pdm, dict) and pdm.get("source") == "scm"


def derive_version(src: Path) -> tuple[str, str]:
    """``(version, where it came from)`` for the working copy at ``src``."""
    pkg_info = _pkg_info_version(src / "PKG-INFO")
    if pkg_info:
        return pkg_info, "PKG-INFO"
    described = _described(src)
    if described:
        return described, "git describe"
    return FALLBACK, "no tag and no PKG-INFO"


def version_env(version: str, dist: str | None) -> dict[str, str]:
    """The variables each scm backend reads as 'this is the version, do not ask git'."""
    env = {"SETUPTOOLS_SCM_PRETEND_VERSION": version, "PDM_BUILD_SCM_VERSION": version,
           "POETRY_DYNAMIC_VERSIONING_BYPASS": version, "PBR_VERSION": version}
    if dist:
        env["SETUPTOOLS_SCM_PRETEND_VERSION_FOR_" + re.sub(r"[-_.]+", "_", dist).upper()] = \
            version
    return env


def _pkg_info_version(path: Path) -> str | None:
    try:
        with path.open(errors="replace") as fh:
            for line in fh:
                if line.startswith("Version:"):
                    return _valid(line.split(":", 1)[1].strip())
                if not line.strip():
                    break
    except OSError:
        return None
    return None


def _described(src: Path) -> str | None:
    """``git describe`` as a PEP 440 version: the tag itself, or ``TAG.postN+gSHA`` past it."""
    if not (src / ".git").exists():
        return None
    try:
        out = git(["describe", "--tags", "--long", "--abbrev=9", "--match", "*[0-9]*"], src,
                  timeout=60)
    except SourceError:
        return None
    m = re.fullmatch(r"(.+)-(\d+)-g([0-9a-f]+)", out)
    if not m:
        return None
    tag = _valid(re.sub(r"^[^0-9]*", "", m.group(1)))
    if tag is None:
        return None
    distance = int(m.group(2))
    return tag if distance == 0 else (_valid(f"{tag}.post{distance}+g{m.group(3)[:9]}") or tag)


def _valid(text: str) -> str | None:
    try:
        return str(Version(text))
    except InvalidVersion:
        return None
