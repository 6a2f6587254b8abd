"""``swemill doctor`` as a user runs it: what is there, what is missing, and the fix for it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path


def _doctor(env: dict[str, str]) -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", "swemill", "doctor", "--json"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def test_doctor_reports_every_check_as_found_here() -> None:
    checks = {c["name"]: c for c in _doctor(dict(os.environ))}
    assert {"python", "bwrap", "uv", "git", "cgroups", "docker engine",
            "aws credentials"} <= set(checks)
    assert checks["bwrap"]["ok"] is (shutil.which("bwrap") is not None)
    assert checks["git"]["ok"] is (shutil.which("git") is not None)
    assert all(c["ok"] or c["fix"] for c in checks.values())  # nothing missing without a fix


def test_missing_tools_come_with_the_command_that_fixes_them(tmp_path: Path) -> None:
    # A PATH holding only the Python interpreter: bwrap and git are not found.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python").symlink_to(sys.executable)
    env = {**os.environ, "PATH": str(bindir), "HOME": str(tmp_path)}
    env = {k: v for k, v in env.items() if not k.startswith("AWS_")}
    checks = {c["name"]: c for c in _doctor(env)}
    assert checks["bwrap"]["ok"] is False
    assert "apt-get install -y bubblewrap" in checks["bwrap"]["fix"]
    assert checks["git"]["ok"] is False and checks["git"]["fix"]
    assert checks["aws credentials"]["ok"] is False and checks["aws credentials"]["optional"]
    assert "aws configure" in checks["aws credentials"]["fix"]
