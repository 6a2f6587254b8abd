"""Install recipes are detected from a repository's own files; a user's file overrides."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from swemill.core.errors import ConfigError
from swemill.repo.recipe import (
    Recipe,
    detect_recipe,
    filter_addopts,
    has_tests,
    load_recipe,
    resolve_recipe,
)


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_pyproject_test_extras_groups_and_pytest_config(tmp_path: Path) -> None:
    r = detect_recipe(write(tmp_path, {"pyproject.toml": """
        [project]
        name = "p"
        requires-python = ">=3.9"
        [project.optional-dependencies]
        tests = ["hypothesis"]
        dev = ["black", "pytest-mock"]
        docs = ["sphinx"]
        [dependency-groups]
        test = ["pytest-xdist", {include-group = "base"}]
        base = ["freezegun"]
        [tool.pytest.ini_options]
        addopts = "-ra --strict-markers -n auto --cov=p --cov-report term -x -p no:warnings"
        testpaths = ["tests"]
        asyncio_mode = "auto"
        """}))
    assert r.requires_python == ">=3.9"
    assert r.extras == ["tests"]  # a test extra wins; dev and docs are not installed
    assert r.packages == ["pytest-xdist", "freezegun", "pytest-asyncio"]
    assert r.pytest_args == ["-ra", "--strict-markers", "-p", "no:warnings"]  # as pytest reads it
    assert r.test_paths == ["tests"]
    assert r.all_packages()[-2:] == ["pytest", "coverage>=5"]


def test_dev_extra_is_used_without_its_lint_and_docs_tools(tmp_path: Path) -> None:
    r = detect_recipe(write(tmp_path, {"pyproject.toml": """
        [project]
        name = "p"
        [project.optional-dependencies]
        dev = ["black", "sphinx>=7", "flake8", "pytest-mock>=3", "mypy", "hypothesis"]
        """}))
    assert r.extras == [] and r.packages == ["pytest-mock>=3", "hypothesis"]


def test_requirements_setup_cfg_setup_py_and_tox(tmp_path: Path) -> None:
    r = detect_recipe(write(tmp_path, {
        "requirements.txt": "requests\n",
        "requirements-test.txt": "pytest-timeout\n",
        "requirements/dev.txt": "black\nresponses\n",
        "setup.cfg": """
            [options]
            python_requires = >=3.8
            [options.extras_require]
            testing = mock
            docs = sphinx
            [tool:pytest]
            addopts = --doctest-modules --maxfail=2 --durations 10
            """,
        "setup.py": "from setuptools import setup\n"
                    "setup(name='p', tests_require=['nose2'], extras_require={'test': ['x']})\n",
        "tox.ini": """
            [testenv]
            deps =
                -r{toxinidir}/requirements.txt
                pytest-cov
                {env:EXTRA:}
            extras = tests
            """,
    }))
    assert r.requirement_files == ["requirements-test.txt", "requirements.txt"]
    assert r.extras == ["testing", "test", "tests"]
    assert "nose2" in r.packages and "pytest-cov" in r.packages and "responses" not in r.packages
    assert r.requires_python == ">=3.8"
    assert r.pytest_args == ["--doctest-modules"]
    assert any("setup.py" in e for e in r.evidence) and any("tox.ini" in e for e in r.evidence)


def test_pytest_ini_wins_over_pyproject(tmp_path: Path) -> None:
    r = detect_recipe(write(tmp_path, {
        "pytest.ini": "[pytest]\naddopts = -rs\n",
        "pyproject.toml": "[tool.pytest.ini_options]\naddopts = '-v'\n",
    }))
    assert r.pytest_args == ["-rs"]


@pytest.mark.parametrize(("given", "kept"), [
    (["-n", "4", "-q", "--tb=long"], ["--tb=long"]),
    (["-n4", "--numprocesses=2", "--dist", "load", "-rA"], ["-rA"]),
    (["--cov", "pkg", "--cov-branch", "-p", "randomly", "--import-mode=importlib"],
     ["--import-mode=importlib"]),
    (["--lf", "--randomly-seed=3", "--random-order", "-Werror"], ["-Werror"]),
    (["-p", "pytester", "-ptests.plugin", "-p", "no:warnings", "-pxdist", "-p", "no:xdist"],
     ["-p", "pytester", "-p", "tests.plugin", "-p", "no:warnings", "-p", "no:xdist"]),
    (["--ruff", "--ruff-format", "--mypy", "--flake8", "--doctest-modules"],
     ["--doctest-modules"]),  # lint items judge style, never behaviour
])
def test_filter_addopts(given: list[str], kept: list[str]) -> None:
    assert filter_addopts(given) == kept


def test_has_tests(tmp_path: Path) -> None:
    write(tmp_path, {"pkg/__init__.py": "", ".hidden/test_x.py": "", "build/test_y.py": ""})
    assert not has_tests(tmp_path)
    write(tmp_path, {"pkg/tests/test_core.py": ""})
    assert has_tests(tmp_path)


def test_recipe_file_overrides_and_bad_files_are_clear_errors(tmp_path: Path) -> None:
    good = tmp_path / "recipe.json"
    good.write_text(Recipe(packages=["six"], pytest_args=["-rs"]).model_dump_json())
    assert load_recipe(good).packages == ["six"]
    toml = tmp_path / "recipe.toml"
    toml.write_text('extras = ["test"]\neditable = false\n')
    assert load_recipe(toml).extras == ["test"] and not load_recipe(toml).editable
    with pytest.raises(ConfigError, match="no such recipe file"):
        load_recipe(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"extras": "not-a-list", "surprise": 1}')
    with pytest.raises(ConfigError, match="is not a valid recipe"):
        load_recipe(bad)


def test_tox_toml_noxfile_setup_py_expressions_and_tox_groups(tmp_path: Path) -> None:
    r = detect_recipe(write(tmp_path, {
        "pyproject.toml": """
            [project]
            name = "p"
            [dependency-groups]
            lint = ["ruff"]
            typing = ["typeguard"]
            """,
        "tox.toml": """
            [env_run_base]
            deps = ["pytest-timeout", "-r{tox_root}/req-extra.txt", "{env:X}"]
            extras = ["speedups"]
            dependency_groups = ["typing"]
            """,
        "req-extra.txt": "freezegun\n",
        "noxfile.py": """
            import nox
            TEST_DEPS = ["hypothesis", "pytest-xdist"]

            @nox.session
            def tests(session):
                session.install("-e", ".[testing,yaml]", "--group", "lint")
                session.install(*TEST_DEPS, "-r", "ci/nox-req.txt", "sphinx")
                session.run("pytest")

            @nox.session
            def docs(session):
                session.install("furo-not-for-tests")
            """,
        "ci/nox-req.txt": "responses\n",
        "setup.py": "from setuptools import setup\nEXTRAS = {'full': ['a']}\n"
                    "setup(name='p', extras_require={'test': EXTRAS['full'] + ['b'], "
                    "**{'docs': []}})\n",
    }))
    assert r.requirement_files == ["req-extra.txt", "ci/nox-req.txt"]
    assert set(r.extras) == {"speedups", "testing", "yaml", "test"}
    assert {"pytest-timeout", "typeguard", "hypothesis", "pytest-xdist"} <= set(r.packages)
    # lint/docs tools and a session that is not a test session are left out
    assert not {"ruff", "sphinx", "furo-not-for-tests"} & set(r.packages)
    assert {"tox.toml: test dependencies", "noxfile.py: test dependencies",
            "setup.py: extras ['test']"} <= set(r.evidence)


def test_committed_recipe_and_a_recipe_that_adds_to_detection(tmp_path: Path) -> None:
    root = write(tmp_path / "repo", {
        "pyproject.toml": """
            [project]
            name = "p"
            [project.optional-dependencies]
            test = ["hypothesis"]
            [tool.pytest.ini_options]
            addopts = "-rs"
            """})
    assert resolve_recipe(root).extras == ["test"]
    write(root, {".swemill/recipe.toml": 'packages = ["numpy"]\npytest_args = ["-k", "fast"]\n'})
    committed = resolve_recipe(root)  # replaces detection
    assert (committed.extras, committed.packages) == ([], ["numpy"])
    assert committed.evidence == [".swemill/recipe.toml"]
    write(root, {".swemill/recipe.toml": 'detect = true\npackages = ["numpy"]\n'})
    added = resolve_recipe(root)
    assert (added.extras, added.packages, added.pytest_args) == (["test"], ["numpy"], ["-rs"])
    given = Recipe(detect=True, pytest_args=["-x0"], python="3.12")  # --recipe wins over both
    mine = resolve_recipe(root, given)
    assert (mine.extras, mine.packages, mine.pytest_args, mine.python) == (
        ["test"], [], ["-x0"], "3.12")
    write(root, {".swemill/recipe.toml": 'python = "/tmp/x/evil"\n'})
    with pytest.raises(ConfigError, match="python must be a version like 3.12"):
        resolve_recipe(root)  # the host would run the named program to build the venv
    write(root, {".swemill/recipe.toml": "surprise = 1\n"})
    with pytest.raises(ConfigError, match="recipe.toml is not a valid recipe"):
        resolve_recipe(root)


def test_a_conftest_hook_taking_a_py_path_pins_pytest_below_9(tmp_path: Path) -> None:
    # wrapt 1.16.0's tests/conftest.py: pytest 9 refuses to start on it ("Argument(s)
    # {'path'} are declared in the hookimpl but can not be found in the hookspec")
    r = detect_recipe(write(tmp_path / "old", {
        "setup.py": "from setuptools import setup\nsetup(name='p')\n",
        "tests/conftest.py": """
            def pytest_pycollect_makemodule(path, parent):
                return None
            """,
        "tests/test_p.py": "def test_p():\n    pass\n"}))
    assert "pytest<9" in r.packages
    assert any(e.startswith("tests/conftest.py: pytest_pycollect_makemodule(path)")
               for e in r.evidence), r.evidence
    assert r.all_packages()[-2:] == ["pytest<9", "coverage>=5"]  # no second, unpinned pytest


@pytest.mark.parametrize("conftest", [
    "def pytest_pycollect_makemodule(module_path, parent):\n    return None\n",
    "def pytest_report_header(config, start_path):\n    return []\n",
    "def path(startdir):\n    pass\n",  # not a hook
    "def pytest_collect_file(file_path, parent:\n",  # does not parse: ignored
])
def test_current_hooks_and_other_functions_pin_nothing(tmp_path: Path, conftest: str) -> None:
    r = detect_recipe(write(tmp_path / "new", {"conftest.py": conftest,
                                               "test_p.py": "def test_p():\n    pass\n"}))
    assert not any(p.startswith("pytest") for p in r.packages), r.packages


def test_a_legacy_hook_in_a_hidden_or_build_directory_pins_nothing(tmp_path: Path) -> None:
    hook = "def pytest_report_header(config, startdir):\n    return []\n"
    r = detect_recipe(write(tmp_path / "p", {".tox/py/conftest.py": hook,
                                             "build/lib/conftest.py": hook}))
    assert r.packages == []
    r = detect_recipe(write(tmp_path / "q", {"tests/conftest.py": hook}))
    assert r.packages == ["pytest<9"]


def test_test_modules_named_test_py_are_added_to_what_pytest_collects(tmp_path: Path) -> None:
    # decorator 5.1.1: its only test module is src/tests/test.py ("no tests found")
    root = write(tmp_path / "deco", {"setup.py": "from setuptools import setup\nsetup()\n",
                                     "src/deco.py": "", "src/tests/__init__.py": "",
                                     "src/tests/test.py": "import unittest\n"})
    assert has_tests(root)
    r = detect_recipe(root)
    assert r.pytest_args == ["-o", "python_files=test_*.py *_test.py test.py tests.py"]
    assert "test modules pytest's default names miss: ['src/tests/test.py']" in r.evidence


@pytest.mark.parametrize("files", [
    {"tests/test.py": "", "tests/test_more.py": ""},  # pytest's defaults collect a module
    {"test.py": "", "pytest.ini": "[pytest]\npython_files = test.py\n"},  # configured
    {"tools/test.py": "", "pkg/tests.py": "x = 1\n"},  # not in a test folder or the root
])
def test_python_files_is_left_alone_otherwise(tmp_path: Path, files: dict[str, str]) -> None:
    r = detect_recipe(write(tmp_path / "p", files))
    assert not any("python_files" in a for a in r.pytest_args), r.pytest_args


def test_pdm_and_poetry_test_groups_are_installed(tmp_path: Path) -> None:
    # unearth 0.17.2: its conftest imports flask, declared only in [tool.pdm.dev-dependencies]
    r = detect_recipe(write(tmp_path / "pdm", {"pyproject.toml": """
        [project]
        name = "p"
        [tool.pdm.dev-dependencies]
        test = ["pytest>=6.1", "flask>=2.1.2", "-e file:///${PROJECT_ROOT}/sub"]
        doc = ["sphinx", "furo"]
        """}))
    assert r.packages == ["pytest>=6.1", "flask>=2.1.2"]
    assert "pyproject.toml: [tool.pdm.dev-dependencies] test" in r.evidence
    r = detect_recipe(write(tmp_path / "poetry", {"pyproject.toml": """
        [tool.poetry]
        name = "p"
        [tool.poetry.dependencies]
        python = "^3.9"
        [tool.poetry.group.test.dependencies]
        pytest-mock = "^3.0"
        [tool.poetry.group.docs.dependencies]
        sphinx = "*"
        [tool.poetry.dev-dependencies]
        black = "*"
        freezegun = "^1.2"
        """}))
    # the test group wins over dev, as for PEP 735; poetry's caret as its lower bound
    assert r.packages == ["pytest-mock>=3.0"]
    r = detect_recipe(write(tmp_path / "legacy", {"pyproject.toml": """
        [tool.poetry.dev-dependencies]
        python = "^3.9"
        black = "*"
        freezegun = "^1.2"
        pytest-mypy = { version = "^0.10.2", markers = "platform_python_implementation != 'PyPy'" }
        typing-extensions = { version = "^3.10.0 || ^4.0.0", python = "<=3.7" }
        pytest-x = { git = "https://example.invalid/pytest-x.git" }
        pytest-y = [{ version = "^1", python = "<3.8" }, { version = "^2", python = ">=3.8" }]
        pytest-z = "~2.1"
        pytest-w = ">=1,>=1.5,<3"
        pytest-v = "<2"
        """}))
    assert r.packages == [
        "freezegun>=1.2",
        'pytest-mypy>=0.10.2; platform_python_implementation != "PyPy"',
        "typing-extensions",  # poetry-core writes `>=3.10.0,<4.0.0 || >=4.0.0,<5.0.0`: no PEP 508
        "pytest-x",  # a git source is never fetched: the name, from the index
        "pytest-y",  # one constraint per Python: the name
        "pytest-z>=2.1",
        "pytest-w>=1.5",  # the highest lower bound
        "pytest-v"]  # an upper bound alone: the name


def test_a_requirements_line_naming_the_project_itself_asks_for_its_test_extras(
        tmp_path: Path) -> None:
    # jsonpickle 3.3.0's requirements-dev.txt is `.[dev,docs,testing]`: it was passed to uv
    # as a package, which refused it ("Building source distributions is disabled") and the run
    # said the tests ran without it; the `testing` extra it names is what the tests need
    r = detect_recipe(write(tmp_path, {
        "requirements-dev.txt": ".[dev,docs,testing]\nresponses\n",
        "setup.py": "from setuptools import setup\nsetup(name='p')\n"}))
    assert r.packages == ["responses"]
    assert r.extras == ["testing"]
    # in a test requirements file too (its local lines are dropped at install)
    r = detect_recipe(write(tmp_path / "t", {"requirements-test.txt": "-e .[test,docs]\nmock\n"}))
    assert r.requirement_files == ["requirements-test.txt"] and r.extras == ["test"]
