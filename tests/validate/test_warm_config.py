"""The warm server runs a suite as ``python -m pytest`` in its folder would, over its
JSON-lines protocol in a real subprocess (issue 14, harness robustness).

Regression classes: under ``filterwarnings = error``, pytest's "already imported so cannot be
rewritten" warning about the installed plugins the server had imported while warming up
ended every run with exit 4, and so did "unknown config option" for the settings
(``junit_family``, ``cache_dir``) of the built-in plugins swemill's runs turn off;
``-p localplugin`` (a module beside the tests) was not found
because the working directory was not on ``sys.path``; and a module the server imported
before forking (``preloaded``) hid every edit of it from the forks, where a ``cold`` run sees
it; a conftest reading ``sys.argv`` saw the server's.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from tests.validate.inside_server import Server

from swemill.suite import pytest_plugin
from swemill.suite.runner import PLUGIN_MODULE
from swemill.validate.inside.serve_loop import RUN_IMPORTS

PLUGIN = Path(pytest_plugin.__file__)

FILES = {
    "pytest.ini": """\
        [pytest]
        filterwarnings = error
        addopts = --strict-config
        localplugin_unit = cm
        junit_family = xunit2
        cache_dir = .cache/pytest
        """,
    "localplugin.py": """\
        import pytest


        def pytest_addoption(parser):
            parser.addini("localplugin_unit", "a unit", default="m")


        @pytest.fixture
        def unit(request):
            return request.config.getini("localplugin_unit")
        """,
    "calc.py": """\
        def double(x):
            return 2 * x
        """,
    "test_calc.py": """\
        import sys

        import calc


        def test_double(unit):
            assert unit == "cm"
            assert sys.argv[0].endswith("__main__.py") and "localplugin" in sys.argv
            assert calc.double(2) == 4
        """,
}


def test_config_shapes_run_warm_and_cold(tmp_path: Path) -> None:
    for rel, text in FILES.items():
        (tmp_path / rel).write_text(textwrap.dedent(text))
    shutil.copy(PLUGIN, tmp_path / f"{PLUGIN_MODULE}.py")  # as in an env's site-packages
    srv = Server(tmp_path, env={"SWEMILL_WARM_PREIMPORT": "calc"}, plain=True)
    try:
        assert srv.ready["preloaded"] == ["calc.py"]
        # swemill's reporter keeps the settings of the plugins the runs turn off known
        args = ["-p", PLUGIN_MODULE, "-p", "localplugin", "-p", "no:cacheprovider",
                "-p", "no:junitxml", "-q", "-o", "addopts=", "--strict-config"]
        warm = srv.run(args, 60)
        assert (warm["exit_code"], warm["outcomes"]) == (0, {"test_calc.py::test_double":
                                                             "passed"}), warm["log_tail"]

        (tmp_path / "calc.py").write_text("def double(x):\n    return 3 * x\n")
        stale = srv.run(args, 60)
        assert stale["outcomes"] == {"test_calc.py::test_double": "passed"}  # the fork's calc
        cold = srv.run(args, 60, cold=True)
        assert cold["exit_code"] == 1, cold["log_tail"]
        assert cold["outcomes"] == {"test_calc.py::test_double": "failed"}
        assert "assert 6 == 4" in cold["messages"]["test_calc.py::test_double"]
    finally:
        srv.close()


def test_a_repository_that_is_a_pytest_plugin_is_not_preloaded(tmp_path: Path) -> None:
    """pytest assertion-rewrites a ``pytest11`` plugin's modules. The server imports the
    installed plugins before forking, unrewritten; when the plugin is the repository itself
    its own tests read the rewritten messages (pytest-mock 3.14.0's introspection tests failed
    in every warm run and passed cold). The repository's plugin is left to each run."""
    work, site = tmp_path / "work", tmp_path / "site"
    work.mkdir()
    (work / "wsplugin.py").write_text("def check(x):\n    assert x == 1\n")
    (work / "test_plugin_asserts.py").write_text(textwrap.dedent("""\
        import pytest

        import wsplugin


        def test_message_is_rewritten():
            with pytest.raises(AssertionError) as err:
                wsplugin.check(2)
            assert "2 == 1" in str(err.value)
        """))
    meta = site / "wsplugin-0.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: wsplugin\nVersion: 0\n")
    (meta / "entry_points.txt").write_text("[pytest11]\nwsplugin = wsplugin\n")
    (meta / "RECORD").write_text("wsplugin.py,,\n")  # what pytest marks for rewriting
    shutil.copy(PLUGIN, work / f"{PLUGIN_MODULE}.py")
    srv = Server(work, env={"PYTHONPATH": f"{work}:{site}"}, plain=True)
    try:
        assert "wsplugin.py" not in srv.ready["preloaded"]
        args = ["-p", PLUGIN_MODULE, "-p", "no:cacheprovider", "-q", "-o", "addopts="]
        for cold in (False, True):
            out = srv.run(args, 60, cold=cold)
            assert out["outcomes"] == {"test_plugin_asserts.py::test_message_is_rewritten":
                                       "passed"}, (cold, out["log_tail"])
    finally:
        srv.close()


def test_an_installed_plugin_that_imports_the_repository_is_left_to_the_run(
        tmp_path: Path) -> None:
    """An installed plugin (outside the workspace) that imports the repository's package at
    import (attrs 24.2.0: ``pytest-mypy-plugins`` imports ``attrs``) used to be loaded by the
    warm-up with the workspace module: ``preloaded``, so a grading server was refused and a
    validation tree editing that module ran cold. The warm-up leaves that plugin to the runs,
    and a fork sees the module as it is on disk when it runs."""
    work, site = tmp_path / "work", tmp_path / "site"
    work.mkdir()
    (work / "calc.py").write_text("VALUE = 1\n")
    (work / "test_calc.py").write_text(textwrap.dedent("""\
        import sys

        import calc


        def test_value():
            assert "extplugin" in sys.modules
            assert calc.VALUE == 2
        """))
    site.mkdir()
    (site / "extplugin.py").write_text("import calc\n\nSEEN = calc.VALUE\n")
    meta = site / "extplugin-0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: extplugin\nVersion: 0\n")
    (meta / "entry_points.txt").write_text("[pytest11]\nextplugin = extplugin\n")
    shutil.copy(PLUGIN, work / f"{PLUGIN_MODULE}.py")
    srv = Server(work, env={"PYTHONPATH": f"{work}:{site}"})
    try:
        assert srv.ready["preloaded"] == []
        (work / "calc.py").write_text("VALUE = 2\n")  # the policy's (or a candidate's) edit
        for cold in (False, True):
            out = srv.run([], 60, cold=cold)
            assert out["outcomes"] == {"test_calc.py::test_value": "passed"}, \
                (cold, out["log_tail"])
    finally:
        srv.close()


def test_modules_every_run_imports_are_warmed_up_unless_the_workspace_shadows_them(
        tmp_path: Path) -> None:
    """The warm-up imports the modules pytest itself imports in every run (``pdb``,
    ``readline``, ...) once, so a fork does not; a workspace file of the same name
    (``getpass.py`` here) is left to the run, which imports that file as a cold run does."""
    (tmp_path / "getpass.py").write_text("WHERE = 'workspace'\n")
    (tmp_path / "test_names.py").write_text(textwrap.dedent("""\
        import sys

        import getpass


        def test_the_workspace_module_is_the_one_imported():
            assert getattr(getpass, "WHERE", None) == "workspace"


        def test_pytest_imported_pdb_before_the_tests():
            assert "pdb" in sys.modules
        """))
    srv = Server(tmp_path)
    try:
        assert srv.ready["preloaded"] == []
        assert set(RUN_IMPORTS) >= {"pdb", "readline", "getpass"}
        for cold in (False, True):
            res = srv.run([], 60, cold=cold)
            assert res["exit_code"] == 0, res["log_tail"]
            assert set(res["outcomes"].values()) == {"passed"} and len(res["outcomes"]) == 2
    finally:
        srv.close()


def test_a_workspace_module_that_a_warmed_up_module_imports_is_left_to_the_run(
        tmp_path: Path) -> None:
    """``pdb`` (warmed up) imports ``code``; a workspace ``code.py`` shadows it in a cold run
    (the working directory comes first on ``sys.path``). The warm-up never runs that file and
    leaves ``pdb`` to the run, so the server preloads no workspace file (one would send every
    grading of the task cold) and each run imports the workspace ``code.py`` as a cold run
    does."""
    (tmp_path / "code.py").write_text("WHERE = 'workspace'\nimport os\n"
                                      "open(os.environ['RAN_AT'], 'a').write('ran\\n')\n")
    (tmp_path / "test_code.py").write_text(textwrap.dedent("""\
        import sys


        def test_pdb_came_with_the_workspace_code_module():
            assert "pdb" in sys.modules
            assert getattr(sys.modules["code"], "WHERE", None) == "workspace"
        """))
    ran_at = tmp_path / "ran.txt"
    srv = Server(tmp_path, env={"RAN_AT": str(ran_at)})
    try:
        assert srv.ready["preloaded"] == []
        assert not ran_at.exists()  # the warm-up never ran it
        for cold in (False, True):
            res = srv.run([], 60, cold=cold)
            assert res["exit_code"] == 0, res["log_tail"]
            assert res["outcomes"] == {
                "test_code.py::test_pdb_came_with_the_workspace_code_module": "passed"}
        assert ran_at.read_text() == "ran\n" * 2  # once in each run
    finally:
        srv.close()
