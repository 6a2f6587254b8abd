"""The sample repository that ships with swemill: a small library with a real test suite.

The tree lives in ``tree/`` as package data. :func:`materialize_sample` copies it out as a
git repository whose commit hashes do not depend on when or where it is made, so tasks built
from the sample are reproducible; with ``history=True`` it also carries a short history of
fixes (see :mod:`swemill.repo.sample.history`) for the pr-mirror strategy.
"""

from __future__ import annotations

import os
import shutil
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

from swemill.core.errors import SourceError
from swemill.core.git import run_git
from swemill.repo.sample.history import BASE_MESSAGE, HISTORY, undo

__all__ = ["SAMPLE_REPO", "sample_path", "sample_files", "materialize_sample"]

SAMPLE_REPO = "swemill/sample-inventory"
_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".git"}
_FIRST_DATE = 1_704_110_400  # 2024-01-01T12:00:00Z; commit k is dated k days later
_DAY = 86_400


def sample_path() -> Path:
    """Where the shipped tree lies (read it, never write into it)."""
    return Path(str(resources.files(__package__) / "tree"))


def _walk(node: Traversable, prefix: str, out: dict[str, str]) -> None:
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        rel = f"{prefix}{child.name}"
        if child.is_dir():
            if child.name not in _SKIP_DIRS and not child.name.endswith(".egg-info"):
                _walk(child, rel + "/", out)
        elif not child.name.endswith(".pyc"):
            out[rel] = child.read_text(encoding="utf-8")


def sample_files() -> dict[str, str]:
    """The shipped tree as ``{relative path: text}``, build debris left out."""
    files: dict[str, str] = {}
    _walk(resources.files(__package__) / "tree", "", files)
    return files


def _states(history: bool) -> list[tuple[str, dict[str, str]]]:
    final = sample_files()
    if not history:
        return [(BASE_MESSAGE, final)]
    states = [(HISTORY[-1].message, final)]
    current = final
    for index in range(len(HISTORY) - 1, -1, -1):
        current = undo(current, HISTORY[index])
        message = HISTORY[index - 1].message if index else BASE_MESSAGE
        states.append((message, current))
    return states[::-1]


def _git(cwd: Path, *args: str, date: int = _FIRST_DATE) -> None:
    stamp = f"{date} +0000"
    env = {
        "GIT_AUTHOR_NAME": "swemill sample",
        "GIT_AUTHOR_EMAIL": "sample@swemill.invalid",
        "GIT_COMMITTER_NAME": "swemill sample",
        "GIT_COMMITTER_EMAIL": "sample@swemill.invalid",
        "GIT_AUTHOR_DATE": stamp,
        "GIT_COMMITTER_DATE": stamp,
    }
    proc = run_git(args, cwd, env=env)
    if proc.returncode != 0:
        raise SourceError(f"git {args[0]} failed in {cwd}: {proc.stderr.strip()}")


def _write_state(root: Path, files: dict[str, str]) -> None:
    for entry in root.iterdir():
        if entry.name != ".git":
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        path.chmod(0o644)  # git records the mode; keep it the same on every machine


def materialize_sample(dest: Path, *, history: bool = False) -> Path:
    """Copy the sample to ``dest`` as a git repository and return ``dest``.

    Without ``history`` there is one commit; with it, a base commit and one commit per
    entry of :data:`~swemill.repo.sample.history.HISTORY`, ending at the same tree.
    Author, committer and dates are fixed, so the hashes are the same on every run.
    ``dest`` must not exist or be empty; it is built under a temporary name and renamed.
    """
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise SourceError(f"cannot materialize the sample into {dest}: it exists and is not empty")
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = dest.parent / f".{dest.name}.partial-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        _git(work, "init", "-q", "-b", "main")
        for number, (message, files) in enumerate(_states(history)):
            _write_state(work, files)
            date = _FIRST_DATE + number * _DAY
            _git(work, "add", "-A", date=date)
            _git(work, "commit", "-q", "--no-verify", "-m", message, date=date)
        if dest.exists():
            dest.rmdir()
        work.rename(dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return dest
