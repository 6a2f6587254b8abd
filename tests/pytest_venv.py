"""A uv venv holding only one pytest release (no swemill), as a repository's environment does."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest


def pytest_venv(tmp_path_factory: pytest.TempPathFactory, release: str) -> str:
    """The interpreter of a new venv with ``pytest==RELEASE.*`` alone (skips without uv)."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed")
    venv = tmp_path_factory.mktemp(f"pytest-{release}") / "venv"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    subprocess.run([uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
                    f"pytest=={release}.*"], check=True)
    return str(venv / "bin" / "python")
