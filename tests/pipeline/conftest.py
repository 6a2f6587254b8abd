"""Build fixtures: ``swemill build`` as a user runs it (a real process), one shared build.

The full build needs the tasks and rollouts stages; tests that need them skip with that reason
when this installation lacks them (see ``needs_full_build``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Small enough to finish in well under a minute on 2 cores, with SFT and DPO rows for sure:
# per task one oracle run (solved: SFT) and one noisy oracle that always applies a wrong fix
# (the rejected side of an execution-graded pair).
BUILD_ARGS = ("--max-tasks", "3", "--strategies", "procedural", "--policy", "oracle",
              "--policy", "noisy-oracle:1.0", "--samples", "2", "--workers", "2",
              "--audit", "0")


def _have(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


FULL_BUILD = _have("swemill.validate.validator") and _have("swemill.agent.rollout")
needs_full_build = pytest.mark.skipif(
    not FULL_BUILD, reason="the tasks or rollouts stage is not in this installation")


def swemill(*args: str, cache: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)
    if cache is not None:
        full["SWEMILL_CACHE"] = str(cache)
    full.update(env or {})
    full["COLUMNS"] = "200"
    return subprocess.run([sys.executable, "-m", "swemill", *args], capture_output=True,
                          text=True, timeout=timeout, env=full)


def build_json(*args: str, cache: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = swemill("build", *args, "--json", cache=cache, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The one error line a failed command prints (and proof that there is exactly one)."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return errors[0]


class Cli:
    """The helpers above as a fixture (test modules cannot import this conftest)."""

    BUILD_ARGS = BUILD_ARGS
    run = staticmethod(swemill)
    build_json = staticmethod(build_json)
    error_line = staticmethod(error_line)


@pytest.fixture(scope="session")
def cli() -> type[Cli]:
    return Cli


@dataclass(frozen=True)
class Built:
    root: Path
    run_id: str
    out: dict[str, Any]
    cache: Path


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One swemill cache (working copies, environments) for every build of the session."""
    return tmp_path_factory.mktemp("build-cache")


@pytest.fixture(scope="session")
def sample_build(tmp_path_factory: pytest.TempPathFactory, build_cache: Path) -> Built:
    """``swemill build --out ROOT`` on a fresh root, run once and shared (read-only)."""
    if not FULL_BUILD:
        pytest.skip("the tasks or rollouts stage is not in this installation")
    root = tmp_path_factory.mktemp("sample-build") / "out"
    out = build_json("--out", str(root), *BUILD_ARGS, cache=build_cache)
    return Built(root, out["run_id"], out, build_cache)
