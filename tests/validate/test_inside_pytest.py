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
from tests.pytest_venv import pytest_venv
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
    return pytest_venv(tmp_path_factory, PYTEST_LOWEST)


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
        # outcomes only: the same outcomes, a failure's exception line for its message
        terse = [srv.in_image(ids, 60, hotpatch=["lib.py"], terse=True),
                 srv.run(ids, 60, terse=True), srv.run(ids, 60, terse=True, cold=True)]
        again = srv.in_image(ids, 60, hotpatch=["lib.py"])  # the image formats as before
        # stopped at the first failure: the second test (failing too) never ran
        first = [srv.in_image(ids, 60, hotpatch=["lib.py"], terse=True, maxfail=1),
                 srv.run(ids, 60, terse=True, maxfail=1),
                 srv.run(ids, 60, terse=True, maxfail=1, cold=True)]
    finally:
        srv.close()
    for run in first:
        assert run["exit_code"] == 1 and run["outcomes"] == {ids[0]: "failed"}, run["log_tail"]
    for run in terse:
        assert run["exit_code"] == 1 and run["outcomes"] == fresh["outcomes"], run["log_tail"]
        message = run["messages"][ids[0]]
        assert message.startswith("AssertionError") and "test_lib.py:" not in message
        assert "FAILURES" not in run["log_tail"]
    assert again["messages"] == hot["messages"] and "test_lib.py:" in hot["messages"][ids[0]]
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


# Each test passes only when the code it runs is the grading server's, compiled before the run.
SERVED = '''import sys
import lib

def _codes():
    return sys.modules["swemill_inside.pristine_codes"].INSTALLED

def _within(code, module_code):
    return any(c is code for c in module_code.co_consts)

def test_double():
    assert lib.double(2) == EXPECTED

def test_lib_is_served():
    assert _within(lib.double.__code__, _codes().compiled[lib.__file__][1])

def test_this_module_is_served():
    assert _within(test_double.__code__, _codes().rewritten[__file__][2])
'''


def _grade(proc: subprocess.Popen[bytes], seq: int, args: list[str]) -> dict[str, str]:
    """One grading run; its tests' outcomes (from ``-rA``) and failure lines."""
    from swemill.validate.inside import protocol as wire

    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(wire.encode(wire.Grade(seq, [*args, "-rA"], timeout=60)))
    proc.stdin.flush()
    reply = wire.decode(proc.stdout.readline())
    assert isinstance(reply, wire.Graded) and reply.clean, reply
    return _outcomes(reply.stdout)


def _outcomes(stdout: str) -> dict[str, str]:
    rows = re.findall(r"^(PASSED|FAILED) test_\w+\.py::(\w+)(.*)$", stdout, re.M)
    errors = re.findall(r"^ERROR (test_\w+\.py)", stdout, re.M)
    return {**{name: (status + rest).strip() for status, name, rest in rows},
            **dict.fromkeys(errors, "ERROR")}


_ENV = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
_ARGS = ["-p", "no:cacheprovider", "-q", "--tb=line", "-o", "addopts="]


def _grading_server(python: str, root: Path,
                    env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    from swemill.validate.warm import INSIDE_DIR

    proc = subprocess.Popen([python, "-u", str(INSIDE_DIR / "__main__.py"), "--grade",
                             str(root)], cwd=root, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env or _ENV)
    assert proc.stdout is not None and b'"ready": true' in proc.stdout.readline()
    return proc


def _cold_and_warm(python: str, root: Path, env: dict[str, str] | None = None
                   ) -> tuple[dict[str, str], dict[str, str], str]:
    """The outcomes of ``python -m pytest`` in ``root``, of a grading server's run there, and
    the cold run's output."""
    cold = subprocess.run([python, "-m", "pytest", *_ARGS, "-rA"], cwd=root, env=env or _ENV,
                          capture_output=True, text=True, timeout=120)
    proc = _grading_server(python, root, env)
    try:
        warm = _grade(proc, 1, _ARGS)
    finally:
        proc.communicate(timeout=30)
    return _outcomes(cold.stdout), warm, cold.stdout


def test_the_grading_server_serves_pristine_code_and_compiles_what_changed(
        python: str, tmp_path: Path) -> None:
    (tmp_path / "lib.py").write_text(LIB)
    (tmp_path / "test_lib.py").write_text(SERVED.replace("EXPECTED", "5"))
    proc = _grading_server(python, tmp_path)
    args = [*_ARGS, "test_lib.py"]
    try:
        pristine = _grade(proc, 1, args)
        (tmp_path / "lib.py").write_text(LIB.replace("x * FACTOR", "x + 3"))  # the change
        fixed = _grade(proc, 2, args)
        (tmp_path / "test_lib.py").write_text(SERVED.replace("EXPECTED", "6"))
        retested = _grade(proc, 3, args)
    finally:
        proc.communicate(timeout=30)
    assert pristine == {"test_double": "FAILED - assert 4 == 5", "test_lib_is_served": "PASSED",
                        "test_this_module_is_served": "PASSED"}, pristine
    # a changed module is compiled from its new text: the fix is seen, the cache is not used
    assert fixed["test_double"] == "PASSED" and fixed["test_this_module_is_served"] == "PASSED"
    assert fixed["test_lib_is_served"].startswith("FAILED"), fixed
    # a changed test module is rewritten from its new text
    assert retested["test_double"] == "FAILED - assert 5 == 6", retested
    assert retested["test_this_module_is_served"].startswith("FAILED"), retested


def test_a_grading_run_starts_pytest_as_python_m_pytest_does(python: str,
                                                             tmp_path: Path) -> None:
    """The run enters pytest through its ``__main__``, as ``python -m pytest`` does: under
    ``PYTHONWARNINGS=error`` a fresh interpreter runs the suite, and so does the server (from
    pytest 9.1 ``pytest.console_main``, which the server called before, warns and so failed
    there)."""
    (tmp_path / "test_main.py").write_text(
        "import sys\n\n\ndef test_main():\n"
        "    assert sys.modules['__main__'].__name__ == '__main__'\n"
        "    assert sys.argv[0].endswith('__main__.py')\n")
    cold, warm, log = _cold_and_warm(python, tmp_path, {**_ENV, "PYTHONWARNINGS": "error"})
    assert cold == {"test_main": "PASSED"}, log[-1500:]
    assert warm == {"test_main": "PASSED"}, warm


def test_a_grading_run_has_the_signals_and_streams_of_a_fresh_interpreter(
        python: str, tmp_path: Path) -> None:
    """Python starts with SIGPIPE ignored: a write to a pipe nobody reads raises
    ``BrokenPipeError``. The grading child had put SIGPIPE back to its default, so such a
    write killed pytest (exit 141): apscheduler 3.10.4's process-pool tests did, and every
    warm grading of its tasks, a correct fix's included, was untrusted (reward 0). Its
    standard streams were the server's, made under ``-u`` (write-through); a fresh
    interpreter's stdout is buffered and its stderr line-buffered."""
    (tmp_path / "test_pipe.py").write_text(
        "import os\nimport signal\nimport sys\n\nimport pytest\n\n\ndef test_pipe():\n"
        "    assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN\n"
        "    r, w = os.pipe()\n    os.close(r)\n"
        "    with pytest.raises(BrokenPipeError):\n        os.write(w, b'x')\n\n\n"
        "def test_streams():\n"
        "    out, err = sys.__stdout__, sys.__stderr__\n"
        "    assert (out.write_through, out.line_buffering) == (False, False)\n"
        "    assert (err.write_through, err.line_buffering) == (False, True)\n"
        "    assert (out.fileno(), err.fileno(), sys.__stdin__.fileno()) == (1, 2, 0)\n")
    cold, warm, log = _cold_and_warm(python, tmp_path)
    assert cold == {"test_pipe": "PASSED", "test_streams": "PASSED"}, log[-1500:]
    assert warm == {"test_pipe": "PASSED", "test_streams": "PASSED"}, warm


def test_a_file_whose_compiling_warns_is_compiled_in_the_run(python: str,
                                                            tmp_path: Path) -> None:
    """Under ``filterwarnings = error`` a warning while compiling (an invalid escape) or
    rewriting (an assert on a tuple) fails the run's collection: warm as cold."""
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings =\n    error\n")
    (tmp_path / "lib.py").write_text(LIB + 'PATTERN = "\\d+"\n')
    (tmp_path / "test_lib.py").write_text("import lib\n\n\ndef test_double():\n"
                                          "    assert lib.double(2) == 4\n")
    (tmp_path / "test_tuple.py").write_text('def test_tuple():\n    assert (1 == 2, "no")\n')
    cold, warm, log = _cold_and_warm(python, tmp_path)
    both = {"test_lib.py": "ERROR", "test_tuple.py": "ERROR"}
    assert cold == both, log[-1500:]
    assert warm == both


# A failure whose traceback runs through statements whose lines pytest treats specially
# (decorators, else/finally blocks, a multi-line statement), and a test that says whether
# the warm server put swemill's statement lines in the place of pytest's walk.
STATEMENTS = '''import functools
from _pytest._code import source


def helper(n):
    for i in range(n):
        pass
    else:
        try:
            value = [i
                     for i in range(n)]
        finally:
            pass
    return value


@functools.lru_cache
def checked(n):
    if n:
        assert helper(n) == [
            0, 1]
    else:
        return None


def test_fails():
    checked(3)


def test_walk_replaced_where_pytest_walks():
    replaced = source.get_statement_startend2.__module__ == "swemill_inside.stmt_lines"
    assert replaced == (not hasattr(source, "_statement_linenos"))
'''


def test_statement_lines_are_worked_out_once_where_pytest_walks_per_line(
        python: str, tmp_path: Path) -> None:
    """pytest < 9 walks a module's whole tree for every traceback entry; the warm server
    works its statement lines out once per tree (``inside.stmt_lines``), pytest 9 does so
    itself and is left as it is. The failure reports are a cold run's, to the byte."""
    (tmp_path / "test_statements.py").write_text(STATEMENTS)
    ids = ["test_statements.py::test_fails",
           "test_statements.py::test_walk_replaced_where_pytest_walks"]
    srv = Server(tmp_path, python=python)
    try:
        args = ["test_statements.py", "--tb=long"]  # whole statements, with their lines
        warm = [srv.run(args, 60) for _ in range(2)]
        cold = srv.run(args, 60, cold=True)
    finally:
        srv.close()
    for run in warm:
        assert run["outcomes"] == {ids[0]: "failed", ids[1]: "passed"}, run["log_tail"]
        assert run["messages"][ids[0]] == cold["messages"][ids[0]]
    assert "assert [0, 1, 2] == [0, 1]" in cold["messages"][ids[0]]
    assert ">           assert helper(n) == [\n                0, 1]" in cold["messages"][ids[0]]


REPORTER_SERVED = '''import sys

def test_the_reporter_is_served():
    codes = sys.modules["swemill_inside.pristine_codes"].INSTALLED
    reporter = sys.modules["_swemill_report"]
    served = codes.rewritten[reporter.__file__][2]
    assert any(c is reporter.pytest_sessionstart.__code__ for c in served.co_consts)
'''


def test_the_grading_server_rewrites_the_reporter_once(python: str, tmp_path: Path) -> None:
    """pytest assertion-rewrites a plugin named by ``-p`` in every run; the grading server
    made swemill's reporter's rewritten code before its first run, and serves it."""
    from swemill.suite.runner import _PLUGIN_SRC, PLUGIN_MODULE
    from swemill.validate.warm import INSIDE_DIR

    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(_PLUGIN_SRC, site / f"{PLUGIN_MODULE}.py")
    work = tmp_path / "work"
    work.mkdir()
    (work / "test_served.py").write_text(REPORTER_SERVED)
    proc = subprocess.Popen([python, "-u", str(INSIDE_DIR / "__main__.py"), "--grade",
                             str(work)], cwd=work, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env={**_ENV, "PYTHONPATH": str(site)})
    assert proc.stdout is not None and b'"ready": true' in proc.stdout.readline()
    try:
        runs = [_grade(proc, seq, ["-p", PLUGIN_MODULE, *_ARGS, "test_served.py"])
                for seq in (1, 2)]
    finally:
        proc.communicate(timeout=30)
    assert runs == [{"test_the_reporter_is_served": "PASSED"}] * 2, runs
