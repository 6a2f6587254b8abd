"""A SWE-bench export runs as exported: plain git and plain pytest, no swemill code.

The repository's pytest configuration says ``addopts = "--doctest-modules"`` and one of the
FAIL_TO_PASS tests is a doctest, which pytest only collects with that flag. The checkout's
configuration is emptied before the run, as an older base commit's might be: the export's
``test_cmd`` must carry the flag itself. Regression: the export had no ``test_cmd`` at all,
and a task's command loaded swemill's own reporter plugin.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from swemill.store import Store
from swemill.synth.patches import file_diff
from swemill.validate.tasks_config import TasksConfig
from swemill.validate.validator import run_tasks

from .conftest import run_git

pytestmark = [pytest.mark.slow, pytest.mark.network]

CALC = '''\
def add(a, b):
    """Add two numbers.

    >>> add(2, 2)
    4
    """
    return a + b


def mul(a, b):
    return a * b
'''

FILES = {
    "pyproject.toml": """\
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "doccalc"
        version = "0.1"
        license = {text = "MIT"}
        [tool.setuptools]
        packages = ["doccalc"]
        [tool.pytest.ini_options]
        addopts = "--doctest-modules"
        """,
    "doccalc/__init__.py": "",
    "doccalc/calc.py": CALC,
    "tests/test_calc.py": """\
        from doccalc.calc import add, mul


        def test_add():
            assert add(1, 2) == 3


        def test_mul():
            assert mul(2, 3) == 6
        """,
}


def _outcomes(stdout: str) -> dict[str, str]:
    """Each outcome from the ``-rA`` summary lines (``PASSED id``, ``FAILED id - why``)."""
    out = {}
    for line in stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR"):
            out[rest.split(" - ", 1)[0].strip()] = word.lower()
    return out


def _pytest(work: Path, test_cmd: str, ids: list[str]) -> dict[str, str]:
    # `python` is whatever interpreter has the project's test dependencies: this one
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(work),
           "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
    proc = subprocess.run(f"{test_cmd} {shlex.join(ids)}", shell=True, cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    return _outcomes(proc.stdout)


def test_exported_instances_hold_under_plain_git_and_pytest(tmp_path: Path) -> None:
    repo = tmp_path / "doccalc"
    repo.mkdir()
    run_git(repo, "init", "-q", "-b", "main")
    for rel, text in FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(textwrap.dedent(text))
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", "doccalc")
    bug = file_diff("doccalc/calc.py", CALC, CALC.replace("return a + b", "return a - b"))
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"instance_id": "doccalc.sub", "repo": "example/doccalc",
                                "patch": bug, "image_name": "local/sub",
                                "FAIL_TO_PASS": ["tests/test_calc.py::test_add"],
                                "PASS_TO_PASS": ["tests/test_calc.py::test_mul"],
                                "problem_statement": ""}) + "\n")
    out = tmp_path / "store"
    cfg = TasksConfig(strategies=["rows"], rows=rows, max_tasks=1, workers=1)
    result = run_tasks(str(repo), Store(str(out)), "x", cfg)
    assert result.tasks == 1, result.yields["rows"]

    dest = tmp_path / "export.jsonl"
    proc = subprocess.run([sys.executable, "-m", "swemill", "tasks", "export", "--out", str(out),
                           "--run", "x", "--dest", str(dest)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    [row] = [json.loads(line) for line in dest.read_text().splitlines()]
    f2p, p2p = json.loads(row["FAIL_TO_PASS"]), json.loads(row["PASS_TO_PASS"])
    assert f2p == ["doccalc/calc.py::doccalc.calc.add", "tests/test_calc.py::test_add"]
    assert p2p == ["tests/test_calc.py::test_mul"]
    assert "--doctest-modules" in shlex.split(row["test_cmd"])
    assert "swemill" not in row["test_cmd"]

    # From here on: git and pytest only.
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", str(repo), str(work)], check=True, timeout=120)
    run_git(work, "checkout", "-q", row["base_commit"])
    (work / "pyproject.toml").write_text(  # an older configuration, without the addopts
        (work / "pyproject.toml").read_text().replace('addopts = "--doctest-modules"', ""))
    run_git(work, "apply", "-", stdin=row["patch"])
    broken = _pytest(work, row["test_cmd"], f2p + p2p)
    assert broken == {**dict.fromkeys(f2p, "failed"), **dict.fromkeys(p2p, "passed")}
    run_git(work, "apply", "-R", "-", stdin=row["patch"])  # the fix: back to base_commit
    fixed = _pytest(work, row["test_cmd"], f2p + p2p)
    assert fixed == dict.fromkeys(f2p + p2p, "passed")
