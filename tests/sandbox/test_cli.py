"""``swemill sandbox run`` through the installed entry point (a real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .conftest import needs_bwrap

SWEMILL = str(Path(sys.executable).with_name("swemill"))


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SWEMILL, "sandbox", "run", *args], capture_output=True, text=True,
                          timeout=timeout)


@needs_bwrap
def test_json_result() -> None:
    p = _run("--json", "--", "echo", "hi")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["stdout"] == "hi\n" and out["exit_code"] == 0
    assert out["timed_out"] is False and out["killed_reason"] is None
    assert set(out) >= {"exit_code", "timed_out", "killed_reason", "stdout", "stderr", "wall_s"}


@needs_bwrap
def test_exit_code_is_passed_on_and_options_reach_the_command(tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("data\n")
    p = _run("--workspace", str(tmp_path), "--", "sh", "-c", "cat in.txt; echo e >&2; exit 5")
    assert p.returncode == 5
    assert p.stdout == "data\n" and "e" in p.stderr and "exit 5" in p.stderr


@needs_bwrap
def test_timeout_kills_and_exits_non_zero() -> None:
    p = _run("--json", "--timeout", "1", "--", "sleep", "30")
    out = json.loads(p.stdout)
    assert p.returncode != 0 and out["timed_out"] and out["killed_reason"] == "timeout"


def test_bad_input_is_one_line_and_non_zero(tmp_path: Path) -> None:
    p = _run("--workspace", str(tmp_path / "missing"), "--", "true")
    assert p.returncode == 2 and "not a directory" in p.stderr
    p = _run("--backend", "nope", "--", "true")
    assert p.returncode == 2 and "unknown sandbox backend" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
