"""The reporter plugin, run by a real pytest in a subprocess, reports every outcome kind.

Regression class: JUnit XML cannot tell xfail from skip; a teardown error after a passing call
must not read as a pass; a selection must run exactly the named tests.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tests.pytest_venv import pytest_venv

from swemill.suite import pytest_plugin
from swemill.suite.runner import PLUGIN_MODULE
from swemill.suite.verdict import parse_report

pytestmark = pytest.mark.slow  # two real pytest subprocesses

SUITE = '''
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("setup exploded")

@pytest.fixture
def bad_teardown():
    yield
    raise RuntimeError("teardown exploded")

def test_pass(): pass
def test_fail(): assert 1 == 2, "one is not two"
def test_setup_error(broken): pass
def test_teardown_error(bad_teardown): pass
@pytest.mark.skip(reason="not today")
def test_skip(): pass
@pytest.mark.xfail(reason="known bug")
def test_xfail(): assert False
@pytest.mark.xfail(reason="fixed now")
def test_xpass(): pass
@pytest.mark.xfail(reason="strict", strict=True)
def test_xpass_strict(): pass
@pytest.mark.parametrize("x", [1, 2])
def test_param(x): assert x == 1
'''


# failures raised below the test function: in a helper, under a hidden frame, in a
# recursion, in a fixture, and pytest.fail without a traceback
_HELPER = '''import pytest


def deep(n):
    if n == 0:
        raise KeyError("bottom of the helper")
    return deep(n - 1)


def hidden():
    __tracebackhide__ = True
    raise ValueError("raised in a hidden frame")


def forever(n):
    return forever(n + 1)


def quiet_fail():
    pytest.fail("failed on purpose", pytrace=False)
'''

_DEEP = '''import pytest
from helper import deep, forever, hidden, quiet_fail


@pytest.fixture
def exploding():
    deep(3)


def test_deep(): deep(5)
def test_hidden(): hidden()
def test_recursion(): forever(0)
def test_quiet(): quiet_fail()
def test_fixture(exploding): pass
def test_compare(): assert [1, 2, 3] == [1, 2, 4]
'''

_COUNT_ENTRIES = '''def pytest_runtest_logreport(report):
    if report.when == "call" and report.failed and hasattr(report.longrepr, "reprtraceback"):
        with open("entries.txt", "a") as fh:
            fh.write("%s %d\\n" % (report.nodeid, len(report.longrepr.reprtraceback.reprentries)))
'''


def run(tmp_path: Path, select: list[str] | None = None, tb: str = "auto",
        **extra: str) -> tuple[str, int]:
    (tmp_path / "test_mod.py").write_text(textwrap.dedent(SUITE))
    (tmp_path / "test_broken_import.py").write_text("import no_such_module_here\n")
    report = tmp_path / "report.jsonl"
    env = {"SWEMILL_REPORT": str(report), "SWEMILL_NONCE": "abc", "PATH": "/usr/bin:/bin",
           "PYTHONDONTWRITEBYTECODE": "1", **extra}
    args = ["--continue-on-collection-errors", f"--tb={tb}"]
    if select is not None:
        (tmp_path / "select.txt").write_text("\n".join(select) + "\n")
        env["SWEMILL_SELECT"] = str(tmp_path / "select.txt")
        args += sorted({s.split("::")[0] for s in select})
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "swemill.suite.pytest_plugin", "-p",
         "no:cacheprovider", "-o", "addopts=", f"--rootdir={tmp_path}", "-q", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    return report.read_text(), proc.returncode


def test_every_outcome_kind_is_reported(tmp_path: Path) -> None:
    text, code = run(tmp_path)
    r = parse_report(text, code, nonce="abc")
    assert code == 1 and r.trustworthy, r.problem
    got = {n.split("::")[1]: res.outcome for n, res in r.results.items()}
    assert got == {
        "test_pass": "passed", "test_fail": "failed", "test_setup_error": "error",
        "test_teardown_error": "error", "test_skip": "skipped", "test_xfail": "xfailed",
        "test_xpass": "xpassed", "test_xpass_strict": "failed",
        "test_param[1]": "passed", "test_param[2]": "failed",
    }
    assert "one is not two" in r.results["test_mod.py::test_fail"].message
    assert "setup exploded" in r.results["test_mod.py::test_setup_error"].message
    assert r.results["test_mod.py::test_skip"].message.endswith("not today")
    assert "test_broken_import.py" in r.collect_errors


def test_selection_runs_exactly_the_named_tests(tmp_path: Path) -> None:
    wanted = ["test_mod.py::test_pass", "test_mod.py::test_param[2]",
              "test_broken_import.py::test_x"]
    text, code = run(tmp_path, wanted)
    r = parse_report(text, code, nonce="abc", selected=wanted)
    assert r.trustworthy, r.problem
    assert set(r.results) == set(wanted)
    assert r.status("test_mod.py::test_pass") == "passed"
    assert r.status("test_mod.py::test_param[2]") == "failed"
    assert r.results["test_broken_import.py::test_x"].outcome == "error"
    assert "no_such_module_here" in r.results["test_broken_import.py::test_x"].message


def test_messages_are_the_same_in_every_traceback_style(tmp_path: Path) -> None:
    """Grading runs print one line per failure (``--tb=line``); the messages the reporter
    gives (quoted in grading logs and tool results) are those of a ``--tb=short`` run."""
    reports = {}
    for tb, extra in (("short", {}), ("line", {}), ("brief", {"SWEMILL_BRIEF": "1"}),
                      ("guarded", {"SWEMILL_BRIEF": "1", "SWEMILL_GUARD": "1"})):
        (tmp_path / tb).mkdir()
        (tmp_path / tb / "helper.py").write_text(_HELPER)
        (tmp_path / tb / "test_deep.py").write_text(_DEEP)
        (tmp_path / tb / "conftest.py").write_text(_COUNT_ENTRIES)
        text, code = run(tmp_path / tb, tb="short" if tb == "short" else "line", **extra)
        reports[tb] = parse_report(text, code, nonce="abc")
        laid_out = dict(ln.rsplit(" ", 1) for ln in
                        (tmp_path / tb / "entries.txt").read_text().splitlines())
        # what changes: the traceback laid out (never printed under --tb=line) is uncut
        assert (laid_out["test_deep.py::test_deep"] == "1") == (tb in ("brief", "guarded"))
    short = reports["short"]
    want = {n: (r.outcome, r.message) for n, r in short.results.items()}
    for tb in ("line", "brief", "guarded"):  # SWEMILL_BRIEF: the tracebacks are not cut
        line = reports[tb]
        assert line.trustworthy and line.exit_code == short.exit_code == 1, (tb, line.problem)
        assert {n: (r.outcome, r.message) for n, r in line.results.items()} == want, tb
        assert line.collect_errors == short.collect_errors
    assert "one is not two" in want["test_mod.py::test_fail"][1]
    assert "bottom of the helper" in want["test_deep.py::test_deep"][1]
    assert "hidden frame" in want["test_deep.py::test_hidden"][1]
    assert "RecursionError" in want["test_deep.py::test_recursion"][1]
    assert want["test_deep.py::test_fixture"][0] == "error"


OLDEST_PYTEST = "6.2"
"""The oldest pytest the reporter runs on (its docstring); repositories pin it (funcy 2.0,
hyperframe 6.0.1: ``pytest<7``)."""


@pytest.fixture(scope="module", params=["newest", OLDEST_PYTEST])
def python(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """This environment's interpreter (the newest pytest), or one of a uv venv holding only
    the oldest pytest the reporter claims (no swemill: the reporter is loaded from a copy, as
    in a repository's environment)."""
    if request.param == "newest":
        return sys.executable
    return pytest_venv(tmp_path_factory, request.param)


def _guarded_run(tmp_path: Path, guard: bool, args: tuple[str, ...] = ("test_mod.py",),
                 python: str = sys.executable) -> tuple[str, int, str]:
    env = {"SWEMILL_REPORT": str(tmp_path / "report.jsonl"), "SWEMILL_NONCE": "abc",
           "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1",
           **({"SWEMILL_GUARD": "1"} if guard else {})}
    (tmp_path / "report.jsonl").unlink(missing_ok=True)
    plugin = "swemill.suite.pytest_plugin"
    if python != sys.executable:  # no swemill there: the reporter as it is copied into envs
        plugin = PLUGIN_MODULE
        shutil.copy(pytest_plugin.__file__, tmp_path / f"{PLUGIN_MODULE}.py")
    proc = subprocess.run(
        [python, "-m", "pytest", "-p", plugin, "-p",
         "no:cacheprovider", "-o", "addopts=", f"--rootdir={tmp_path}", "-q", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    return (tmp_path / "report.jsonl").read_text(), proc.returncode, proc.stdout


def _pytest_version(python: str) -> str:
    return subprocess.run([python, "-c", "import pytest; print(pytest.__version__)"],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_a_guarded_run_of_an_honest_test_package_is_trusted(tmp_path: Path,
                                                             python: str) -> None:
    """Test modules in a package (``tests/__init__.py``), loaded by pytest's rewriting hook:
    no tampering, on the newest pytest and the oldest. On pytest 6 the reporter found no
    rewriting hook (pytest 6 keeps it in the config's ``_store``, not its ``stash``), took every
    test module for one loaded by another hook, and every grading run of funcy 2.0, hyperframe
    6.0.1 and pyrsistent 0.20.0 (pytest<7) was untrustworthy: no correct fix earned reward."""
    if python != sys.executable:
        assert _pytest_version(python).startswith(OLDEST_PYTEST + ".")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_mod.py").write_text(
        "import pkg\n\ndef test_fail():\n    assert pkg.VALUE == 2\n\n"
        "def test_pass():\n    assert pkg.VALUE == 1\n")
    text, code, stdout = _guarded_run(tmp_path, guard=True, args=("tests",), python=python)
    r = parse_report(text, code, nonce="abc", sealed=stdout)
    assert r.trustworthy, r.problem
    assert r.status("tests/test_mod.py::test_fail") == "failed"
    assert r.status("tests/test_mod.py::test_pass") == "passed"


def _forge_rewrite_cache(src: Path) -> None:
    """pytest's own cache of the rewritten module, with every function body emptied."""
    import ast
    import importlib.util
    import inspect
    import os

    from _pytest.assertion import rewrite

    data = src.read_bytes()
    tree = ast.parse(data)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            node.body = [ast.Pass()]
    code = compile(ast.fix_missing_locations(tree), str(src), "exec", dont_inherit=True)
    cache = rewrite.get_cache_dir(src)
    cache.mkdir(parents=True, exist_ok=True)
    by_hash = "source_hash" in inspect.signature(rewrite._write_pyc_fp).parameters
    with open(cache / (src.name[:-3] + rewrite.PYC_TAIL), "wb") as fp:
        rewrite._write_pyc_fp(fp, importlib.util.source_hash(data) if by_hash else os.stat(src),
                              code)


def test_a_guarded_run_never_reads_a_cached_rewrite(tmp_path: Path) -> None:
    (tmp_path / "test_mod.py").write_text("def test_fail():\n    assert 1 == 2\n")
    _forge_rewrite_cache(tmp_path / "test_mod.py")
    text, code, _ = _guarded_run(tmp_path, guard=False)
    assert parse_report(text, code, nonce="abc").status("test_mod.py::test_fail") == "passed"
    text, code, stdout = _guarded_run(tmp_path, guard=True)  # the same tree, guarded
    r = parse_report(text, code, nonce="abc", sealed=stdout)
    assert r.trustworthy, r.problem
    assert r.status("test_mod.py::test_fail") == "failed"


def test_a_guarded_run_reports_a_replaced_report_class(tmp_path: Path, python: str) -> None:
    (tmp_path / "conftest.py").write_text(textwrap.dedent('''
        import _pytest.reports as r
        make = r.TestReport.from_item_and_call.__func__
        def always(cls, item, call):
            rep = make(cls, item, call)
            rep.outcome, rep.longrepr = "passed", None
            return rep
        r.TestReport.from_item_and_call = classmethod(always)
    '''))
    (tmp_path / "test_mod.py").write_text("def test_fail():\n    assert 1 == 2\n")
    text, code, stdout = _guarded_run(tmp_path, guard=True, python=python)
    r = parse_report(text, code, nonce="abc", sealed=stdout)
    assert code == 0 and not r.trustworthy  # it did make the run pass
    assert "TestReport.from_item_and_call" in r.problem


_MANAGER = '''import gc
managers = [x for x in gc.get_objects() if type(x).__name__ == "PytestPluginManager"]
'''
_WRAPPER = '''import pytest
def wrap(item, call):
    out = yield
    rep = out.get_result()
    rep.outcome, rep.longrepr = "passed", None
class Plugin:  # an object of a class: hashable, as pytest 6's fixture manager needs
    pytest_runtest_makereport = staticmethod(pytest.hookimpl(hookwrapper=True)(wrap))
plugin = Plugin()
'''
_QUIET = '''import gc
def quiet():
    for x in gc.get_objects():
        if type(x).__name__ == "Session" and hasattr(x, "testsfailed"):
            x.testsfailed = 0
'''
PACKAGE_HACKS = {
    # the reporter's outcome function swapped, pytest's failure count kept at 0
    "reporter_swap": (_QUIET + '''import importlib
rep = importlib.import_module("swemill.suite.pytest_plugin")
def fine(phases):
    quiet()
    return "passed", ""
rep._outcome = fine
''', "reporter._outcome"),
    # the same, put back after the one test so that the module looks untouched at the end
    "reporter_swap_undone": (_QUIET + '''import importlib
rep = importlib.import_module("swemill.suite.pytest_plugin")
orig = rep._outcome
calls = []
def fine(phases):
    quiet()
    calls.append(1)
    if len(calls) == 2:  # the last test
        rep._outcome = orig
    return "passed", ""
rep._outcome = fine
''', "report:test_mod.py::test_fail"),
    # a plugin registered from the package's own code
    "hook_register": (_MANAGER + _WRAPPER + '''for pm in managers:
    pm.register(plugin)
''', "pkg/__init__.py"),
    # its hook compiled from a string, registered from another thread
    "hook_register_late": (_MANAGER + '''import functools, threading
ns = {}
exec(compile(''' + repr(_WRAPPER) + ''', "<plugin>", "exec"), ns)
for pm in managers:
    t = threading.Thread(target=functools.partial(pm.register, ns["plugin"]))
    t.start()
    t.join()
''', "another thread"),
    # the function of pytest's own report-making implementation swapped; nothing registered
    "hookimpl_swap": (_MANAGER + '''for pm in managers:
    for impl in pm.hook.pytest_runtest_makereport.get_hookimpls():
        if impl.plugin_name == "runner":
            def made(item, call, orig=impl.function):
                rep = orig(item, call)
                rep.outcome, rep.longrepr = "passed", None
                return rep
            impl.function = made
''', "impl of runner swapped"),
    # a caller of its own in front of the report-logging hook
    "hook_caller_swap": (_MANAGER + '''class Caller:
    def __init__(self, real):
        self.real = real
    def __getattr__(self, name):
        return getattr(self.real, name)
    def __call__(self, **kw):
        kw["report"].outcome, kw["report"].longrepr = "passed", None
        return self.real(**kw)
for pm in managers:
    pm.hook.pytest_runtest_logreport = Caller(pm.hook.pytest_runtest_logreport)
''', "pytest_runtest_logreport caller Caller"),
    # an import hook in front of pytest's: test modules imported later are compiled empty
    "import_hook": ('''import ast, sys, importlib.util
class Finder:
    def find_spec(self, name, path=None, target=None):
        if not name.rpartition(".")[2].startswith("test_"):
            return None
        for finder in sys.meta_path[1:]:
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                return importlib.util.spec_from_file_location(name, spec.origin, loader=Loader())
class Loader:
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        tree = ast.parse(open(module.__file__).read())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                node.body = [ast.Pass()]
        exec(compile(ast.fix_missing_locations(tree), module.__file__, "exec"), vars(module))
sys.meta_path.insert(0, Finder())
''', "test module test_mod loaded by Loader"),
    # the test module imported by the package before pytest, its test swapped for a no-op
    "preimport_swap": ('''import functools, importlib
m = importlib.import_module("test_mod")
@functools.wraps(m.test_fail)
def noop(*a, **k):
    return None
m.test_fail = noop
''', "test module test_mod.py imported by pkg/__init__.py"),
    # once a test calls the package: the function each collected item holds swapped
    "item_swap": ('''import functools, gc
def touch():
    for x in gc.get_objects():
        if type(x).__name__ == "Function" and "_obj" in vars(x):
            x._obj = functools.wraps(x._obj)(lambda *a, **k: None)
''', "test function of test_mod.py::test_fail swapped"),
    # the same, the code object inside the test's function replaced
    "code_swap": ('''import gc
def touch():
    for x in gc.get_objects():
        if type(x).__name__ == "Function" and x.name == "test_fail":
            x.obj.__code__ = (lambda: None).__code__
''', "test function of test_mod.py::test_fail swapped"),
    # what the tests assert with: a pytest.raises that never fails, unittest's assertEqual
    "raises_patch": ('''import contextlib, pytest
pytest.raises = lambda *a, **k: contextlib.suppress(BaseException)
''', "api:pytest.raises", "import pytest\n    with pytest.raises(ValueError):\n        pass"),
    # the config's hook relay wrapped: every report logged says passed
    "relay_swap": ('''import gc
class Relay:
    def __init__(self, real):
        self.real = real
    def __getattr__(self, name):
        hook = getattr(self.real, name)
        if name != "pytest_runtest_logreport":
            return hook
        def call(**kw):
            kw["report"].outcome, kw["report"].longrepr = "passed", None
            return hook(**kw)
        return call
def touch():
    for x in gc.get_objects():
        if type(x).__name__ == "Config" and not isinstance(getattr(x, "hook", None), Relay):
            x.hook = Relay(x.hook)
''', "config.hook replaced"),
    "assert_method_patch": ('''import unittest
unittest.TestCase.assertEqual = lambda self, *a, **k: None
''', "unittest.case.TestCase.assertEqual",
                            "import unittest\n    unittest.TestCase().assertEqual(1, 2)"),
}


@pytest.mark.parametrize("kind", sorted(PACKAGE_HACKS))
def test_a_guarded_run_reports_a_package_that_reaches_the_hooks(tmp_path: Path, kind: str,
                                                                python: str) -> None:
    """Each of these makes a failing test pass from the package's own code, imported by the
    suite's conftest and called by the test before; a guarded run says the report cannot be
    trusted, and names what was done."""
    code_text, expected, *body = PACKAGE_HACKS[kind]
    if python != sys.executable:  # the reporter there is the copy an environment holds
        code_text = code_text.replace("swemill.suite.pytest_plugin", PLUGIN_MODULE)
    fail = body[0] if body else "assert 1 == 2"
    (tmp_path / "pkg").mkdir()
    if "def touch" not in code_text:
        code_text += "\ndef touch():\n    return None\n"
    (tmp_path / "pkg" / "__init__.py").write_text(code_text)
    (tmp_path / "conftest.py").write_text("import pkg\n")  # as the bundled sample's does
    (tmp_path / "test_mod.py").write_text("import pkg\n\ndef test_first():\n    pkg.touch()\n"
                                          f"\n\ndef test_fail():\n    {fail}\n")
    text, code, _ = _guarded_run(tmp_path, guard=False, python=python)
    plain = parse_report(text, code, nonce="abc")
    if python != sys.executable and not (code == 0 and plain.status("test_mod.py::test_fail")
                                         == "passed"):
        pytest.skip(f"{kind} does not make the test pass on pytest {OLDEST_PYTEST}")
    assert code == 0 and plain.status("test_mod.py::test_fail") == "passed"  # the hack works
    text, code, stdout = _guarded_run(tmp_path, guard=True, python=python)
    r = parse_report(text, code, nonce="abc", sealed=stdout)
    assert not r.trustworthy
    assert expected in r.problem, r.problem


def test_a_guarded_run_reports_a_test_s_code_swapped_while_collecting(tmp_path: Path,
                                                                     python: str) -> None:
    """Package code that a later test module imports replaces, during collection, the code
    of a test already collected: the function collected is the swapped one, so only where
    its code comes from tells (a thread doing it raced the collection's end: caught 2 of 3
    runs before)."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (tmp_path / "pkg" / "late.py").write_text(
        "import importlib\nm = importlib.import_module('test_a')\n"
        "m.test_fail.__code__ = (lambda: None).__code__\n")
    (tmp_path / "test_a.py").write_text("import pkg\n\ndef test_fail():\n"
                                        "    assert pkg.VALUE == 3\n")
    (tmp_path / "test_b.py").write_text("import pkg.late\n\ndef test_other():\n    pass\n")
    args = ("test_a.py", "test_b.py")
    text, code, _ = _guarded_run(tmp_path, guard=False, args=args, python=python)
    assert parse_report(text, code, nonce="abc").status("test_a.py::test_fail") == "passed"
    text, code, stdout = _guarded_run(tmp_path, guard=True, args=args, python=python)
    r = parse_report(text, code, nonce="abc", sealed=stdout)
    assert not r.trustworthy
    assert "test function of test_a.py::test_fail runs code its file did not define" in r.problem


def test_a_guarded_run_trusts_tests_a_test_file_builds_or_wraps(tmp_path: Path,
                                                               python: str) -> None:
    """Tests made by ``exec`` in a test file, wrapped by decorators, nested in classes or
    made by a factory of the file run code their file defined."""
    (tmp_path / "test_mod.py").write_text(textwrap.dedent('''
        import functools

        exec("def test_generated():\\n    assert 1 + 1 == 3\\n")

        def deco(f):
            @functools.wraps(f)
            def wrapper(*a, **k):
                return f(*a, **k)
            return wrapper

        @deco
        def test_wrapped():
            assert 2 == 3

        def make(n):
            def test():
                assert n == 1
            return test

        test_made = make(2)

        class TestBox:
            def test_method(self):
                assert [] == [1]
    '''))
    text, code, stdout = _guarded_run(tmp_path, guard=True, python=python)
    r = parse_report(text, code, nonce="abc", sealed=stdout)
    assert r.trustworthy, r.problem
    assert {k: r.status(k) for k in r.results} == {
        f"test_mod.py::{name}": "failed"
        for name in ("test_generated", "test_wrapped", "test_made", "TestBox::test_method")}


def test_a_guarded_run_lets_a_suite_register_its_own_plugins(tmp_path: Path,
                                                             python: str) -> None:
    """What real suites do: a conftest registers a plugin object, names plugin modules in
    ``pytest_plugins``, and the package ships a pytest plugin that registers an object of
    its own (pytest-xdist's shape). None of it is tampering; the failing test still fails."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (tmp_path / "pkg" / "plugin.py").write_text(
        "def pytest_report_header(config):\n    return 'pkg plugin'\n\n\n"
        "def pytest_configure(config):\n    from pkg.session import Recorder\n\n"
        "    config.pluginmanager.register(Recorder(), 'recorder')\n")
    (tmp_path / "pkg" / "session.py").write_text(  # a plugin object of the package's
        "class Recorder:\n    def pytest_runtest_logreport(self, report):\n"
        "        self.last = report.nodeid\n")
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "__init__.py").write_text("")
    (tmp_path / "helpers" / "fixtures.py").write_text(
        "import pytest\n\n@pytest.fixture\ndef one():\n    return 1\n")
    (tmp_path / "conftest.py").write_text(textwrap.dedent('''
        import pytest
        pytest_plugins = ["helpers.fixtures", "pkg.plugin"]

        class Timer:
            @pytest.hookimpl(hookwrapper=True)
            def pytest_runtest_call(self, item):
                yield

        def pytest_configure(config):
            config.pluginmanager.register(Timer(), "timer")
    '''))
    (tmp_path / "test_mod.py").write_text(
        "import pkg\n\ndef test_fail(one):\n    assert pkg.VALUE + one == 3\n\n"
        "def test_pass(one):\n    assert pkg.VALUE == one\n")
    text, code, stdout = _guarded_run(tmp_path, guard=True, python=python)
    r = parse_report(text, code, nonce="abc", sealed=stdout)
    assert r.trustworthy, r.problem
    assert r.status("test_mod.py::test_fail") == "failed"
    assert r.status("test_mod.py::test_pass") == "passed"


def test_a_guarded_run_of_pluggy_itself_is_trusted(tmp_path: Path) -> None:
    """When the repository is the test runner's own machinery (pluggy's tasks in the zoo), its
    code is on the stack of every registration: that is not the package reaching in."""
    import shutil

    import pluggy

    shutil.copytree(Path(pluggy.__file__).parent, tmp_path / "pluggy")
    (tmp_path / "test_mod.py").write_text(
        "import pluggy\n\ndef test_fail():\n    assert pluggy.__file__ == 'nowhere'\n")
    env = {"SWEMILL_REPORT": str(tmp_path / "report.jsonl"), "SWEMILL_NONCE": "abc",
           "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", "SWEMILL_GUARD": "1",
           "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "swemill.suite.pytest_plugin", "-p",
         "no:cacheprovider", "-o", "addopts=", f"--rootdir={tmp_path}", "-q", "test_mod.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    r = parse_report((tmp_path / "report.jsonl").read_text(), proc.returncode, nonce="abc",
                     sealed=proc.stdout)
    assert r.trustworthy, r.problem
    assert r.status("test_mod.py::test_fail") == "failed"
    assert str(tmp_path / "pluggy") in r.results["test_mod.py::test_fail"].message


def test_brief_runs_leave_a_test_s_own_inner_pytest_run_alone(tmp_path: Path) -> None:
    """Brief runs lay out only the last traceback entry of their own tests; a test that runs
    pytest in-process (pytester) must still see pytest's own layout, frames hidden with
    ``__tracebackhide__`` left out (pytest-mock 3.14.0's test_missing_introspection failed in
    every brief run, so the audit removed every task of it)."""
    (tmp_path / "test_mod.py").write_text(textwrap.dedent('''
        pytest_plugins = ["pytester"]


        def test_inner_run_hides_the_helper(pytester):
            pytester.makepyfile("""
                def helper():
                    __tracebackhide__ = True
                    secret = "HIDDEN" + "-FRAME"
                    raise AssertionError("boom")


                def test_x():
                    helper()
            """)
            result = pytester.runpytest_inprocess()
            result.assert_outcomes(failed=1)
            assert "HIDDEN" not in result.stdout.str()
    '''))
    for brief in ({}, {"SWEMILL_BRIEF": "1"}):
        text, code = run_one(tmp_path, **brief)
        r = parse_report(text, code, nonce="abc")
        assert r.status("test_mod.py::test_inner_run_hides_the_helper") == "passed", (brief, r)


def run_one(tmp_path: Path, **extra: str) -> tuple[str, int]:
    report = tmp_path / "report.jsonl"
    report.unlink(missing_ok=True)
    env = {"SWEMILL_REPORT": str(report), "SWEMILL_NONCE": "abc", "PATH": "/usr/bin:/bin",
           "PYTHONDONTWRITEBYTECODE": "1", **extra}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "swemill.suite.pytest_plugin", "-p",
         "no:cacheprovider", "-o", "addopts=", f"--rootdir={tmp_path}", "-q", "--tb=line",
         "test_mod.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    return report.read_text(), proc.returncode


_UNITTEST_MODULE = """import unittest

import pkg


class T(unittest.TestCase):
    def test_fail(self):
        self.assertEqual(pkg.VALUE, 2)
"""
_DOCTEST_MODULE = '''import pkg


def double(x):
    """
    >>> double(2)
    5
    """
    return 2 * x
'''
SHAPED_HACKS = {
    # unittest's part executor swallowing what a TestCase's test raises
    "testpart_swallow": ("""import contextlib, unittest.case
@contextlib.contextmanager
def swallow(self, test_case, subTest=False):
    try:
        yield
    except BaseException:
        pass
unittest.case._Outcome.testPartExecutor = swallow
""", "_Outcome.testPartExecutor", _UNITTEST_MODULE, (), "test_mod.py::T::test_fail"),
    # doctest's output checker that accepts any output
    "doctest_checker": ("""import doctest
doctest.OutputChecker.check_output = lambda self, want, got, optionflags: True
""", "OutputChecker.check_output", _DOCTEST_MODULE, ("--doctest-modules",),
                        "test_mod.py::test_mod.double"),
}


@pytest.mark.parametrize("kind", sorted(SHAPED_HACKS))
def test_a_guarded_run_reports_the_unittest_and_doctest_machinery_replaced(
        tmp_path: Path, kind: str, python: str) -> None:
    code_text, expected, module, args, nodeid = SHAPED_HACKS[kind]
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("VALUE = 1\n" + code_text)
    (tmp_path / "conftest.py").write_text("import pkg\n")
    (tmp_path / "test_mod.py").write_text(module)
    text, code, _ = _guarded_run(tmp_path, guard=False, args=(*args, "test_mod.py"),
                                 python=python)
    plain = parse_report(text, code, nonce="abc")
    if python != sys.executable and not (code == 0 and plain.status(nodeid) == "passed"):
        pytest.skip(f"{kind} does not make the test pass on pytest {OLDEST_PYTEST}")
    assert code == 0 and plain.status(nodeid) == "passed"  # the hack works
    text, code, stdout = _guarded_run(tmp_path, guard=True, args=(*args, "test_mod.py"),
                                      python=python)
    r = parse_report(text, code, nonce="abc", sealed=stdout)
    assert not r.trustworthy
    assert expected in r.problem, r.problem


def test_a_guarded_run_gives_a_test_s_own_pytest_run_the_autoloaded_plugins(
        tmp_path: Path) -> None:
    """Grading runs turn plugin autoloading off and name the environment's plugins with
    ``-p``; a test that runs pytest itself (pytester) got them autoloaded at the baseline and
    must get them again (pytest-mock 3.14.0: every oracle failed its in-process runs)."""
    site = tmp_path / "site"
    meta = site / "envplugin-0.dist-info"
    meta.mkdir(parents=True)
    (site / "envplugin.py").write_text(
        "import pytest\n\n\n@pytest.fixture\ndef answer():\n    return 42\n")
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: envplugin\nVersion: 0\n")
    (meta / "entry_points.txt").write_text("[pytest11]\nenvplugin = envplugin\n")
    (meta / "RECORD").write_text("envplugin.py,,\n")
    (tmp_path / "test_mod.py").write_text(textwrap.dedent('''
        pytest_plugins = ["pytester"]


        def test_outer(answer):
            assert answer == 42


        def test_inner_run_has_the_plugin(pytester):
            pytester.makepyfile("def test_x(answer):\\n    assert answer == 42\\n")
            pytester.runpytest_inprocess().assert_outcomes(passed=1)
    '''))
    env = {"SWEMILL_REPORT": str(tmp_path / "report.jsonl"), "SWEMILL_NONCE": "abc",
           "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", "SWEMILL_GUARD": "1",
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": str(site)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "swemill.suite.pytest_plugin", "-p", "envplugin",
         "-p", "no:cacheprovider", "-o", "addopts=", f"--rootdir={tmp_path}", "-q",
         "test_mod.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    r = parse_report((tmp_path / "report.jsonl").read_text(), proc.returncode, nonce="abc",
                     sealed=proc.stdout)
    assert r.trustworthy, r.problem
    assert r.status("test_mod.py::test_outer") == "passed"
    assert r.status("test_mod.py::test_inner_run_has_the_plugin") == "passed", proc.stdout[-800:]
