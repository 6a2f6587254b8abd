"""``swemill tasks export --format harbor``: every exported verifier, run by hand (no Docker) in
a plain venv, gives the broken tree reward 0 and the tree with solution/solve.sh applied
reward 1; golden data is only in solution/."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from swemill.exports.harbor import FIX_WARNING, export_harbor
from swemill.validate.guard import GoldenGuard
from swemill.validate.snapshot import unpack_tree

from .conftest import SampleTasks

pytestmark = pytest.mark.slow


@dataclass
class Exported:
    root: Path
    venv: Path
    recipes_found: int


@pytest.fixture(scope="module")
def exported(sample_tasks: SampleTasks, tmp_path_factory: pytest.TempPathFactory) -> Exported:
    base = tmp_path_factory.mktemp("harbor")
    result = export_harbor(sample_tasks.store, sample_tasks.run_id, base / "tasks",
                           cache=sample_tasks.cache)
    assert result.tasks == len(sample_tasks.tasks)
    venv = base / "venv"  # a plain venv with pytest: what a person would make by hand
    subprocess.run(["uv", "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    subprocess.run(["uv", "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
                    "pytest"], check=True)
    return Exported(base / "tasks", venv, result.recipes_found)


def _verify(exported: Exported, task_dir: Path, tree: Path, out: Path) -> str:
    env = {"PATH": f"{exported.venv / 'bin'}:/usr/bin:/bin", "HOME": str(out),
           "SWEMILL_REWARD_DIR": str(out), "LANG": "C.UTF-8"}
    proc = subprocess.run(["bash", str(task_dir / "tests" / "test.sh")], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return (out / "reward.txt").read_text().strip()


def _broken_tree(sample_tasks: SampleTasks, task_id: str, where: Path) -> Path:
    task = next(t for t in sample_tasks.tasks if t.instance_id == task_id)
    return unpack_tree(sample_tasks.store.get_bytes(task.snapshot), where)


@pytest.mark.parametrize("index", [0, 1, 2])
def test_the_verifier_gives_0_on_the_broken_tree_and_1_with_the_solution(
        sample_tasks: SampleTasks, exported: Exported, tmp_path: Path, index: int) -> None:
    task = sample_tasks.tasks[index]
    task_dir = exported.root / task.instance_id
    broken = _broken_tree(sample_tasks, task.instance_id, tmp_path / "broken")
    fixed = tmp_path / "fixed"
    shutil.copytree(broken, fixed, symlinks=True)
    assert _verify(exported, task_dir, broken, tmp_path / "out-broken") == "0"
    not_passed = (tmp_path / "out-broken" / "not_passed.txt").read_text().split()
    assert set(task.FAIL_TO_PASS) <= set(not_passed)
    solve = subprocess.run(["bash", str(task_dir / "solution" / "solve.sh")], cwd=fixed,
                           capture_output=True, text=True, timeout=60)
    assert solve.returncode == 0, solve.stderr
    assert _verify(exported, task_dir, fixed, tmp_path / "out-fixed") == "1", \
        (tmp_path / "out-fixed" / "pytest.log").read_text()[-2000:]


def test_test_files_are_restored_before_the_run(sample_tasks: SampleTasks, exported: Exported,
                                                 tmp_path: Path) -> None:
    """Emptying the failing tests' files does not earn the reward: the verifier puts the
    validated files back first."""
    task = sample_tasks.tasks[0]
    broken = _broken_tree(sample_tasks, task.instance_id, tmp_path / "broken")
    for test_file in {t.split("::")[0] for t in task.FAIL_TO_PASS}:
        (broken / test_file).write_text("")
    assert _verify(exported, exported.root / task.instance_id, broken, tmp_path / "out") == "0"


def test_layout_and_golden_data_only_in_the_solution(sample_tasks: SampleTasks,
                                                     exported: Exported) -> None:
    assert exported.recipes_found == len(sample_tasks.tasks)
    for task in sample_tasks.tasks:
        d = exported.root / task.instance_id
        meta = tomllib.loads((d / "task.toml").read_text())
        assert meta["version"] == "1.0" and meta["verifier"]["timeout_sec"] > 0
        assert meta["metadata"]["swemill"]["instance_id"] == task.instance_id
        instruction = (d / "instruction.md").read_text()
        assert task.problem_statement.strip() in instruction
        docker = (d / "environment" / "Dockerfile").read_text()
        assert "FROM python:3.11-slim" in docker and "'.[test]'" in docker
        assert "ADD workspace.tar.gz /app/" in docker
        assert os.access(d / "tests" / "test.sh", os.X_OK)
        guard = GoldenGuard.of(sample_tasks.goldens[task.instance_id])
        for path in d.rglob("*"):
            if path.is_file() and path.suffix != ".gz" and "solution" not in path.parts:
                assert not guard.leaks(path.read_text()), path
        assert guard.leaks((d / "solution" / "solve.sh").read_text())
    assert "contains each task's fix" in FIX_WARNING


def test_cli_export_warns_that_it_contains_the_fix(sample_tasks: SampleTasks,
                                                    tmp_path: Path) -> None:
    dest = tmp_path / "harbor"
    env = {**os.environ, "SWEMILL_CACHE": str(sample_tasks.cache)}
    proc = subprocess.run([sys.executable, "-m", "swemill", "tasks", "export", "--run",
                           sample_tasks.run_id, "--out", str(sample_tasks.root), "--format",
                           "harbor", "--dest", str(dest)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "contains each task's fix" in proc.stderr
    assert sorted(p.name for p in dest.iterdir()) == sorted(t.instance_id
                                                            for t in sample_tasks.tasks)
    again = subprocess.run([sys.executable, "-m", "swemill", "tasks", "export", "--run",
                            sample_tasks.run_id, "--out", str(sample_tasks.root), "--format",
                            "harbor", "--dest", str(dest)],
                           capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode != 0 and "not empty" in again.stderr
