"""Dependencies that older commits declare and the head no longer does, and a digest of what
one commit declares.

pr-mirror (and rows) validate candidates at older commits in the head's environment. When a
dependency was dropped since, every baseline at those commits fails to import it. The head's
environment therefore also gets, as optional test dependencies (skipped with their cause when
they cannot be installed), the *names* of the runtime and test requirements that the commits
in pr-mirror's window declare and the head does not: unpinned, so they never fight the head's
own pins, and without plugins that change how pytest runs the head's suite.

Where a base commit declares other dependencies than the head, it gets an environment of
its own (:mod:`swemill.repo.commitenv`): :func:`declaration_digest` names what a commit
declares, so two commits that declare the same share one environment, and a commit that
declares what the head does uses the head's.

Declarations are read with ``git show`` as text (``pyproject.toml``, ``setup.cfg``,
``setup.py`` parsed, never run; requirement files as their lines).
"""

from __future__ import annotations

import ast
import configparser
import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from swemill.core.errors import SourceError
from swemill.repo.sources import git

__all__ = ["declaration_digest", "older_requirements"]

WINDOW = 300
"""Commits looked at, as many as pr-mirror mines."""
_FILES = ("pyproject.toml", "setup.cfg", "setup.py")
_MAX_NAMES = 30
_TEST = ("test", "tests", "testing")
# Plugins that change the order, output or selection of the head's own suite when installed.
_DISRUPTIVE = re.compile(r"^pytest-(randomly|random-order|sugar|pretty|picked|testmon|"
                         r"instafail|emoji|reverse|rerunfailures|flakefinder)$")
_NOT_FOR_TESTS = re.compile(r"^(sphinx|furo|myst|mkdocs|black|flake8|ruff|isort|pylint|mypy|"
                            r"pyright|pre-commit|twine|tox|nox|towncrier|codecov|coveralls)")


def older_requirements(root: Path, project: str | None) -> list[str]:
    """Requirement names declared at some commit of the window and not at the head."""
    try:
        window = git(["rev-list", f"--max-count={WINDOW}", "HEAD"], root).split()
        touched = git(["log", "--format=%H", f"--max-count={WINDOW}", "HEAD", "--",
                       *_FILES], root).split()
    except SourceError:
        return []
    if len(window) < 2:
        return []
    head = _declared(root, window[0])
    older: set[str] = set()
    inside = set(window)
    for commit in dict.fromkeys([*(c for c in touched if c in inside), window[-1]]):
        older |= _declared(root, commit)
    own = _norm(project or "")
    names = sorted(n for n in older - head if n != own and not _DISRUPTIVE.match(n)
                   and not _NOT_FOR_TESTS.match(n))
    return names[:_MAX_NAMES]


_REQ_FILE = re.compile(r"^(?:[^/]*/)?[^/]*requirements[^/]*\.(?:txt|in)$|"
                       r"^requirements[^/]*/[^/]+\.(?:txt|in)$")
"""Requirement files as the recipe finds them (``requirements-test.txt``,
``requirements/tests.txt``, ``tests/requirements.txt``)."""


def declaration_digest(root: Path, commit: str) -> str | None:
    """sha256 of the dependencies ``commit`` declares: runtime and test requirements, build
    requirements, ``requires-python`` and every requirement file, each in a canonical form, so
    a version bump or a reworded description changes nothing. None when git cannot read the
    commit (not in this clone)."""
    try:
        names = git(["ls-tree", "-r", "--name-only", commit], root, timeout=60).splitlines()
    except SourceError:
        return None
    parts: dict[str, list[str]] = {}
    for name in [*(f for f in _FILES if f in names), *(f for f in names if _REQ_FILE.match(f))]:
        text = _show(root, commit, name)
        if name in _FILES:
            parser = {"pyproject.toml": _pyproject_all, "setup.cfg": _setup_cfg_all,
                      "setup.py": _setup_py_all}[name]
            parts[name] = sorted({_canonical(r) for r in parser(text)})
        else:
            parts[name] = sorted({ln.split("#", 1)[0].strip() for ln in text.splitlines()}
                                 - {""})
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _show(root: Path, commit: str, name: str) -> str:
    try:
        return git(["show", f"{commit}:{name}"], root, timeout=60)
    except SourceError:
        return ""


def _declared(root: Path, commit: str) -> set[str]:
    reqs: list[str] = []
    for name in _FILES:
        text = _show(root, commit, name)
        if text:
            reqs += {"pyproject.toml": _pyproject, "setup.cfg": _setup_cfg,
                     "setup.py": _setup_py}[name](text)
    return {n for n in (_name(r) for r in reqs) if n}


def _pyproject_all(text: str) -> list[str]:
    """What :func:`_pyproject` reads, plus build requirements and ``requires-python``."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []
    build = _strs((data.get("build-system") or {}).get("requires"))
    python = (data.get("project") or {}).get("requires-python")
    return [*_pyproject(text), *build, *([f"python{python}"] if isinstance(python, str) else [])]


def _setup_cfg_all(text: str) -> list[str]:
    cfg = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        cfg.read_string(text)
    except configparser.Error:
        return []
    more = [*cfg.get("options", "setup_requires", fallback="").splitlines(),
            f"python{cfg.get('options', 'python_requires', fallback='')}"]
    return [*_setup_cfg(text), *more]


def _setup_py_all(text: str) -> list[str]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    more: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "setup_requires":
            more += _strs(_literal(node.value))
        elif isinstance(node, ast.keyword) and node.arg == "python_requires":
            value = _literal(node.value)
            more += [f"python{value}"] if isinstance(value, str) else []
    return [*_setup_py(text), *more]


def _canonical(req: str) -> str:
    """One spelling per requirement (``Foo_Bar >= 1`` and ``foo-bar>=1`` are one)."""
    text = req.split("#", 1)[0].strip()
    try:
        parsed = Requirement(text)
    except InvalidRequirement:
        return text
    parsed.name = _norm(parsed.name)
    return str(parsed)


def _pyproject(text: str) -> list[str]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []
    project = data.get("project", {})
    out = _strs(project.get("dependencies"))
    for key, value in (project.get("optional-dependencies") or {}).items():
        if key.lower() in _TEST:
            out += _strs(value)
    for key, value in (data.get("dependency-groups") or {}).items():
        if key.lower() in _TEST:
            out += _strs(value)
    return out


def _setup_cfg(text: str) -> list[str]:
    cfg = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        cfg.read_string(text)
    except configparser.Error:
        return []
    out = cfg.get("options", "install_requires", fallback="").splitlines()
    if cfg.has_section("options.extras_require"):
        out += [ln for k, v in cfg["options.extras_require"].items() if k.lower() in _TEST
                for ln in v.splitlines()]
    return out


def _setup_py(text: str) -> list[str]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in ("install_requires", "tests_require"):
            out += _strs(_literal(node.value))
        elif isinstance(node, ast.keyword) and node.arg == "extras_require":
            value = _literal(node.value)
            if isinstance(value, dict):
                out += [r for k, v in value.items() if str(k).lower() in _TEST
                        for r in _strs(v)]
    return out


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def _strs(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list | tuple) else []


def _name(req: str) -> str | None:
    """The requirement's normalised name, or None when its marker excludes this Python."""
    try:
        parsed = Requirement(req.split("#", 1)[0].strip())
    except InvalidRequirement:
        return None
    if parsed.marker is not None and not parsed.marker.evaluate({"extra": ""}):
        return None
    return _norm(parsed.name)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
