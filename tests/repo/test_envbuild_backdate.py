"""An older source whose build the newest build requirements break is built again with the
build requirements of its own date (``uv pip install --exclude-newer``).

Regression: tinydb 4.8.0's sdist (2023) names an unpinned ``poetry-core``; poetry-core 2.x
renders its ``^3.10.0 || ^4.0.0`` constraint as metadata uv refuses ("Trailing `|| >=4.0.0`
is not allowed"), so its environment could not be built at all.

The project here fails the same way on purpose, deterministically: its in-tree backend (a
thin wrapper over setuptools') refuses a setuptools released after the project, the way an
old backend or an old ``setup.py`` breaks on a newer one.
"""

from __future__ import annotations

import os
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from swemill.core.errors import EnvBuildError
from swemill.repo.envbuild import build_env
from swemill.repo.sources import resolve_source, source_date

pytestmark = [pytest.mark.slow, pytest.mark.network]

MADE = datetime(2023, 5, 1, 12, 0, tzinfo=UTC)  # setuptools 67.7 was current then

BACKEND = """
    import setuptools
    from setuptools import build_meta as _meta
    from setuptools.build_meta import *  # noqa: F401,F403

    MAJOR = int(setuptools.__version__.split(".")[0])

    def _check():
        if MAJOR >= {limit}:
            raise RuntimeError(f"olddemo builds with setuptools < {limit}, "
                               f"not {{setuptools.__version__}}")

    def build_editable(*args, **kwargs):
        _check()
        return _meta.build_editable(*args, **kwargs)

    def build_wheel(*args, **kwargs):
        _check()
        return _meta.build_wheel(*args, **kwargs)
    """


def make_old_project(root: Path, limit: int, when: datetime) -> Path:
    files = {
        "pyproject.toml": """
            [build-system]
            requires = ["setuptools"]
            build-backend = "oldbackend"
            backend-path = ["_build"]
            [project]
            name = "olddemo"
            version = "0.1"
            [tool.setuptools]
            packages = ["olddemo"]
            """,
        "_build/oldbackend.py": BACKEND.format(limit=limit),
        "olddemo/__init__.py": "VALUE = 1\n",
        "tests/test_value.py": "from olddemo import VALUE\n\n"
                               "def test_value():\n    assert VALUE == 1\n",
    }
    stamp = when.timestamp()
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        os.utime(path, (stamp, stamp))
    return root


def test_a_source_date_is_its_newest_file_for_a_tree_swemill_committed(
        tmp_path: Path, shared_cache: Path) -> None:
    src = resolve_source(str(make_old_project(tmp_path / "p", 68, MADE)), cache=shared_cache)
    assert source_date(src.path) == MADE  # the snapshot commit is swemill's, dated 2000


def test_the_build_is_tried_again_with_the_build_requirements_of_the_source_date(
        tmp_path: Path, shared_cache: Path) -> None:
    src = resolve_source(str(make_old_project(tmp_path / "p", 68, MADE)), cache=shared_cache)
    env = build_env(src, cache=shared_cache)
    evidence = "\n".join(env.recipe.evidence)
    assert "built with the build requirements of 2023-05-01T12:00:00Z" in evidence
    assert "olddemo builds with setuptools < 68" in evidence  # why the newest failed
    versions = [p.name for p in env.venv.glob("lib/python*/site-packages/setuptools-*")]
    assert len(versions) == 1 and versions[0].startswith("setuptools-67."), versions


def test_a_build_that_fails_at_its_own_date_too_names_the_first_cause(
        tmp_path: Path, shared_cache: Path) -> None:
    src = resolve_source(str(make_old_project(tmp_path / "p", 1, MADE)), cache=shared_cache)
    with pytest.raises(EnvBuildError) as info:
        build_env(src, cache=shared_cache)
    first = str(info.value).splitlines()[0]
    assert "again with the build requirements of 2023-05-01T12:00:00Z" in first
    assert "olddemo builds with setuptools < 1" in first
