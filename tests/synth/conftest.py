"""Real git repositories built on disk for the strategy tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from swemill.core.records import TestResult
from swemill.suite.verdict import parse_report
from swemill.synth.patches import apply_patch
from swemill.synth.strategy import RepoView

GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
}


def run_git(root: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=root, env=GIT_ENV, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def write_files(root: Path, files: dict[str, str | None]) -> None:
    for rel, text in files.items():
        path = root / rel
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


Commit = Callable[[dict[str, str | None], str], str]


@pytest.fixture
def git_repo(tmp_path: Path) -> tuple[Path, Commit]:
    """An empty repository and ``commit(files, message) -> sha``."""
    root = tmp_path / "repo"
    root.mkdir()
    run_git(root, "init", "-q", "-b", "main")

    def commit(files: dict[str, str | None], message: str) -> str:
        write_files(root, files)
        run_git(root, "add", "-A")
        run_git(root, "commit", "-q", "-m", message)
        return run_git(root, "rev-parse", "HEAD").strip()

    return root, commit


def git_apply_check(root: Path, patch: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "apply", "--check", *extra, "-"], cwd=root, input=patch, text=True,
        capture_output=True, env=GIT_ENV,
    )


@pytest.fixture
def apply_check() -> Callable[..., subprocess.CompletedProcess[str]]:
    return git_apply_check


@pytest.fixture
def git() -> Callable[..., str]:
    return run_git


def mutant_failures(root: Path, bug_patch: str, tmp_path: Path) -> list[TestResult]:
    """The tests that fail when ``bug_patch`` is applied to a copy of ``root``: pytest with
    swemill's reporter, as a worker would run it, read back through the report parser."""
    work = tmp_path / "work"
    shutil.copytree(root, work)
    apply_patch(work, bug_patch)
    report = tmp_path / "report.jsonl"
    env = {"SWEMILL_REPORT": str(report), "SWEMILL_NONCE": "n", "PATH": "/usr/bin:/bin",
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(work)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "swemill.suite.pytest_plugin", "-p",
         "no:cacheprovider", "-o", "addopts=", f"--rootdir={work}", "-q", "tests"],
        cwd=work, env=env, capture_output=True, text=True, timeout=120)
    judged = parse_report(report.read_text(), proc.returncode, nonce="n")
    return [r for r in judged.results.values() if r.outcome == "failed"]


def many_functions(root: Path, n: int) -> RepoView:
    """A committed repository whose lib.py holds ``n`` small functions (no tests)."""
    root.mkdir()
    fns = "\n\n".join(f"def f{i}(x):\n    if x > {i}:\n        return x - {i}\n    return {i}\n"
                      for i in range(n))
    (root / "lib.py").write_text(fns)
    run_git(root, "init", "-q", "-b", "main")
    run_git(root, "add", "-A")
    run_git(root, "commit", "-q", "-m", "lib")
    return RepoView(root=root, repo="o/many", commit=run_git(root, "rev-parse", "HEAD").strip())
