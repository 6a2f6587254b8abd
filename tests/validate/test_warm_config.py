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

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from swemill.suite import pytest_plugin
from swemill.suite.runner import PLUGIN_MODULE
from swemill.validate.warm import SERVER_PATH

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


def _ask(proc: subprocess.Popen[bytes], request: dict) -> dict:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(request).encode() + b"\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def test_config_shapes_run_warm_and_cold(tmp_path: Path) -> None:
    for rel, text in FILES.items():
        (tmp_path / rel).write_text(textwrap.dedent(text))
    shutil.copy(PLUGIN, tmp_path / f"{PLUGIN_MODULE}.py")  # as in an env's site-packages
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "SWEMILL_WARM_PREIMPORT": "calc"}
    proc = subprocess.Popen([sys.executable, "-u", str(SERVER_PATH), str(tmp_path)],
                            cwd=tmp_path, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        assert ready["ready"] and ready["preloaded"] == ["calc.py"]
        # swemill's reporter keeps the settings of the plugins the runs turn off known
        args = ["-p", PLUGIN_MODULE, "-p", "localplugin", "-p", "no:cacheprovider",
                "-p", "no:junitxml", "-q", "-o", "addopts=", "--strict-config"]
        warm = _ask(proc, {"id": 1, "args": args, "timeout": 60})
        assert (warm["exit_code"], warm["outcomes"]) == (0, {"test_calc.py::test_double":
                                                             "passed"}), warm["log_tail"]

        (tmp_path / "calc.py").write_text("def double(x):\n    return 3 * x\n")
        stale = _ask(proc, {"id": 2, "args": args, "timeout": 60})
        assert stale["outcomes"] == {"test_calc.py::test_double": "passed"}  # the fork's calc
        cold = _ask(proc, {"id": 3, "args": args, "timeout": 60, "cold": True})
        assert cold["exit_code"] == 1, cold["log_tail"]
        assert cold["outcomes"] == {"test_calc.py::test_double": "failed"}
        assert "assert 6 == 4" in cold["messages"]["test_calc.py::test_double"]
    finally:
        assert proc.stdin is not None
        proc.stdin.write(b'{"op": "exit"}\n')
        proc.stdin.close()
        proc.wait(timeout=30)
