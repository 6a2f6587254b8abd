"""The test runner's own code inside a repository's tree.

pytest imports a few packages before any test runs and calls through them for every test and
every report: pytest itself (``pytest``, ``_pytest``), its hook machinery ``pluggy``,
``iniconfig`` and the ``py`` shim. Where a repository *is* one of them (its tree holds the
package at its root or under ``src/``), its environment installs the tree's copy, so the
grader's own machinery would be the code a policy edits: an edit to ``pluggy``'s hook caller
can turn every report into a pass without naming anything a monitor could look for. So
swemill makes no tasks of such a repository (:func:`refuse_runner_repository`), and the grader
never carries a change to those files (:mod:`swemill.agent.carry`).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from swemill.core.errors import EnvBuildError

__all__ = ["RUNNER_PACKAGES", "refuse_runner_repository", "runner_packages", "runner_top"]

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


def refuse_runner_repository(tree: Path, repo: str) -> None:
    """Raise (one line) when ``tree`` holds the test runner's own code."""
    held = runner_packages(tree)
    if held:
        raise EnvBuildError(
            f"{repo} holds the test runner's own code ({', '.join(held)}): pytest would grade "
            "every task with the copy a policy edits, so swemill makes no tasks of it")
