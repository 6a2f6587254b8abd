"""``swemill tasks`` and ``swemill tasks export`` as a user runs them (real subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.network]


def swemill(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SWEMILL_CACHE": str(cache), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "swemill", *args], capture_output=True,
                          text=True, env=env, timeout=600)


def test_tasks_then_export(shared_cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "store"
    proc = swemill("tasks", "sample", "--out", str(out), "--strategies", "procedural",
                   "--max-tasks", "2", "--workers", "2", "--run-id", "cli1", "--json",
                   cache=shared_cache)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["run_id"] == "cli1" and summary["tasks"] == 2
    assert summary["yields"]["procedural"]["valid"] >= 2

    table = swemill("tasks", "sample", "--out", str(out), "--strategies", "procedural",
                    "--max-tasks", "2", "--run-id", "cli1", "--resume", cache=shared_cache)
    assert table.returncode == 0, table.stderr
    assert "run cli1: 2 task(s)" in table.stdout and "procedural" in table.stdout
    # the drop summary, read back from candidates/: the same lines after a resume
    assert summary["drop_summary"]["candidates"] == summary["candidates"]
    assert summary["drop_lines"] and all(line in table.stdout.splitlines()
                                         for line in summary["drop_lines"])

    dest = tmp_path / "swebench.jsonl"
    exp = swemill("tasks", "export", "--out", str(out), "--run", "cli1", "--format",
                  "swebench", "--dest", str(dest), cache=shared_cache)
    assert exp.returncode == 0, exp.stderr
    rows = [json.loads(line) for line in dest.read_text().splitlines()]
    assert sorted(r["instance_id"] for r in rows) == sorted(summary["instance_ids"])
    for row in rows:
        assert row["patch"].startswith("diff --git")  # the bug patch, as SWE-smith publishes
        assert json.loads(row["FAIL_TO_PASS"]) and json.loads(row["PASS_TO_PASS"])


def test_bad_options_are_one_line(shared_cache: Path, tmp_path: Path) -> None:
    proc = swemill("tasks", "sample", "--out", str(tmp_path), "--strategies", "bogus",
                   cache=shared_cache)
    assert proc.returncode == 2
    assert "unknown strategy 'bogus'" in proc.stderr
    proc = swemill("tasks", "sample", "--out", str(tmp_path), "--strategies", "rows",
                   cache=shared_cache)
    assert proc.returncode == 2 and "--rows FILE" in proc.stderr
    proc = swemill("tasks", "export", "--out", str(tmp_path), "--run", "nope",
                   cache=shared_cache)
    assert proc.returncode == 2 and "no run nope" in proc.stderr


def test_a_directory_named_export_is_a_source_unless_run_is_given(tmp_path: Path) -> None:
    (tmp_path / "here" / "export").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    env = {**os.environ, "SWEMILL_CACHE": str(tmp_path / "cache")}

    def tasks_export(cwd: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "swemill", "tasks", "export", "--out",
                               str(tmp_path / "out")], cwd=tmp_path / cwd, env=env,
                              capture_output=True, text=True, timeout=300)

    as_source = tasks_export("here")  # the (empty) directory is validated, and has no tests
    assert as_source.returncode != 0 and "no tests found in export" in as_source.stderr
    as_command = tasks_export("elsewhere")
    assert as_command.returncode == 2 and "export needs --run" in as_command.stderr


def test_recipe_skipped_dependency_and_build_cause_are_printed(tmp_path: Path) -> None:
    """``--recipe`` reaches the build; a test dependency it names that cannot be installed is
    printed after the table; a build that fails prints the failing step's own cause."""
    from .conftest import bug_row, make_calc_repo

    repo = tmp_path / "calc"
    make_calc_repo(repo)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(bug_row("good", "    return a - b")) + "\n")
    recipe = tmp_path / "recipe.toml"
    recipe.write_text('detect = true\npackages = ["swemill-no-such-package-xyz==1.0"]\n')
    cache = tmp_path / "cache"
    proc = swemill("tasks", str(repo), "--out", str(tmp_path / "out"), "--strategies", "rows",
                   "--rows", str(rows), "--max-tasks", "1", "--workers", "1", "--recipe",
                   str(recipe), cache=cache)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "1 task(s)" in proc.stdout
    assert "not installed (tests run without it): swemill-no-such-package-xyz==1.0: " \
        in proc.stdout
    broken = tmp_path / "broken"
    make_calc_repo(broken)
    (broken / "setup.py").write_text("raise RuntimeError('calc-cause-xyz')\n")
    proc = swemill("tasks", str(broken), "--out", str(tmp_path / "out2"), cache=cache)
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr[-2000:]
    assert errors[0].endswith("RuntimeError: calc-cause-xyz"), errors
