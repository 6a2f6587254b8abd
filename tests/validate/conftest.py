"""Helpers for the validator tests: an independent audit and tiny hostile repositories.

The audit here deliberately shares nothing with ``swemill.validate`` but the snapshot format:
it unpacks the stored snapshot, runs the *whole* suite cold with ``suite.run_tests`` in a
fresh sandbox, applies the golden patch with ``git apply`` and runs it again.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest

from swemill.core.records import Baseline, Golden, Task
from swemill.repo.envbuild import RepoEnv, build_env
from swemill.repo.sources import resolve_source
from swemill.sandbox import open_sandbox
from swemill.store import Store
from swemill.suite.baseline import run_baseline
from swemill.suite.runner import run_tests
from swemill.synth.patches import file_diff
from swemill.validate.snapshot import unpack_tree

GIT_ENV = {
    **os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


@pytest.fixture
def sample_at_head(shared_cache: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, RepoEnv,
                                                                                  Baseline]:
    """The bundled sample's source, environment and head baseline (in the shared cache)."""
    monkeypatch.setenv("SWEMILL_CACHE", str(shared_cache))
    src = resolve_source("sample")
    env = build_env(src)
    return src, env, run_baseline(env, backend="auto")


def run_git(root: Path, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=root, env=GIT_ENV, capture_output=True,
                          text=True, input=stdin)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def independent_audit(store: Store, task: Task, golden: Golden, env: RepoEnv
                      ) -> tuple[list[str], list[str]]:
    """(false FAIL_TO_PASS claims, false PASS_TO_PASS claims) of one task."""
    with tempfile.TemporaryDirectory(prefix="audit-") as tmp:
        ws = unpack_tree(store.get_bytes(task.snapshot), Path(tmp) / "ws")
        with open_sandbox(ws, binds=env.binds()) as sb:
            broken = run_tests(sb, env, None, timeout=300)
            run_git(ws, "apply", "-", stdin=golden.golden_patch)
            fixed = run_tests(sb, env, None, timeout=300)
    assert broken.trustworthy or broken.exit_code == 1, broken.problem
    assert fixed.trustworthy, fixed.problem
    false_f2p = [t for t in task.FAIL_TO_PASS
                 if broken.status(t) not in ("failed", "error") or fixed.status(t) != "passed"]
    false_p2p = [t for t in task.PASS_TO_PASS
                 if broken.status(t) != "passed" or fixed.status(t) != "passed"]
    return false_f2p, false_p2p


CALC = '''\
def add(a, b):
    return a + b


def mul(a, b):
    return a * b
'''

TESTS = '''\
from calcpkg.calc import add, mul


def test_add():
    assert add(1, 2) == 3


def test_mul():
    assert mul(2, 3) == 6
'''

PYPROJECT = '''\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"
[project]
name = "calcpkg"
version = "0.1"
license = {text = "MIT"}
[tool.setuptools]
packages = ["calcpkg"]
'''


def make_calc_repo(root: Path) -> str:
    """A tiny git repository (two passing tests); returns its head commit."""
    files = {"pyproject.toml": PYPROJECT, "calcpkg/__init__.py": "",
             "calcpkg/calc.py": CALC, "tests/test_calc.py": TESTS}
    return commit_tree(root, files, "calc")


def commit_tree(root: Path, files: dict[str, str], message: str) -> str:
    """A new git repository at ``root`` holding ``files`` (dedented) in one commit; returns
    that commit."""
    root.mkdir(parents=True)
    run_git(root, "init", "-q", "-b", "main")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    run_git(root, "add", "-A")
    run_git(root, "commit", "-q", "-m", message)
    return run_git(root, "rev-parse", "HEAD").strip()


def bug_row(name: str, body: str) -> dict[str, object]:
    """A SWE-smith-shaped row whose bug replaces ``return a + b`` in ``add``."""
    patch = file_diff("calcpkg/calc.py", CALC, CALC.replace("    return a + b", body, 1))
    return {"instance_id": f"calc.{name}", "repo": "example/calcpkg", "patch": patch,
            "image_name": f"local/{name}", "FAIL_TO_PASS": ["tests/test_calc.py::test_add"],
            "PASS_TO_PASS": ["tests/test_calc.py::test_mul"], "problem_statement": ""}
