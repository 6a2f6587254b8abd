"""``swemill env`` as a user meets it: a real subprocess, one clear line on bad input, and the
same passed/failed counts as pytest run by hand in the environment it built."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SWEMILL = [sys.executable, "-m", "swemill"]


def swemill(*args: str, cache: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SWEMILL_CACHE": str(cache), "COLUMNS": "200"}
    return subprocess.run([*SWEMILL, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


def entries(cache: Path) -> list[str]:
    """Complete-looking entries in the cache: envs and baselines."""
    envs = cache / "envs"
    if not envs.exists():
        return []
    return sorted(p.name for p in envs.iterdir()) + sorted(
        str(p.relative_to(envs)) for p in envs.glob("*/baseline.json"))


def test_missing_directory(tmp_path: Path) -> None:
    line = one_error_line(swemill("env", str(tmp_path / "nope"), cache=tmp_path / "c"))
    assert "no such directory" in line
    assert entries(tmp_path / "c") == []


def test_bad_git_url(tmp_path: Path) -> None:
    line = one_error_line(swemill("env", f"file://{tmp_path}/missing.git", cache=tmp_path / "c"))
    assert "cannot clone" in line


def test_repo_without_tests(tmp_path: Path) -> None:
    (tmp_path / "lib" / "pkg").mkdir(parents=True)
    (tmp_path / "lib" / "pkg" / "__init__.py").write_text("X = 1\n")
    line = one_error_line(swemill("env", str(tmp_path / "lib"), cache=tmp_path / "c"))
    assert "no tests found" in line
    assert entries(tmp_path / "c") == []


def test_unknown_backend_and_bad_recipe(tmp_path: Path) -> None:
    assert "unknown backend" in one_error_line(
        swemill("env", str(tmp_path), "--backend", "vm", cache=tmp_path / "c"))
    assert "no such recipe file" in one_error_line(
        swemill("env", str(tmp_path), "--recipe", str(tmp_path / "r.json"), cache=tmp_path / "c"))


@pytest.mark.network
def test_unknown_pypi_version(tmp_path: Path) -> None:
    line = one_error_line(swemill("env", "pypi:toolz==0.0.0", cache=tmp_path / "c"))
    assert "no sdist of toolz 0.0.0" in line


def project(root: Path, test_body: str, deps: str = "") -> Path:
    files = {
        "pyproject.toml": f"""
            [build-system]
            requires = ["setuptools>=61"]
            build-backend = "setuptools.build_meta"
            [project]
            name = "clidemo"
            version = "0.1"
            dependencies = [{deps}]
            [tool.setuptools]
            packages = ["clidemo"]
            """,
        "clidemo/__init__.py": "def f():\n    return 1\n",
        "tests/test_it.py": test_body,
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


@pytest.mark.slow
@pytest.mark.network
def test_install_failure_shows_the_cause_and_leaves_no_env(tmp_path: Path) -> None:
    proj = project(tmp_path / "p", "def test_x():\n    pass\n", '"swemill-missing-dep-q==9"')
    proc = swemill("env", str(proj), cache=tmp_path / "c")
    line = one_error_line(proc)
    assert "failed" in line and "swemill-missing-dep-q" in line
    assert entries(tmp_path / "c") == []


@pytest.mark.slow
@pytest.mark.network
def test_hanging_suite_is_bounded_by_suite_timeout(tmp_path: Path) -> None:
    proj = project(tmp_path / "p", "import time\n\ndef test_hang():\n    time.sleep(600)\n")
    proc = swemill("env", str(proj), "--suite-timeout", "5", cache=tmp_path / "c", timeout=300)
    line = one_error_line(proc)
    assert "did not finish within 5 s" in line and "--suite-timeout" in line
    assert not list((tmp_path / "c" / "envs").glob("*/baseline.json"))


def hand_path(env_path: Path, work: Path) -> str:
    """The venv imports the project from /workspace; by hand, point it at the copy instead."""
    roots = json.loads((env_path / "env.json").read_text())["import_roots"]
    return ":".join(str(work / r) for r in roots)


def by_hand_counts(env_path: Path, source: Path, tmp: Path) -> dict[str, int]:
    """pytest as a person would run it in the venv, from a fresh copy of the source."""
    work = tmp / "by-hand"
    shutil.copytree(source, work)
    proc = subprocess.run([str(env_path / "venv" / "bin" / "python"), "-m", "pytest", "-q",
                           "-p", "no:cacheprovider", "-p", "no:randomly"], cwd=work,
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": hand_path(env_path, work)})
    summary = proc.stdout.strip().splitlines()[-1]
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|xfailed|xpassed)",
                                               summary)}
    errors = re.search(r"(\d+) errors?", summary)
    counts["error"] = int(errors.group(1)) if errors else 0
    return counts


@pytest.mark.slow
@pytest.mark.network
def test_toolz_counts_match_pytest_by_hand(shared_cache: Path, tmp_path: Path) -> None:
    proc = swemill("env", "pypi:toolz==1.0.0", "--json", cache=shared_cache)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["env"]["python"] and out["coverage_functions"] > 100
    hand = by_hand_counts(Path(out["env"]["path"]), Path(out["source"]["path"]), tmp_path)
    for outcome in ("passed", "failed", "error"):
        assert out["counts"].get(outcome, 0) == hand.get(outcome, 0), (outcome, out, hand)
    assert hand["passed"] > 100
    again = swemill("env", "pypi:toolz==1.0.0", cache=shared_cache)  # cached: a quick summary
    assert again.returncode == 0 and "coverage map" in again.stdout


@pytest.mark.slow
@pytest.mark.network
def test_a_test_requirement_pinning_an_old_coverage_is_skipped_with_its_reason(
        tmp_path: Path) -> None:
    """pyparsing 3.1.4's tests/requirements.txt pins coverage==4.4.2, which has no dynamic
    contexts: installed over swemill's coverage, it broke the per-test coverage map and every
    baseline run ("pytest never finished its session"). swemill keeps coverage >= 5 and says
    which pin it left out, and why."""
    proj = project(tmp_path / "p", "from clidemo import f\n\ndef test_f():\n    assert f() == 1\n")
    (proj / "tests" / "requirements.txt").write_text("coverage==4.5.4\n")
    proc = swemill("env", str(proj), "--json", cache=tmp_path / "c")
    assert proc.returncode == 0, proc.stderr[-2000:]
    info = json.loads(proc.stdout)
    assert info["counts"] == {"passed": 1} and info["coverage_functions"] >= 1
    skipped = {s["requirement"]: s["reason"] for s in info["env_skipped"]}
    assert "coverage>=5 and coverage==4.5.4" in skipped["coverage==4.5.4"]
    python = Path(info["env"]["path"]) / "venv" / "bin" / "python"
    version = subprocess.run([str(python), "-c", "import coverage; print(coverage.__version__)"],
                             capture_output=True, text=True, check=True).stdout
    assert int(version.split(".")[0]) >= 5, version
