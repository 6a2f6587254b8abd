"""A grading run names the env's own pytest plugins: autoloading is off, so nothing else loads.

Regression class: a ``*.dist-info/entry_points.txt`` declaring a ``pytest11`` plugin anywhere on
``sys.path`` (the workspace root) is loaded by autoloading; the baseline's plugins must still be.
"""

from __future__ import annotations

import sys
from pathlib import Path

from swemill.repo.envbuild import RepoEnv
from swemill.repo.recipe import Recipe
from swemill.suite.runner import PLUGIN_MODULE, env_plugins, pytest_argv


def _env(tmp_path: Path, plugins: dict[str, str]) -> RepoEnv:
    site = tmp_path / "env/venv/lib/python3.11/site-packages"
    for name, module in plugins.items():
        info = site / f"{name}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[pytest11]\n{name} = {module}\n"
                                               "[console_scripts]\nx = y:z\n")
    site.mkdir(parents=True, exist_ok=True)
    return RepoEnv(key="k", path=tmp_path / "env", repo="r", commit="c", source_path=tmp_path,
                   recipe=Recipe(), python_version="3.11", base_prefix=Path(sys.base_prefix))


def test_the_envs_plugins_are_named_and_the_disabled_ones_left_out(tmp_path: Path) -> None:
    env = _env(tmp_path, {"timeout": "pytest_timeout", "randomly": "pytest_randomly",
                          "asyncio": "pytest_asyncio.plugin"})
    assert env_plugins(env) == ["asyncio", "timeout"]
    argv = pytest_argv(env, "/workspace", ["tests/test_a.py"], env_plugins(env))
    assert argv[3:9] == ["-p", PLUGIN_MODULE, "-p", "asyncio", "-p", "timeout"]
    assert "no:randomly" in argv and argv[-1] == "tests/test_a.py"


def test_an_env_without_plugins_names_none(tmp_path: Path) -> None:
    env = _env(tmp_path, {})
    assert env_plugins(env) == []
    assert pytest_argv(env, "/workspace", [], []) == pytest_argv(env, "/workspace")
