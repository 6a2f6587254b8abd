"""A small fixture project whose pytest configuration combines the shapes that real suites
have and the warm server must run unchanged (issue 14, harness robustness):

- ``filterwarnings = error``, ``--strict-markers``, ``--strict-config`` (a marker, an ini
  option registered by a plugin the suite loads with ``-p``, and settings of built-in
  plugins swemill's runs turn off: ``junit_family``, ``cache_dir``);
- ``addopts`` with xdist and coverage flags (plain pytest here, without those plugins,
  would refuse them; swemill drops them) and ``-p tests.helpers.plugin``, a module found only
  because ``python -m pytest`` puts the working directory on ``sys.path``;
- ``testpaths`` over the tests and the sources, ``--doctest-modules``, unittest-style tests;
- a test module and a conftest that import packages that are not installed (collection errors
  that belong to the baseline);
- the ``-p`` plugin imports the package for a fixture: each run imports it (the warm server
  does not), and its fixture works. (The project was itself a pytest plugin, a ``pytest11``
  entry point, until such projects were refused: :mod:`swemill.repo.runner_code`.)
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

from .conftest import GIT_ENV

PYPROJECT = '''\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "shapes"
version = "0.1"
license = {text = "MIT"}

[tool.setuptools.packages.find]
where = ["src"]

[tool.pytest.ini_options]
testpaths = ["tests", "src/shapes"]
addopts = """-ra --strict-markers --strict-config -p tests.helpers.plugin -n 2 --dist loadscope
  --cov=shapes --cov-report=term-missing --doctest-modules"""
filterwarnings = ["error"]
markers = ["geometry: tests of the geometry module"]
shapes_unit = "cm"
junit_family = "xunit2"
cache_dir = ".cache/pytest"
'''

FILES = {
    "src/shapes/__init__.py": '''\
        """Shapes."""
        ''',
    "src/shapes/geometry.py": '''\
        def square_area(side):
            """The area of a square.

            >>> square_area(3)
            9
            """
            return side * side


        def rectangle_area(width, height):
            return width * height


        def perimeter(width, height):
            """
            >>> perimeter(2, 3)
            10
            """
            return 2 * (width + height)
        ''',
    # imported by the tests only, the ordinary way
    "src/shapes/circle.py": '''\
        import math


        def circle_area(radius):
            return math.pi * radius * radius


        def diameter(radius):
            """
            >>> diameter(2)
            4
            """
            return 2 * radius
        ''',
    "tests/__init__.py": "",
    "tests/helpers/__init__.py": "",
    # loaded with -p by every run; it imports the package (the server does not)
    "tests/helpers/plugin.py": '''\
        import pytest

        from shapes.geometry import square_area


        @pytest.fixture
        def unit_square():
            return square_area(1)


        def pytest_addoption(parser):
            parser.addini("shapes_unit", "unit the tests print lengths in", default="m")


        @pytest.fixture
        def unit(request):
            return request.config.getini("shapes_unit")
        ''',
    "tests/test_geometry.py": '''\
        import pytest

        from shapes.geometry import perimeter, rectangle_area, square_area


        @pytest.mark.geometry
        def test_square(unit_square):
            assert unit_square == 1
            assert square_area(4) == 16


        @pytest.mark.geometry
        def test_rectangle(unit):
            assert unit == "cm"
            assert rectangle_area(2, 5) == 10


        def test_perimeter():
            assert perimeter(1, 1) == 4
        ''',
    "tests/test_circle_unit.py": '''\
        import unittest

        from shapes.circle import circle_area, diameter


        class CircleTest(unittest.TestCase):
            def test_area(self):
                self.assertAlmostEqual(circle_area(1), 3.14159, places=4)

            def test_diameter(self):
                self.assertEqual(diameter(3), 6)
        ''',
    "tests/test_optional.py": '''\
        import shapes_optional_dependency  # not installed: a collection error at baseline


        def test_never_collected():
            assert shapes_optional_dependency
        ''',
    "tests/extra/__init__.py": "",
    "tests/extra/conftest.py": '''\
        import shapes_optional_plugin  # not installed: the folder does not collect
        ''',
    "tests/extra/test_extra.py": '''\
        def test_extra():
            assert True
        ''',
}


def make_shapes_repo(root: Path) -> str:
    """Write the project as a one-commit git repository at ``root``; its head commit."""
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "shapes"]):
        subprocess.run(["git", *args], cwd=root, env=GIT_ENV, check=True, capture_output=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, env=GIT_ENV, check=True,
                          capture_output=True, text=True).stdout.strip()
