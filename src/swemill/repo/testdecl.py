"""Test dependencies declared by the tools that run a project's tests: tox (``tox.ini``, tox 4's
TOML), nox sessions, and ``setup.py`` extras written as expressions.

Everything here reads files; nothing is imported or run. A ``noxfile.py`` is parsed, and only
the literal arguments of ``session.install(...)`` calls in test-named sessions are taken
(names bound to literal lists at module level are followed once).
"""

from __future__ import annotations

import ast
import configparser
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["OWN_TREE", "Declared", "from_noxfile", "from_tox_ini", "from_tox_toml", "own_extras",
           "plain_named_test_modules", "requirement_lines", "setup_py_extra_names", "tool_groups"]

OWN_TREE = re.compile(r"^(?:(?:-e|--editable)\s+)?\.[/\\]?\s*(?:\[([^\]]*)\])?$")
"""A requirement line naming the project's own tree (``.``, ``-e .[test]``): no package to
fetch, but the extras it names are what its developers install to test with."""


def requirement_lines(path: Path) -> list[str]:
    """The requirement file's lines, comments and blank lines left out."""
    text = path.read_text(errors="replace")
    return [ln for ln in (raw.split("#")[0].strip() for raw in text.splitlines()) if ln]


def own_extras(lines: list[str]) -> list[str]:
    """The extras that ``lines`` ask of the project itself (``.[dev,testing]``)."""
    return [e.strip() for ln in lines if (m := OWN_TREE.match(ln)) and m.group(1)
            for e in m.group(1).split(",") if e.strip()]


@dataclass(slots=True)
class Declared:
    """What one file asks to be installed for the tests."""

    packages: list[str] = field(default_factory=list)
    extras: list[str] = field(default_factory=list)
    requirement_files: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)


def from_noxfile(root: Path) -> Declared:
    out = Declared()
    try:
        tree = ast.parse((root / "noxfile.py").read_text())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return out
    lists = _module_lists(tree)
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and "test" in fn.name.lower():
            for node in ast.walk(fn):
                if _is_install(node):
                    _take_args(_strings(node.args, lists), out)  # type: ignore[attr-defined]
    return out


def _module_lists(tree: ast.Module) -> dict[str, list[str]]:
    lists: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, SyntaxError, TypeError):
                continue
            if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
                lists[node.targets[0].id] = list(value)
    return lists


def _is_install(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "install")


def _strings(args: list[ast.expr], lists: dict[str, list[str]]) -> list[str]:
    out: list[str] = []
    for arg in args:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            out.append(arg.value)
        elif isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Name):
            out += lists.get(arg.value.id, [])
        elif isinstance(arg, ast.Name):
            out += lists.get(arg.id, [])
    return out


def _take_args(args: list[str], out: Declared) -> None:
    it = iter(args)
    for arg in it:
        if arg in ("-r", "--requirement"):
            out.requirement_files.append(next(it, ""))
        elif arg.startswith("-r") and len(arg) > 2:
            out.requirement_files.append(arg[2:].strip())
        elif arg in ("--group",):
            out.groups.append(next(it, ""))
        elif arg.startswith(".[") and arg.endswith("]"):
            out.extras += [e.strip() for e in arg[2:-1].split(",") if e.strip()]
        elif not arg.startswith(("-", ".", "/")):
            out.packages.append(arg)
    out.requirement_files = [f for f in out.requirement_files if f]


def from_tox_ini(root: Path) -> Declared:
    """``[testenv]`` of ``tox.ini``: deps (``-r`` files too), extras, dependency groups."""
    out = Declared()
    cfg = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        cfg.read(root / "tox.ini")
    except (configparser.Error, UnicodeDecodeError):
        return out
    if not cfg.has_section("testenv"):
        return out
    env = cfg["testenv"]
    for line in env.get("deps", "").splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("-r"):
            out.requirement_files.append(line[2:].strip().replace("{toxinidir}/", ""))
        elif line and "{" not in line and not line.startswith(("-", ".")) and ":" not in line:
            out.packages.append(line)
    for key, dest in (("extras", out.extras), ("dependency_groups", out.groups)):
        dest += [e for e in re.split(r"[,\s]+", env.get(key, ""))
                 if e and "{" not in e and ":" not in e]
    return out


def from_tox_toml(root: Path) -> Declared:
    """``[env_run_base]`` of ``tox.toml``, or ``[tool.tox.env_run_base]`` of pyproject.toml."""
    out = Declared()
    base = _toml(root / "tox.toml").get("env_run_base") or \
        _toml(root / "pyproject.toml").get("tool", {}).get("tox", {}).get("env_run_base")
    if not isinstance(base, dict):
        return out
    for dep in _str_list(base.get("deps")):
        if dep.startswith("-r"):
            out.requirement_files.append(dep[2:].strip().replace("{tox_root}/", ""))
        elif "{" not in dep and not dep.startswith(("-", ".")):
            out.packages.append(dep)
    out.extras = [e for e in _str_list(base.get("extras")) if "{" not in e]
    out.groups = _str_list(base.get("dependency_groups"))
    return out


def setup_py_extra_names(node: ast.AST) -> list[str]:
    """The literal keys of an ``extras_require`` dict whose values are expressions."""
    if not isinstance(node, ast.Dict):
        return []
    return [k.value for k in node.keys
            if isinstance(k, ast.Constant) and isinstance(k.value, str)]


def _str_list(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}


def plain_named_test_modules(root: Path) -> list[str]:
    """Test modules all named ``test.py`` / ``tests.py`` (in the root or a ``test``/``tests``
    folder) when no module has a name pytest's default ``python_files`` collects (decorator
    5.1.1: ``src/tests/test.py``, run as ``pytest src/tests/test.py``); else ``[]``."""
    def found(pattern: str) -> list[Path]:
        return [p for p in root.rglob(pattern) if not any(
            part.startswith(".") or part in ("build", "dist", "site-packages")
            for part in p.relative_to(root).parts[:-1])]

    if found("test_*.py") or found("*_test.py"):
        return []
    return sorted(str(p.relative_to(root)) for name in ("test.py", "tests.py")
                  for p in found(name)
                  if p.parent == root or {"test", "tests"} & set(p.relative_to(root).parts[:-1]))


def tool_groups(tool: dict[str, Any]) -> dict[str, list[str]]:
    """Dependency groups of pdm's ``[tool.pdm.dev-dependencies]`` (requirement strings) and
    poetry's ``[tool.poetry.group.NAME.dependencies]`` / ``[tool.poetry.dev-dependencies]``
    (translated to PEP 508, :func:`poetry_requirement`), by a label ending in the group's
    name. unearth 0.17.2's conftest imports flask, declared only in its pdm ``test`` group."""
    found: dict[str, list[str]] = {}
    pdm = tool.get("pdm", {}).get("dev-dependencies", {})
    if isinstance(pdm, dict):
        for k, v in pdm.items():
            if isinstance(v, list):
                found[f"[tool.pdm.dev-dependencies] {k}"] = [
                    str(x) for x in v if isinstance(x, str) and not x.startswith("-")]
    poetry = tool.get("poetry", {})
    groups = {k: g.get("dependencies") for k, g in poetry.get("group", {}).items()
              if isinstance(g, dict)}
    if isinstance(poetry.get("dev-dependencies"), dict):
        groups["dev"] = poetry["dev-dependencies"]
    for k, deps in groups.items():
        if isinstance(deps, dict):
            found[f"[tool.poetry] group {k}"] = [poetry_requirement(n, c) for n, c in deps.items()
                                                 if n.lower() != "python"]
    return found


def poetry_requirement(name: str, constraint: Any) -> str:
    """A poetry dependency (``"^7.2"``, ``{version = "~1.2", markers = "..."}``) as a PEP 508
    requirement with its lower bound only, by poetry-core's own translation. The lower bound
    keeps uv from answering with a release older than the project ever used (tinydb 4.8.0's
    ``pytest-pycodestyle = "^2.3.1"``, read by name, got 1.0.6, whose ``pep8`` plugin pytest 9
    refuses to load); the upper bound is poetry's caret habit, and an old caret pins what no
    longer runs on this Python (pastel 0.2.1's ``pytest = "^4.6.4"``). The name alone where
    the translation is no valid PEP 508 (``^3 || ^4``), names a git or path source, or fails."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import Version
    from poetry.core.factory import Factory

    if not isinstance(constraint, str | dict) or (
            isinstance(constraint, dict) and {"git", "path", "url", "file"} & set(constraint)):
        return name
    try:
        req = Requirement(Factory.create_dependency(name, constraint).to_pep_508())
        lower = [Version(s.version) for s in req.specifier
                 if s.operator in (">=", ">", "==", "~=") and "*" not in s.version]
        req.specifier = SpecifierSet(f">={max(lower)}" if lower else "")
    except (InvalidRequirement, InvalidSpecifier, ValueError, TypeError, AttributeError,
            RuntimeError):
        return name
    return name if req.url else str(req)
