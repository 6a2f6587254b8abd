"""The install recipe of a repository, detected from its files and stored as ``recipe.json``.

Detection looks, in order, at pyproject extras and dependency groups (PEP 735), requirements
files, setup.cfg / setup.py extras and ``tests_require``, tox (``tox.ini``, ``tox.toml``) and
nox (``noxfile.py``, read, never run) test dependencies, and the pytest configuration.
Test-named groups win; dev-named ones are used only when there is no test group, and then
without the lint, docs and release tools they usually carry (they cost minutes to install and
never run a test). A user's recipe (``--recipe FILE``, or ``.swemill/recipe.toml`` committed
in the repository) replaces detection: see docs/recipes.md.
"""

from __future__ import annotations

import ast
import configparser
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from swemill.core.errors import ConfigError
from swemill.repo.legacy_hooks import legacy_hook_pins
from swemill.repo.testdecl import (
    OWN_TREE,
    from_noxfile,
    from_tox_ini,
    from_tox_toml,
    own_extras,
    plain_named_test_modules,
    requirement_lines,
    setup_py_extra_names,
    tool_groups,
)

__all__ = ["COMMITTED", "Recipe", "detect_recipe", "has_tests", "load_recipe", "resolve_recipe"]

COMMITTED = ".swemill/recipe.toml"
"""Where a repository may commit its own recipe."""

TEST_NAMES = ("test", "tests", "testing")
DEV_NAMES = ("dev", "develop", "development")
ALWAYS = ("pytest", "coverage>=5")
"""Installed in every environment: swemill's per-test coverage map needs coverage.py's dynamic
contexts (5.0); a test requirement pinning an older one is skipped, with uv's reason."""
_NOT_FOR_TESTS = re.compile(
    r"^(sphinx|furo|myst|mkdocs|black|flake8|ruff|isort|pylint|mypy|pyright|pre-commit|twine|"
    r"flit|build|wheel|setuptools|tox|nox|bump|towncrier|codecov|coveralls|docutils|readme|"
    r"check-manifest|ipython|ipdb|jupyter|types-|pydocstyle|pycodestyle|autopep8|yapf)",
    re.I,
)
# Options in a repo's addopts that would change what we measure or how we read it.
_DROP_OPTS = {"-x", "--exitfirst", "--lf", "--last-failed", "--ff", "--failed-first", "--sw",
              "--stepwise", "--pdb", "-q", "-v", "-vv", "--quiet", "--verbose", "--cov-append",
              # lint items (pytest-ruff, pytest-mypy...): they judge style, not behaviour
              "--ruff", "--ruff-format", "--mypy", "--flake8", "--black", "--isort", "--pylint"}
_DROP_WITH_VALUE = {"-n", "--numprocesses", "--dist", "--maxfail", "--cov", "--cov-report",
                    "--cov-config", "--cov-fail-under", "--junitxml", "--junit-xml",
                    "--timeout", "--durations", "--reruns", "--randomly-seed"}
# Plugins an addopts ``-p NAME`` may not load (they parallelise, reorder or measure coverage
# of their own); every other ``-p`` stays, a suite's fixtures and ini options may need it.
_DROP_PLUGINS = {"xdist", "xdist.plugin", "xdist.looponfail", "randomly", "pytest_randomly",
                 "random_order", "random-order", "pytest_random_order", "pytest_cov",
                 "pytest_cov.plugin", "cov", "rerunfailures", "pytest_rerunfailures"}
_OPT_PLUGINS = {"asyncio_mode": "pytest-asyncio", "timeout": "pytest-timeout",
                "mock_use_standalone_module": "pytest-mock"}


class Recipe(BaseModel):
    """How to install a repository for its tests and how to run them."""

    model_config = ConfigDict(extra="forbid")

    python: str | None = None
    """Interpreter request (a path or a version); ``None``: the one swemill runs on."""
    requires_python: str | None = None
    editable: bool = True
    """Install the project itself in development mode (so it imports from the workspace)."""
    extras: list[str] = Field(default_factory=list)
    """Extras of the project to install with it (``.[test]``)."""
    requirement_files: list[str] = Field(default_factory=list)
    """Requirement files, relative to the repository root, installed with ``-r``."""
    packages: list[str] = Field(default_factory=list)
    """Further requirement strings; pytest and ``coverage>=5`` are always added."""
    pytest_args: list[str] = Field(default_factory=list)
    """Replaces the repo's ``addopts`` (filtered of options that change what is measured)."""
    test_paths: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)
    """Which files each part of the recipe came from."""
    older_commits: bool = True
    """Also install, as optional test dependencies, what older commits (pr-mirror's window)
    declare and the head no longer does (:mod:`swemill.repo.past_deps`)."""
    detect: bool = False
    """Also detect from the repository's files: this recipe's lists are added to what was
    found, and its settings (python, pytest_args, test_paths...) win where given."""

    def all_packages(self) -> list[str]:
        have = {_req_name(p) for p in self.packages}
        return [*self.packages, *(p for p in ALWAYS if _req_name(p) not in have)]


def load_recipe(path: Path) -> Recipe:
    """Read a user's recipe file (``--recipe FILE``), JSON or TOML."""
    try:
        text = path.read_text()
        if path.suffix == ".toml":
            return Recipe.model_validate(tomllib.loads(text))
        return Recipe.model_validate_json(text)
    except FileNotFoundError:
        raise ConfigError(f"no such recipe file: {path}") from None
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        first = str(exc).strip().splitlines()[0]
        raise ConfigError(f"recipe file {path} is not a valid recipe: {first}") from None


def resolve_recipe(root: Path, given: Recipe | None = None) -> Recipe:
    """The recipe a build of ``root`` uses: ``given`` (``--recipe``), else the repository's
    committed ``.swemill/recipe.toml``, else detection; ``detect = true`` adds detection."""
    recipe = given
    if recipe is None and (root / COMMITTED).is_file():
        recipe = load_recipe(root / COMMITTED)
        if recipe.python and not re.fullmatch(r"\d+(\.\d+){0,2}", recipe.python):
            # the host runs the named interpreter to build the venv: a repository may not
            # choose which program that is
            raise ConfigError(f"{COMMITTED}: python must be a version like 3.12, not "
                              f"{recipe.python!r} (a path can only be given with --recipe)")
        recipe.evidence.append(COMMITTED)
    if recipe is None:
        return detect_recipe(root)
    return _merged(detect_recipe(root), recipe) if recipe.detect else recipe


def _merged(found: Recipe, mine: Recipe) -> Recipe:
    out = found.model_copy(deep=True)
    for name in ("extras", "requirement_files", "packages", "evidence"):
        setattr(out, name, list(dict.fromkeys([*getattr(found, name), *getattr(mine, name)])))
    for name in ("python", "requires_python", "pytest_args", "test_paths"):
        if name in mine.model_fields_set:
            setattr(out, name, getattr(mine, name))
    out.editable, out.detect = mine.editable, True
    return out


def _req_name(req: str) -> str:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else req


def _useful(reqs: list[str]) -> list[str]:
    return [r for r in reqs if r.strip() and not _NOT_FOR_TESTS.match(r.strip())]


def has_tests(root: Path) -> bool:
    """Whether the tree holds any pytest-style test file (checked before a costly build)."""
    for pattern in ("test_*.py", "*_test.py", "tests.py", "test.py"):
        for path in root.rglob(pattern):
            if not any(part.startswith(".") or part in ("build", "dist") for part in
                       path.relative_to(root).parts):
                return True
    return False


def detect_recipe(root: Path) -> Recipe:
    """Read the repository at ``root`` and return the recipe its files imply."""
    r = Recipe()
    pyproject = _toml(root / "pyproject.toml")
    _from_pyproject(pyproject, r)
    _from_requirements(root, r)
    _from_setup(root, r)
    _from_runners(root, pyproject, r)
    section = _pytest_config(root, pyproject, r)
    if section is None or "python_files" not in section:
        _plain_named_modules(root, r)
    pins, why = legacy_hook_pins(root)
    r.packages += pins
    r.evidence += why
    r.packages = list(dict.fromkeys(r.packages))
    r.extras = list(dict.fromkeys(r.extras))
    return r


def addopts_plugins(root: Path) -> list[str]:
    """The plugins the repository's pytest configuration at ``root`` loads with ``-p`` in its
    addopts, as every run keeps them (:func:`filter_addopts`)."""
    r = Recipe()
    _pytest_config(root, _toml(root / "pyproject.toml"), r)
    args = r.pytest_args
    return [name for flag, name in zip(args, args[1:], strict=False)
            if flag == "-p" and not name.startswith("no:")]


def _toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except (FileNotFoundError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}


def _from_pyproject(data: dict[str, Any], r: Recipe) -> None:
    project = data.get("project", {})
    if isinstance(project.get("requires-python"), str):
        r.requires_python = project["requires-python"]
        r.evidence.append(f"pyproject.toml: requires-python {r.requires_python}")
    extras = project.get("optional-dependencies", {})
    test = [k for k in extras if k.lower() in TEST_NAMES]
    if test:
        r.extras += test
        r.evidence.append(f"pyproject.toml: extras {test}")
    else:
        for k in (k for k in extras if k.lower() in DEV_NAMES):
            r.packages += _useful(extras[k])
            r.evidence.append(f"pyproject.toml: dev extra {k!r} (test tools only)")
    groups = data.get("dependency-groups", {})
    names = [k for k in groups if k.lower() in TEST_NAMES] or [
        k for k in groups if k.lower() in DEV_NAMES]
    for k in names:
        r.packages += _useful(_expand_group(groups, k, set()))
        r.evidence.append(f"pyproject.toml: dependency group {k!r}")
    if not names:
        _tool_groups(data.get("tool", {}), r)


def _tool_groups(tool: dict[str, Any], r: Recipe) -> None:
    """pdm's and poetry's own groups (:func:`~swemill.repo.testdecl.tool_groups`), test
    groups first, else dev groups, as for PEP 735."""
    found = tool_groups(tool)
    picked = [k for k in found if k.rsplit(" ", 1)[1].lower() in TEST_NAMES] or [
        k for k in found if k.rsplit(" ", 1)[1].lower() in DEV_NAMES]
    for k in picked:
        r.packages += _useful(found[k])
        r.evidence.append(f"pyproject.toml: {k}")


def _expand_group(groups: dict[str, Any], name: str, seen: set[str]) -> list[str]:
    if name in seen:
        return []
    seen.add(name)
    out: list[str] = []
    for item in groups.get(name, []):
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and "include-group" in item:
            out += _expand_group(groups, item["include-group"], seen)
    return out


def _from_requirements(root: Path, r: Recipe) -> None:
    patterns = ("*requirements*.txt", "requirements*/*.txt", "test*/*requirements*.txt")
    files = sorted({p for pat in patterns for p in root.glob(pat) if p.is_file()})
    rel = [p.relative_to(root).as_posix() for p in files]
    test = [f for f in rel if "test" in f.lower()]
    dev = [] if test else [f for f in rel if any(d in f.lower() for d in DEV_NAMES)]
    if test:
        r.requirement_files += test
        r.evidence.append(f"requirement files {test}")
    for f in dev:
        lines = [ln for ln in requirement_lines(root / f) if not OWN_TREE.match(ln)]
        r.packages += _useful([ln for ln in lines if not ln.startswith("-")])
        r.evidence.append(f"{f} (test tools only)")
    for f in test or dev:  # `.[testing]`: the project's own test extras
        keys = [e for e in own_extras(requirement_lines(root / f)) if e.lower() in TEST_NAMES]
        r.extras += keys
        r.evidence += [f"{f}: the project's own extras {keys}"] if keys else []


def _from_setup(root: Path, r: Recipe) -> None:
    cfg = configparser.ConfigParser(interpolation=None)
    try:
        cfg.read(root / "setup.cfg")
    except configparser.Error:
        cfg = configparser.ConfigParser()
    if cfg.has_section("options.extras_require"):
        keys = [k for k in cfg["options.extras_require"] if k.lower() in TEST_NAMES]
        r.extras += keys
        if keys:
            r.evidence.append(f"setup.cfg: extras {keys}")
    if cfg.has_option("options", "python_requires") and not r.requires_python:
        r.requires_python = cfg["options"]["python_requires"].strip()
    if (root / "setup.py").is_file():
        _from_setup_py(root / "setup.py", r)


def _from_setup_py(path: Path, r: Recipe) -> None:
    try:
        tree = ast.parse(path.read_text())
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return
    for node in ast.walk(tree):
        if not isinstance(node, ast.keyword):
            continue
        value = _literal(node.value)
        if node.arg == "extras_require":
            names = list(value) if isinstance(value, dict) else setup_py_extra_names(node.value)
            keys = [k for k in names if isinstance(k, str) and k.lower() in TEST_NAMES]
            r.extras += keys
            if keys:
                r.evidence.append(f"setup.py: extras {keys}")
        elif node.arg == "tests_require" and isinstance(value, list | tuple):
            r.packages += [v for v in value if isinstance(v, str)]
            r.evidence.append("setup.py: tests_require")
        elif node.arg == "python_requires" and isinstance(value, str) and not r.requires_python:
            r.requires_python = value
            r.evidence.append(f"setup.py: python_requires {value}")


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def _from_runners(root: Path, pyproject: dict[str, Any], r: Recipe) -> None:
    """Test dependencies named by tox (``tox.ini``, ``tox.toml``) and nox sessions."""
    groups = pyproject.get("dependency-groups", {})
    for where, found in (("tox.ini", from_tox_ini(root)), ("tox.toml", from_tox_toml(root)),
                         ("noxfile.py", from_noxfile(root))):
        files = [f for f in found.requirement_files
                 if "{" not in f and (root / f).is_file() and f not in r.requirement_files]
        packages = _useful(found.packages)
        packages += _useful([p for g in found.groups if isinstance(groups, dict)
                             for p in _expand_group(groups, g, set())])
        if not (files or packages or found.extras):
            continue
        r.requirement_files += files
        r.packages += packages
        r.extras += found.extras
        r.evidence.append(f"{where}: test dependencies")


def _ini(path: Path) -> configparser.ConfigParser:
    cfg = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        cfg.read(path)
    except (configparser.Error, UnicodeDecodeError):
        return configparser.ConfigParser()
    return cfg


def _plain_named_modules(root: Path, r: Recipe) -> None:
    """Test modules pytest's default ``python_files`` misses are added to it."""
    plain = plain_named_test_modules(root)
    if plain:
        r.pytest_args += ["-o", "python_files=test_*.py *_test.py test.py tests.py"]
        r.evidence.append(f"test modules pytest's default names miss: {plain}")


def _pytest_config(root: Path, pyproject: dict[str, Any], r: Recipe) -> dict[str, Any] | None:
    """Find the config pytest would use (same precedence) and keep its safe addopts;
    returns its section (None: no configuration)."""
    section: dict[str, Any] | None = None
    for name, sect in (("pytest.ini", "pytest"), (".pytest.ini", "pytest")):
        cfg = _ini(root / name)
        if cfg.has_section(sect):
            section, where = dict(cfg[sect]), name
            break
    else:
        opts = pyproject.get("tool", {}).get("pytest", {}).get("ini_options")
        if isinstance(opts, dict):
            section, where = opts, "pyproject.toml"
        else:
            for name, sect in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
                cfg = _ini(root / name)
                if cfg.has_section(sect):
                    section, where = dict(cfg[sect]), name
                    break
    if section is None:
        return None
    addopts = section.get("addopts", "")
    args = shlex.split(addopts) if isinstance(addopts, str) else [str(a) for a in addopts]
    r.pytest_args = filter_addopts(args)
    paths = section.get("testpaths", [])
    r.test_paths = paths.split() if isinstance(paths, str) else [str(p) for p in paths]
    r.packages += [pkg for key, pkg in _OPT_PLUGINS.items() if key in section]
    req = section.get("required_plugins", "")
    r.packages += req.split() if isinstance(req, str) else [str(p) for p in req]
    r.evidence.append(f"{where}: pytest configuration")
    return section


def filter_addopts(args: list[str]) -> list[str]:
    """Drop options that stop early, parallelise, randomise, or add coverage of their own;
    ``-p`` options stay (as ``-p NAME``) unless they load a plugin that does one of those."""
    out: list[str] = []
    skip = False
    plugin = False
    for arg in args:
        if skip:
            skip = False
            continue
        if plugin or (arg.startswith("-p") and arg != "-p"):
            name = arg if plugin else arg[2:]
            plugin = False
            if name.startswith("no:") or name.strip() not in _DROP_PLUGINS:
                out += ["-p", name.strip()]
            continue
        if arg == "-p":
            plugin = True
            continue
        name = arg.split("=", 1)[0]
        if name in _DROP_WITH_VALUE or (name.startswith("-n") and name[2:].isdigit()):
            skip = "=" not in arg and name == arg and not name[2:].isdigit()
            continue
        if name in _DROP_OPTS or name.startswith(("--cov", "--random")):
            continue
        out.append(arg)
    return out
