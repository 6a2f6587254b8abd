"""The inside package against the lowest pytest it claims (``PYTEST_LOWEST``) and the newest
(this environment's): in a uv venv holding only that pytest -- no swemill, as in a
repository's environment -- the warm server starts, runs forked and cold, serves a body edit
from its head image with the outcome and report of a fresh run, and its report cache and
code cache engage (the private pytest hooks they replace have the shape they know)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.validate.inside_server import Server

from swemill.validate.inside import PYTEST_LOWEST

pytestmark = pytest.mark.slow

LIB = "FACTOR = 2\n\n\ndef double(x):\n    return x * FACTOR\n"
TESTS = ("from lib import double\n\n\ndef test_double():\n    value = double(2)\n"
         "    assert value == 4\n\n\ndef test_zero():\n    assert double(0) == 0\n")


@pytest.fixture(scope="module", params=["lowest", "newest"])
def python(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    if request.param == "newest":
        return sys.executable
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed")
    venv = tmp_path_factory.mktemp("lowest-pytest") / "venv"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    lowest = f"pytest=={PYTEST_LOWEST}.*"
    subprocess.run([uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
                    lowest], check=True)
    return str(venv / "bin" / "python")


def _version(python: str) -> str:
    out = subprocess.run([python, "-c", "import pytest; print(pytest.__version__)"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_the_warm_server_and_its_fast_paths_work_on_this_pytest(python: str,
                                                                 tmp_path: Path) -> None:
    if python != sys.executable:
        assert _version(python).startswith(PYTEST_LOWEST + ".")
        check = subprocess.run([python, "-c", "import swemill"], capture_output=True)
        assert check.returncode != 0  # no swemill there, as inside a repository's env
    # the code cache wraps this private function of pytest's (it leaves it alone otherwise)
    hook = "from _pytest.assertion import rewrite; assert callable(rewrite._rewrite_test)"
    assert subprocess.run([python, "-c", hook], check=False).returncode == 0
    (tmp_path / "lib.py").write_text(LIB)
    (tmp_path / "test_lib.py").write_text(TESTS.replace("== 4", "== 5"))
    srv = Server(tmp_path, python=python)
    ids = ["test_lib.py::test_double", "test_lib.py::test_zero"]
    try:
        runs = [srv.run(["test_lib.py"], 60) for _ in range(3)]
        cold = srv.run(["test_lib.py"], 60, cold=True)
        (tmp_path / "test_lib.py").write_text(TESTS)
        assert srv.start_image(60)["ready"]
        (tmp_path / "lib.py").write_text(LIB.replace("x * FACTOR", "x + FACTOR + 1"))
        hot = srv.in_image(ids, 60, hotpatch=["lib.py"])
        fresh = srv.run(ids, 60)
    finally:
        srv.close()
    for run in [*runs, cold]:
        assert run["exit_code"] == 1, run["log_tail"]
        assert run["outcomes"] == {ids[0]: "failed", ids[1]: "passed"}
        assert "assert 4 == 5" in run["messages"][ids[0]]
    assert [r["cached_asts"] for r in runs] == [0, 1, 1]  # the report cache engaged
    assert runs[0]["messages"] == runs[2]["messages"] == cold["messages"]
    assert hot["hotpatched"] == 1 and hot["exit_code"] == fresh["exit_code"] == 1
    assert hot["outcomes"] == fresh["outcomes"] == dict.fromkeys(ids, "failed")
    addresses = re.compile(r"0x[0-9a-f]+")
    assert addresses.sub("", hot["messages"][ids[0]]) == \
        addresses.sub("", fresh["messages"][ids[0]])
