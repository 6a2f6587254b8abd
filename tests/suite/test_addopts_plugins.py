"""Plugins that add options of their own, or items that are not tests, are off in every run.

Regression class: zipp 3.20.2 and inflect 7.4.0 in the zoo (the jaraco skeleton). Their tox
environment installs pytest-enabler, pytest-cov, pytest-ruff and pytest-checkdocs. pytest-enabler
is a second ``addopts`` (which swemill replaces): it added ``--cov``, whose tracer replaced
swemill's coverage and left the coverage map empty, and ``--ruff``, whose lint items became
"tests"; pytest-checkdocs added an item that builds the project's metadata with pip from the
index (9 s, and a failure in a sandbox without network). With no coverage map every candidate
ran the whole suite, 22 s each on zipp, and ``swemill tasks`` ran past its 600 s budget.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from swemill.repo.envbuild import build_env
from swemill.repo.sources import resolve_source
from swemill.suite.baseline import run_baseline

pytestmark = [pytest.mark.slow, pytest.mark.network]

FILES = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "enablerdemo"
        version = "0.1"
        readme = "README.rst"
        [project.optional-dependencies]
        test = ["pytest-enabler>=2.2", "pytest-cov", "pytest-ruff", "pytest-checkdocs>=2.4",
                "pytest-mypy-plugins"]
        [tool.setuptools]
        packages = ["enablerdemo"]
        """,
    "README.rst": "enablerdemo\n===========\n",
    "enablerdemo/__init__.py": """
        import os


        def double(x):
            return 2 * x
        """,
    "tests/test_types.yml": """
        - case: double_is_int
          main: |
            from enablerdemo import double
            reveal_type(double(2))  # N: Revealed type is "Any"
        """,
    "tests/test_double.py": """
        from enablerdemo import double


        def test_double():
            assert double(2) == 4
        """,
}


def test_enabler_and_checkdocs_add_nothing_and_coverage_is_kept(tmp_path: Path) -> None:
    root = tmp_path / "enablerdemo"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text).lstrip())
    cache = tmp_path / "cache"
    env = build_env(resolve_source(str(root), cache=cache), cache=cache)
    assert env.skipped == []  # the plugins are installed: the runs must turn them off
    b = run_baseline(env, backend="auto", runs=1, suite_timeout=300)
    # no ruff items (the unused import would fail one), no checkdocs '.::project' item, no
    # mypy case from the YAML file (each runs mypy in a subprocess)
    assert b.outcomes == {"tests/test_double.py::test_double": "passed"}
    assert b.coverage["enablerdemo/__init__.py::double"] == ["tests/test_double.py::test_double"]
    assert b.uncovered == []
    assert "-p no:enabler" in b.test_cmd and "-p no:checkdocs" in b.test_cmd
    assert "-p no:pytest-mypy-plugins" in b.test_cmd
