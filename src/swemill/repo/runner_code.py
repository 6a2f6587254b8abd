"""The test runner's own code inside a repository's tree.

pytest imports a few packages before any test runs and calls through them for every test and
every report: pytest itself (``pytest``, ``_pytest``), its hook machinery ``pluggy``,
``iniconfig`` and the ``py`` shim. Where a repository *is* one of them (its tree holds the
package at its root or under ``src/``), its environment installs the tree's copy, so the
grader's own machinery would be the code a policy edits: an edit to ``pluggy``'s hook caller
can turn every report into a pass without naming anything a monitor could look for. So
swemill makes no tasks of such a repository (:func:`refuse_runner_repository`), and the grader
never carries a change to those files (:mod:`swemill.agent.carry`).

A repository that ships a pytest plugin (a ``pytest11`` entry point whose module is a file of
its tree: pytest-mock, and projects such as anyio or hypothesis that ship one beside their
library) has the same seat: every run loads the plugin, and its hooks get pytest's own objects
(the config, the items, the reports), so an edit inside one of them can register a hook that
rewrites every report, again without a name to look for (seen on pytest-mock 3.14.0). Such a
repository is refused too (:func:`tree_plugins`).

A module outside the tests that a ``conftest.py`` names in ``pytest_plugins``, or that the
pytest configuration's ``addopts`` loads with ``-p``, is registered the same way, in every
run: a helper module of fixtures can define ``pytest_collection_modifyitems`` and empty every
item's ``runtest``. Such a repository keeps its tasks, but those files
(:func:`suite_plugin_files`) are the runner's for grading: a change to them is never carried,
and a candidate bug in one is dropped (``runner_plugin``). Only literal names are read (a
string, or a list or tuple of strings).
"""

from __future__ import annotations

import ast
import functools
import os
from collections.abc import Iterable
from importlib.metadata import distributions
from pathlib import Path, PurePosixPath

from swemill.core.errors import EnvBuildError
from swemill.repo.recipe import addopts_plugins

__all__ = ["RUNNER_PACKAGES", "refuse_runner_repository", "runner_packages", "runner_top",
           "suite_plugin_files", "suite_plugin_files_of", "tree_plugins"]

RUNNER_PACKAGES = frozenset({"pytest", "_pytest", "pluggy", "py", "iniconfig"})


def runner_top(rel: str) -> str | None:
    """The runner package the workspace path ``rel`` belongs to (``src/pluggy/_callers.py``:
    ``pluggy``; ``src/py.py``: ``py``), or None."""
    parts = PurePosixPath(rel).parts
    if len(parts) > 1 and parts[0] == "src":
        parts = parts[1:]
    if not parts:
        return None
    name = parts[0].removesuffix(".py") if len(parts) == 1 else parts[0]
    return name if name in RUNNER_PACKAGES else None


def runner_packages(tree: Path) -> list[str]:
    """The runner packages ``tree`` holds, as paths relative to it (``src/pluggy``,
    ``src/py.py``)."""
    found = []
    for base in ("", "src/"):
        for name in sorted(RUNNER_PACKAGES):
            if (tree / base / name / "__init__.py").is_file():
                found.append(f"{base}{name}")
            elif (tree / base / f"{name}.py").is_file():
                found.append(f"{base}{name}.py")
    return found


def _module_file(tree: Path, module: str) -> str | None:
    """The file of ``tree`` that module ``module`` would be imported from (root or ``src/``
    layout), as a path relative to it, or None."""
    parts = module.split(".")
    for base in ("", "src/"):
        stem = base + "/".join(parts)
        for rel in (f"{stem}.py", f"{stem}/__init__.py"):
            if (tree / rel).is_file():
                return rel
    return None


def tree_plugins(tree: Path, site_packages: Iterable[Path]) -> list[str]:
    """The ``pytest11`` plugins installed in ``site_packages`` whose module is a file of
    ``tree``, as ``name (path)``; sorted."""
    found = set()
    for site in site_packages:
        for dist in distributions(path=[str(site)]):
            for ep in dist.entry_points:
                if ep.group == "pytest11" and (rel := _module_file(tree, ep.module)):
                    found.add(f"{ep.name} ({rel})")
    return sorted(found)


_SKIP_DIRS = frozenset({"node_modules", "site-packages", "__pycache__"})


def _plugin_names(conftest: Path) -> list[str]:
    """The literal module names a ``conftest.py`` gives ``pytest_plugins`` at its top level."""
    try:
        tree = ast.parse(conftest.read_bytes())
    except (SyntaxError, ValueError, OSError):
        return []
    names: list[str] = []
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, ast.AnnAssign | ast.AugAssign) else [])
        value = getattr(node, "value", None)
        if not any(isinstance(t, ast.Name) and t.id == "pytest_plugins" for t in targets):
            continue
        items = value.elts if isinstance(value, ast.List | ast.Tuple) else [value]
        names += [i.value for i in items
                  if isinstance(i, ast.Constant) and isinstance(i.value, str)]
    return names


def _conftests(tree: Path) -> list[Path]:
    """The ``conftest.py`` files of ``tree``, hidden folders and installed packages left out."""
    out = []
    for folder, dirs, files in os.walk(tree):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS]
        if "conftest.py" in files:
            out.append(Path(folder, "conftest.py"))
    return out


def suite_plugin_files(tree: Path) -> list[str]:
    """Files of ``tree`` that its ``conftest.py`` files or its pytest configuration's
    ``addopts`` load as pytest plugins (see the module docstring), as paths relative to it;
    sorted. Test files among them are the grader's anyway."""
    found = {rel for name in addopts_plugins(tree) if (rel := _module_file(tree, name))}
    for conftest in _conftests(tree):
        for name in _plugin_names(conftest):
            for root in (tree, conftest.parent):  # rootdir, or the conftest's own folder
                rel = _module_file(root, name)
                if rel is not None:
                    found.add((root / rel).relative_to(tree).as_posix())
    return sorted(found)


def suite_plugin_files_of(tree: Path) -> frozenset[str]:
    """:func:`suite_plugin_files` of a tree that does not change (a task's pristine snapshot),
    read once per folder (its path, inode and modification time; none where it is absent)."""
    try:
        st = tree.stat()
    except OSError:
        return frozenset()
    return _plugin_files_cached(str(tree), st.st_ino, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _plugin_files_cached(tree: str, _ino: int, _mtime_ns: int) -> frozenset[str]:
    return frozenset(suite_plugin_files(Path(tree)))


def refuse_runner_repository(tree: Path, repo: str, site_packages: Iterable[Path] = ()) -> None:
    """Raise (one line) when ``tree`` holds the test runner's own code, or a pytest plugin
    that the environment of ``site_packages`` loads in every run."""
    held = runner_packages(tree)
    if held:
        raise EnvBuildError(
            f"{repo} holds the test runner's own code ({', '.join(held)}): pytest would grade "
            "every task with the copy a policy edits, so swemill makes no tasks of it")
    plugins = tree_plugins(tree, site_packages)
    if plugins:
        raise EnvBuildError(
            f"{repo} ships a pytest plugin that every test run loads ({', '.join(plugins)}): "
            "its hooks would run the code a policy edits inside the grader, so swemill makes "
            "no tasks of it")
