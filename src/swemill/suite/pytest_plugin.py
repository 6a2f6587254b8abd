"""swemill's pytest reporter, loaded with ``-p _swemill_report`` inside the repo's own venv.

PYTEST_DONT_REWRITE: the warm server imports this module before pytest starts, and under a
suite's ``filterwarnings = error`` pytest's "already imported so cannot be rewritten" warning
about it would end every run (exit 4); it holds no ``assert`` to rewrite anyway.

It is copied into the environment's site-packages, so it must run on any Python >= 3.8 and
pytest >= 6 and import nothing but the standard library, pytest and (if asked) coverage.

Settings come from the environment:

- ``SWEMILL_REPORT``: file to append JSON lines to: a ``begin`` line as each test starts, a
  ``test`` line with its outcome, plus start/finish lines.
- ``SWEMILL_NONCE``: stamped on every line, so lines not written by this plugin stand out.
- ``SWEMILL_SELECT``: file of node ids, one per line; every other collected item is deselected.
- ``SWEMILL_COVERAGE``: file to write per-test covered lines to (coverage.py dynamic contexts).
  Lines run outside any one test (imports, collection, fixtures of a wider scope than a
  function) are written as ``shared``: any test may depend on what they computed. Tests that
  start a process (``subprocess``, ``os.fork``/``exec*``/``spawn*``/``system``,
  ``posix_spawn``) or set their own tracer run code coverage cannot see; they are listed as
  ``spawned`` (seen through audit hooks, Python >= 3.8).
- ``SWEMILL_BRIEF``: set with ``--tb=line`` (swemill's brief and grading runs, whose output
  is one line per failure): pytest's cutting of each failure's traceback at the test function
  is skipped (see :func:`_uncut_tracebacks`).
- ``SWEMILL_STUTTER``: ``STOP_MS:PERIOD_MS``, set for one of the baseline's runs. From the
  session's start to its end a helper process (in a session of its own) stops the run's
  process group for ``STOP_MS`` of every ``PERIOD_MS`` (``SIGSTOP``/``SIGCONT``): the test
  processes lose the CPU the way they do on a loaded machine, without anything spending it.
  A test whose outcome changes under it depends on how busy the machine is
  (``suite.baseline``). The finish line says how many stops were made (``stutter_stops``).
- ``SWEMILL_GUARD``: set for grading runs. The plugin, loaded before any code of the
  repository, turns off pytest's reading of cached rewritten test modules, notes pytest's report
  and run machinery (and the built-in exception classes) and
  at the end reports each one that was replaced (a ``tamper`` line); after closing the report it
  writes the report's SHA-256 to the stdout it found at start-up, which code running later
  (an ``atexit`` hook) cannot take back, so a report rewritten after pytest finished is seen.
"""

import builtins
import contextlib
import hashlib
import json
import os
from typing import Any

import pytest

_REPORT = os.environ.get("SWEMILL_REPORT")
_NONCE = os.environ.get("SWEMILL_NONCE", "")
_SELECT = os.environ.get("SWEMILL_SELECT")
_COVER = os.environ.get("SWEMILL_COVERAGE")
_GUARD = bool(os.environ.get("SWEMILL_GUARD"))
_STUTTER = os.environ.get("SWEMILL_STUTTER")
_MSG_MAX = 600
SEAL = "swemill-report-sha256"


def _no_cached_rewrite():
    """Grading runs rewrite every test module from its source: a cached rewrite (a pyc in
    ``__pycache__``) is never read, whoever wrote it and when."""
    from _pytest.assertion import rewrite

    if hasattr(rewrite, "_read_pyc"):
        rewrite._read_pyc = lambda *args, **kwargs: None


def _guarded():
    """name -> object for what decides a test's outcome and how it is reported: pytest's report,
    run and session machinery, pluggy's hook machinery, what tests assert with, this reporter's
    own functions and the library functions it writes and seals its report with."""
    import sys
    from importlib.machinery import SourceFileLoader

    from _pytest import main, outcomes, python, reports, runner, skipping
    from _pytest.assertion import rewrite
    from _pytest.config import PytestPluginManager

    out = {}
    hooks = [m for n, m in list(sys.modules.items())
             if m is not None and (n == "pluggy" or n.startswith("pluggy."))]
    for mod in (reports, runner, skipping, outcomes, rewrite, main, *hooks):
        out.update((mod.__name__ + "." + k, v) for k, v in vars(mod).items() if callable(v))
    # Attributes added to the report classes count too; pytest adds some to Function, Session
    # and the plugin manager itself (legacypath), so there only replaced ones do.
    classes = [reports.BaseReport, reports.TestReport, runner.CallInfo]
    attrs = [python.Function, main.Session, PytestPluginManager, rewrite.AssertionRewritingHook,
             *SourceFileLoader.__mro__[:-1]]
    attrs += [v for m in hooks for v in vars(m).values()
              if isinstance(v, type) and v.__module__ == m.__name__]
    for cls in (*classes, *attrs):
        kind = "attr:" if cls in attrs else "class:"
        where = kind + cls.__module__ + "." + cls.__qualname__ + "."
        out.update((where + k, v) for k, v in vars(cls).items())
    # What tests assert with and how unittest and doctest decide an outcome: pytest's
    # namespace (raises, approx, warns, fail, ...), pytest's unittest and doctest plugins,
    # unittest.case, doctest, the built-in functions and exception classes (only replaced
    # ones count; of classes, only their functions).
    import doctest  # noqa: F401 - noted before the package can reach them
    import unittest.case  # noqa: F401

    names = ("_pytest.python_api", "_pytest.raises", "_pytest.recwarn", "_pytest.unittest",
             "_pytest.doctest", "unittest.case", "doctest")
    asserting = [pytest] + [m for n, m in list(sys.modules.items()) if m is not None and n in
                            names]
    for mod in asserting:
        out.update(("api:" + mod.__name__ + "." + k, v) for k, v in vars(mod).items()
                   if callable(v))
        for cls in vars(mod).values():
            if isinstance(cls, type) and cls.__module__ == mod.__name__:
                where = "api:" + mod.__name__ + "." + cls.__qualname__ + "."
                out.update((where + k, v) for k, v in vars(cls).items() if callable(v))
    out.update(("builtins." + k, v) for k, v in vars(builtins).items() if callable(v))
    out.update({"json.dumps": json.dumps, "json.loads": json.loads, "os.write": os.write,
                "hashlib.sha256": hashlib.sha256, "reporter._state": _state})
    out.update(("reporter." + k, v) for k, v in globals().items()
               if callable(v) and getattr(v, "__module__", None) == __name__)
    return out


def _uncut_tracebacks():
    """For runs that print one line per failure: pytest still lays out every failure's
    traceback in full, after cutting it at the test function entry by entry (a path made and
    looked up for each frame), and then prints only the crash line, which it takes from the
    whole traceback anyway (``ExceptionInfo._getreprcrash``), as the reporter's messages are.
    The cut, a fifth of a warm run of the sample's 104 tests with 34 failures, is skipped, and
    only the last entry is laid out: the entries are never printed. Outcomes are decided
    before any of this."""
    from _pytest import python

    original = getattr(python.Function, "_traceback_filter", None)
    if not callable(original):  # pytest < 7.4
        return

    def _traceback_filter(self, excinfo):
        # Only this session's tests: a test that runs pytest in its own process (pytester's
        # in-process runs) must see pytest's own tracebacks (pytest-mock 3.14.0's
        # test_missing_introspection failed in every brief run: its inner run printed the
        # frame pytest hides)
        if self.session is _state.get("session"):
            return excinfo.traceback[-1:]
        return original(self, excinfo)

    python.Function._traceback_filter = _traceback_filter


# Taken at import: ``-p`` plugins load before conftest files and the project are imported.
if os.environ.get("SWEMILL_BRIEF"):
    _uncut_tracebacks()
if _GUARD:
    _no_cached_rewrite()
_STDOUT = os.dup(1) if _GUARD else None

# A string annotation: the venv may run a Python (3.8) that cannot subscript ``dict``.
_state: "dict[str, Any]" = {"fh": None, "cov": None, "phases": {}, "test": None,
                           "spawned": set(), "said": {}, "impls": {}, "caller": None,
                           "foreign": []}
_SPAWN_EVENTS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn",
                           "os.exec", "os.spawn", "os.system", "os.startfile", "pty.spawn"})
_TRACE_EVENTS = frozenset({"sys.settrace", "sys.setprofile"})


def _audit(event, args):
    test = _state["test"]
    if test is None or (event not in _SPAWN_EVENTS and event not in _TRACE_EVENTS):
        return
    if event in _TRACE_EVENTS:
        import threading

        # the tracer installing itself in a new thread is coverage's own doing
        if threading.current_thread() is not threading.main_thread():
            return
    _state["spawned"].add(test)


def _audit_exec(event, args):
    """Grading runs: a test module or conftest file executed by the package's own code (or
    from another thread) was imported before pytest, which then collects what that code left
    in it (test functions swapped for no-ops)."""
    if event != "exec" or not args:
        return
    name = getattr(args[0], "co_filename", None)
    if not name or not _test_file(name):
        import sys

        caller = sys._getframe(1)
        if name and type(args[0]).__name__ == "code" and _test_file(caller.f_code.co_filename):
            _note_codes(args[0])  # code a test file builds and runs itself (generated tests)
        return
    import threading

    if threading.current_thread() is not threading.main_thread():
        _state["foreign"].append("test module " + os.path.basename(name) + " run in a thread")
        return
    by = _registrant(plugin_package=False)
    if by:
        _state["foreign"].append("test module " + os.path.basename(name) + " imported by "
                                 + _relative(by))
    _note_codes(args[0])


def _note_codes(code):
    """Every code object a test file's module code holds (its functions, methods, lambdas,
    nested ones), noted as it starts to run: what its test functions may run (see
    :func:`pytest_runtest_call`)."""
    codes = _state.setdefault("codes", {})
    stack = [code]
    while stack:
        c = stack.pop()
        if id(c) not in codes:
            codes[id(c)] = c  # held: the id stays this object's
            stack += [k for k in c.co_consts if type(k) is type(code)]


def _emit(obj):
    fh = _state["fh"]
    if fh is None and _REPORT:
        # Held open for the whole session and flushed per line: a killed run keeps its lines.
        fh = _state["fh"] = open(_REPORT, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
    if fh is not None:
        obj["n"] = _NONCE
        fh.write(json.dumps(obj) + "\n")
        fh.flush()


_TURNED_OFF = ("cacheprovider", "junitxml", "pastebin", "stepwise", "setuponly", "setupplan")
"""Built-in plugins swemill's runs may turn off with ``-p no:NAME``."""


def pytest_addoption(parser, pluginmanager):
    # A turned-off plugin's ini settings stay known: a suite that sets ``cache_dir`` or
    # ``junit_family`` would otherwise fail ``--strict-config``, or ``filterwarnings = error``
    # on pytest's "unknown config option" warning. (``-p no:`` is applied before this
    # module is imported, so ``is_blocked`` already knows.)
    for name in _TURNED_OFF:
        if pluginmanager.is_blocked(name):
            _keep_ini(parser, name)


def _keep_ini(parser, name):
    import importlib

    from _pytest.config.argparsing import Parser

    try:
        try:
            scratch = Parser(_ispytest=True)
        except TypeError:  # pytest 6
            scratch = Parser()
        importlib.import_module("_pytest." + name).pytest_addoption(scratch)
        entries = dict(scratch._inidict)
    except Exception:  # a pytest whose internals differ: nothing to keep
        return
    for key, value in entries.items():
        if key in parser._inidict:
            continue
        try:
            parser.addini(key, value[0], type=value[1], default=value[2])
        except Exception:
            parser._inidict[key] = value


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    if _GUARD:  # before any conftest file, and so the package, is imported
        _state["relays"] = (early_config.hook, early_config.pluginmanager.hook)
    # Start measuring before conftest files import the project, as pytest-cov does.
    if _COVER and _state["cov"] is None:
        import coverage

        cov = coverage.Coverage(data_file=None, source=[os.getcwd()], config_file=False)
        cov.start()
        _state["cov"] = cov
        import sys

        if hasattr(sys, "addaudithook"):
            sys.addaudithook(_audit)


def pytest_configure(config):
    _rewrite_named_modules(config)
    if _GUARD:
        # Grading runs name the environment's plugins with -p and turn autoloading off for
        # their own session (pytest has read the setting by now). A test that runs pytest
        # itself (pytester) must get the plugins its run got at the baseline, autoloaded:
        # pytest-mock 3.14.0's in-process runs lost pytest_mock and every oracle failed.
        os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)


def _rewrite_named_modules(config):
    """Under ``--doctest-modules``, assertion-rewrite the workspace's modules imported during
    the session, as pytest does for a module named on its command line. A task's tests are
    run by id (``pytest ... zipp/glob.py::zipp.glob.Translator``: the export's command, the
    warm server's runs), which makes pytest rewrite that module, and a doctest that expects
    an ``assert``'s plain message then fails; in a run of the whole suite, which names no
    file, it passed. zipp 3.20.2 in the zoo: the baseline passed that doctest, every run by
    id failed it, 33 of 43 candidates were dropped ``not_solvable``, and tasks were written
    with it in PASS_TO_PASS that their exported command failed at the fixed tree. Rewriting
    in every run makes the outcome the same however the tests are named."""
    if not config.getoption("doctestmodules", False):
        return
    hook = _rewrite_hook(config)
    if hook is None or not hasattr(hook, "_should_rewrite"):  # --assert=plain, other pytest
        return
    root = os.path.realpath(str(getattr(config, "rootpath", None) or config.rootdir))
    tops = set()
    for base in (root, os.path.join(root, "src")):
        with contextlib.suppress(OSError):
            tops.update(n[:-3] if n.endswith(".py") else n for n in os.listdir(base))
    should, early = hook._should_rewrite, hook._early_rewrite_bailout

    def _early_rewrite_bailout(name, state):
        if hook.session is not None and name.split(".")[0] in tops:
            return False
        return early(name, state)

    def _should_rewrite(name, fn, state):
        if should(name, fn, state):
            return True
        path = os.path.realpath(fn)
        return (hook.session is not None and path.endswith(".py")
                and path.startswith(root + os.sep) and "site-packages" not in path)

    hook._early_rewrite_bailout = _early_rewrite_bailout
    hook._should_rewrite = _should_rewrite
    _state["own"] = {"_early_rewrite_bailout": _early_rewrite_bailout,
                     "_should_rewrite": _should_rewrite}


def _rewrite_hook(config):
    """pytest's assertion-rewriting import hook of this session (None under --assert=plain)."""
    state = getattr(config, "_assertstate", None)  # pytest 5
    if state is None:
        try:
            from _pytest.assertion.rewrite import assertstate_key
        except ImportError:
            return None
        # the config's stash from pytest 7, its ``_store`` in pytest 6 (both have ``get``)
        store = getattr(config, "stash", None)
        if store is None:
            store = getattr(config, "_store", None)
        state = store.get(assertstate_key, None) if store is not None else None
    return getattr(state, "hook", None)


def pytest_sessionstart(session):
    import platform

    _state["session"] = session
    _emit({"kind": "start", "pytest": pytest.__version__, "python": platform.python_version()})
    if _STUTTER:
        _state["stutter"] = _start_stutter(_STUTTER)


# The stutter's helper: stops the group, sleeps, continues it (always, once it stopped it),
# then waits for the rest of the period or for its stdin to close (the session's end, or
# the run's process gone); prints how many stops it made.
_STUTTER_HELPER = """
import os, select, signal, sys, time
group, stop, rest = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
stops = 0
try:
    while True:
        os.killpg(group, signal.SIGSTOP)
        try:
            stops += 1
            time.sleep(stop)
        finally:
            os.killpg(group, signal.SIGCONT)
        if select.select([0], [], [], rest)[0]:
            break
except OSError:
    pass
print(stops, flush=True)
"""


def _start_stutter(spec):
    import subprocess
    import sys

    try:
        stop_ms, period_ms = (int(x) for x in spec.split(":"))
    except ValueError:
        return None
    stop, rest = stop_ms / 1000.0, max(period_ms - stop_ms, 1) / 1000.0
    return subprocess.Popen(
        [sys.executable, "-c", _STUTTER_HELPER, str(os.getpgrp()), str(stop), str(rest)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        start_new_session=True, close_fds=True)


def _end_stutter():
    """Stop the helper (it continues the group first) and return how many stops it made."""
    helper = _state.pop("stutter", None)
    if helper is None:
        return None
    out = b""
    with contextlib.suppress(Exception):
        out, _ = helper.communicate(timeout=10)
    if helper.poll() is None:
        helper.kill()
        helper.wait()
    with contextlib.suppress(ValueError):
        return int(out.strip() or b"0")
    return 0


def pytest_collection_modifyitems(session, config, items):
    if not _SELECT:
        return
    with open(_SELECT, encoding="utf-8") as fh:
        wanted = {line.rstrip("\n") for line in fh if line.strip()}
    keep = [i for i in items if i.nodeid in wanted]
    drop = [i for i in items if i.nodeid not in wanted]
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep


def pytest_collectreport(report):
    if report.failed:
        _emit({"kind": "collect", "nodeid": report.nodeid, "outcome": "error",
               "message": _message(report)})


def pytest_runtest_logstart(nodeid, location):
    _state["phases"][nodeid] = {}
    _emit({"kind": "begin", "nodeid": nodeid})  # a run killed now names the test it was in
    if _state["cov"] is not None:
        _state["cov"].switch_context(nodeid)
        _state["test"] = nodeid


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    # A fixture of a wider scope is set up once, during whichever test comes first, and its
    # result is used by every test in its scope: its lines belong to no single test.
    cov = _state["cov"]
    shared = cov is not None and _state["test"] is not None and fixturedef.scope != "function"
    if shared:
        cov.switch_context("")
    try:
        yield
    finally:
        if shared:
            cov.switch_context(_state["test"])


def pytest_runtest_logreport(report):
    phases = _state["phases"].setdefault(report.nodeid, {})
    earlier = phases.get(report.when)
    # A failed subtest (pytest >= 9's ``subtests``, pytest-subtests) is a report of the
    # test's own call phase: the test's last, passing report must not hide it (pytest exits
    # 1). zipp 3.20.2's tests run in subtests; a broken tree failed one and the whole-suite
    # runs said "passed".
    if earlier is not None and earlier.failed and not report.failed:
        return
    phases[report.when] = report


def pytest_runtest_logfinish(nodeid, location):
    if _state["cov"] is not None:
        _state["cov"].switch_context("")
        _state["test"] = None
    phases = _state["phases"].pop(nodeid, {})
    if _GUARD:
        _state["said"][nodeid] = _BEFORE["reporter._outcome"](phases)[0]
    outcome, message = _outcome(phases)
    duration = sum(getattr(r, "duration", 0.0) for r in phases.values())
    _emit({"kind": "test", "nodeid": nodeid, "outcome": outcome,
           "duration": round(duration, 6), "message": message})


def _outcome(phases):
    setup, call, teardown = phases.get("setup"), phases.get("call"), phases.get("teardown")
    if setup is None:
        return "error", "no setup report"
    if setup.failed:
        return "error", _message(setup)
    if setup.skipped:
        return ("xfailed" if hasattr(setup, "wasxfail") else "skipped"), _message(setup)
    outcome, message = "error", "no call report"
    if call is not None:
        if hasattr(call, "wasxfail"):
            outcome = "xfailed" if call.skipped else "xpassed"
        else:
            outcome = "failed" if call.failed else ("skipped" if call.skipped else "passed")
        message = _message(call) if outcome != "passed" else ""
    if teardown is not None and teardown.failed and outcome in ("passed", "xpassed", "skipped"):
        return "error", _message(teardown)
    return outcome, message


def _message(report):
    longrepr = report.longrepr
    if longrepr is None:
        return getattr(report, "wasxfail", "") or ""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])[:_MSG_MAX]
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        return str(crash.message)[:_MSG_MAX]
    text = str(longrepr).strip().splitlines()
    return "\n".join(text[-3:])[:_MSG_MAX]


def _replaced():
    now = _guarded()
    missing = object()
    return sorted(k for k, v in _BEFORE.items() if now.get(k, missing) is not v) + sorted(
        k for k in now if k not in _BEFORE and k.startswith("class:"))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    stops = _end_stutter()
    cov = _state["cov"]
    if cov is not None:
        cov.stop()
        _write_coverage(cov)
    emit = _BEFORE.get("reporter._emit", _emit)
    if _GUARD:
        try:
            changed = _BEFORE["reporter._tampered"](session, exitstatus)
        except Exception as exc:  # the checks themselves broken: that is tampering too
            changed = ["check failed: " + type(exc).__name__]
        if changed:
            emit({"kind": "tamper", "names": changed[:20]})
    finish = {"kind": "finish", "exitstatus": int(exitstatus),
              "collected": getattr(session, "testscollected", 0)}
    if stops is not None:
        finish["stutter_stops"] = stops
    emit(finish)
    if _state["fh"] is not None:
        _state["fh"].close()
        _state["fh"] = None
    if _GUARD and _REPORT and _STDOUT is not None:
        with _BEFORE["builtins.open"](_REPORT, "rb") as fh:
            digest = _BEFORE["hashlib.sha256"](fh.read()).hexdigest()
        _BEFORE["os.write"](_STDOUT, f"\n{SEAL} {_NONCE} {digest}\n".encode())


def _write_coverage(cov):
    data = cov.get_data()
    root = os.getcwd()
    files = {}
    shared = {}
    for path in data.measured_files():
        rel = os.path.relpath(path, root)
        if rel.startswith(".."):
            continue
        per_test = {}
        for line, contexts in data.contexts_by_lineno(path).items():
            for ctx in contexts:
                per_test.setdefault(ctx, []).append(line)
        outside = per_test.pop("", None)
        rel = rel.replace(os.sep, "/")
        if outside:
            shared[rel] = sorted(outside)
        if per_test:
            files[rel] = {k: sorted(v) for k, v in per_test.items()}
    tmp = _COVER + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"n": _NONCE, "files": files, "shared": shared,
                   "spawned": sorted(_state["spawned"])}, fh)
    os.replace(tmp, _COVER)


_TEST_DIRS = frozenset({"tests", "test", "testing"})


def _repository_file(path):
    """A source file of the repository under test that is not a test file (the package)."""
    known = _state.setdefault("files", {})
    found = known.get(path)
    if found is None:
        found = known[path] = _in_package(path)
    return found


def _relative(path):
    """``path`` relative to the repository's root, as the tamper lines name it."""
    return os.path.relpath(os.path.realpath(path), _root())


def _root():
    root = _state.get("root")
    if root is None:
        root = _state["root"] = os.path.realpath(os.getcwd())
    return root


def _in_package(path):
    root = _root()
    if not os.path.isfile(path):  # "<frozen runpy>", "<string>"
        return False
    path = os.path.realpath(path)
    if not path.startswith(root + os.sep) or "site-packages" in path:
        return False
    if any(path == p or path.startswith(p + os.sep) for p in _runner_paths()):
        return False  # the repository is pluggy or pytest itself: its code runs every hook
    parts = path[len(root) + 1:].split(os.sep)
    name = parts[-1]
    if name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py"):
        return False
    return not any(p in _TEST_DIRS for p in parts[:-1])


def _runner_paths():
    """The test runner's packages (folders) and single-file modules, wherever they live."""
    paths = _state.get("runner")
    if paths is None:
        import sys

        paths = _state["runner"] = []
        for name in ("pytest", "_pytest", "pluggy", "py", "iniconfig"):
            where = getattr(sys.modules.get(name), "__file__", None)
            if where:
                where = os.path.realpath(where)
                is_package = os.path.basename(where).startswith("__init__.")
                paths.append(os.path.dirname(where) if is_package else where)
    return paths


def _registrant(plugin_package=True):
    """The repository file whose code is on the stack of a plugin's registration, if any (the
    code of a plugin module the repository ships, or with ``plugin_package`` of the package
    that holds it, does not count)."""
    import sys

    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if _repository_file(name) and not _plugin_code(name, plugin_package):
            return name
        frame = frame.f_back
    return None


def _plugin_code(path, plugin_package=True):
    """Code of a plugin module the repository ships (or, with ``plugin_package``, of the package
    that holds it): it runs pytest's hooks, collection and registering its own plugin objects
    included, as pytest's own code does."""
    places = _state.get("plugin_code")
    if not places:
        return False
    path = os.path.realpath(path)
    return any(path == file or plugin_package and path.startswith(folder + os.sep)
               for file, folder in places)


def _code_file(function):
    """The file a hook function's code comes from; ``"<none>"`` for code compiled from a string."""
    import inspect

    function = getattr(inspect.unwrap(function), "__func__", function)
    code = getattr(function, "__code__", None)
    if code is None:
        return None  # a builtin, a partial: no Python code of its own
    name = code.co_filename
    return name if os.path.isfile(name) else "<none>"


@pytest.hookimpl(tryfirst=True)
def pytest_plugin_registered(plugin, manager):
    """Notes each hook implementation as it is registered (pytest replays the registrations
    made before this plugin), so that at the end the hooks can be checked against them; a
    plugin registered by the repository's own code, or from another thread, or whose hooks
    are the package's code or code compiled from a string, is noted as foreign."""
    if not _GUARD:
        return
    import threading

    callers = manager.get_hookcallers(plugin) or []
    if _state["caller"] is None and callers:
        _state["caller"] = type(callers[0])
    name = manager.get_name(plugin) or type(plugin).__name__
    foreign = []
    for caller in callers:
        for impl in caller.get_hookimpls():
            if impl.plugin is plugin:
                _state["impls"][id(impl)] = (impl, impl.function)
                if not isinstance(plugin, type(os)):
                    code = _code_file(impl.function)
                    if code == "<none>" or code and _repository_file(code) and not (
                            _plugin_code(code)):
                        foreign.append("hooks from " + str(code))
    if threading.current_thread() is not threading.main_thread():
        foreign.append("another thread")
    by = _registrant()
    if by:
        foreign.append(_relative(by))
    if foreign:
        _state["foreign"].append("plugin:" + str(name)[:60] + " (" + ", ".join(foreign[:2]) + ")")
    elif isinstance(plugin, type(os)) and getattr(plugin, "__file__", None):
        # a plugin module the repository ships (``-p pkg.plugin``, an entry point): its code
        # runs pytest's hooks, collection included, as pytest's own does
        where = os.path.realpath(plugin.__file__)
        if _repository_file(where):
            folder = os.path.dirname(where)
            in_package = os.path.isfile(os.path.join(folder, "__init__.py"))
            _state.setdefault("plugin_code", []).append((where, folder if in_package else where))


def _hooks_added(manager):
    """Hook implementations that no registration made, or whose function was swapped since;
    hook callers that are not pluggy's."""
    out = []
    impls = _state["impls"]
    for name, caller in list(vars(manager.hook).items()):
        if type(caller) is not _state["caller"]:
            out.append("hook:" + name + " caller " + type(caller).__name__)
            continue
        try:
            for impl in caller.get_hookimpls():
                seen = impls.get(id(impl))
                where = "hook:" + name + " impl of " + str(impl.plugin_name)
                if seen is None or seen[0] is not impl:
                    out.append(where + " unregistered")
                elif seen[1] is not impl.function:
                    out.append(where + " swapped")
        except Exception as exc:  # a caller broken on purpose is a finding, not a crash
            out.append("hook:" + name + " " + type(exc).__name__)
    return out


def _unsaid(exitstatus):
    """Tests whose last report line differs from the outcome pytest's reports gave (written
    through a reporter function that was swapped and put back); a run that exits 0 after
    failed or error tests."""
    last = {}
    if _REPORT:
        with _BEFORE["builtins.open"](_REPORT, encoding="utf-8") as fh:
            for line in fh:
                try:
                    row = _BEFORE["json.loads"](line)
                except ValueError:
                    continue
                if isinstance(row, dict) and row.get("kind") == "test" and row.get("n") == _NONCE:
                    last[row.get("nodeid")] = row.get("outcome")
    said = _state["said"]
    out = ["report:" + k for k in sorted(k for k, v in said.items() if last.get(k) != v)[:5]]
    if int(exitstatus) == 0 and any(v in ("failed", "error") for v in said.values()):
        out.append("exitstatus 0 after failures")
    return out


def _loaded_elsewhere(session):
    """Test modules that pytest's import hook did not load from their own file: an import hook
    put in front of it can compile a test module's functions empty. Methods put on pytest's
    hook itself count too (but the two this reporter sets under --doctest-modules)."""
    from importlib.machinery import SourceFileLoader

    hook = _rewrite_hook(session.config)
    out = []
    own = _state.get("own", {})
    if hook is not None:
        out += ["rewrite hook." + k for k, v in vars(hook).items()
                if callable(v) and own.get(k) is not v]
    seen, parents = set(), set()
    for item in getattr(session, "items", None) or ():
        if id(item.parent) in parents:  # the items of one module or class: looked at once
            continue
        parents.add(id(item.parent))
        module = getattr(getattr(item, "module", None), "__dict__", None)
        if module is None or id(module) in seen:
            continue
        seen.add(id(module))
        spec = module.get("__spec__")
        loader = getattr(spec, "loader", None) or module.get("__loader__")
        if loader is not hook and type(loader) is not SourceFileLoader:
            out.append("test module " + str(module.get("__name__")) + " loaded by "
                       + type(loader).__name__)
            continue
        where = module.get("__file__")
        path = str(getattr(item, "path", None) or getattr(item, "fspath", ""))
        if where and os.path.realpath(where) != os.path.realpath(path):
            out.append("test module " + str(module.get("__name__")) + " from " + str(where))
    return out[:5]


def _tampered(session, exitstatus):
    names = _BEFORE["reporter._replaced"]()
    names += _BEFORE["reporter._unsaid"](exitstatus)
    names += _BEFORE["reporter._hooks_added"](session.config.pluginmanager)
    names += _BEFORE["reporter._loaded_elsewhere"](session)
    names += _BEFORE["reporter._relays_replaced"](session)
    return names + _state["foreign"]


def _relays_replaced(session):
    """The config's hook relay (every test's hooks go through it) and the plugin manager's,
    as they were before any conftest file was imported."""
    before = _state.get("relays")
    if before is None:
        return ["hook relays never noted"]
    out = []
    if session.config.hook is not before[0]:
        out.append("config.hook replaced")
    if session.config.pluginmanager.hook is not before[1]:
        out.append("pluginmanager.hook replaced")
    return out


def _test_file(path):
    """A test module or conftest file of the repository (by pytest's naming conventions)."""
    known = _state.setdefault("tests", {})
    found = known.get(path)
    if found is None:
        name = os.path.basename(path)
        found = known[path] = bool(
            (name == "conftest.py" or name.startswith("test_") and name.endswith(".py")
             or name.endswith("_test.py")) and os.path.isfile(path)
            and os.path.realpath(path).startswith(_root() + os.sep))
    return found


def _holder_value(item):
    """(holder, name) of the function a test item runs, and the object found there now."""
    name = getattr(item, "originalname", None)
    holder = getattr(getattr(item, "parent", None), "obj", None)
    if not name or holder is None:
        return None
    if isinstance(holder, type):
        for klass in holder.__mro__:
            if name in vars(klass):
                return vars(klass)[name]
        return None
    return getattr(holder, "__dict__", {}).get(name)


def _bound(item):
    """The function an item holds (``_obj``, once pytest looked it up), unbound."""
    obj = item.__dict__.get("_obj")
    return getattr(obj, "__func__", obj)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    if _GUARD:
        _state["collected"] = {item.nodeid: _held(item)
                               for item in getattr(session, "items", None) or ()}


def _held(item):
    held, bound = _holder_value(item), _bound(item)
    return held, bound, getattr(bound if bound is not None else held, "__code__", None)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    """Grading runs: the function a test runs is the one collected, with the code it had.
    Package code running in an earlier test can swap a later test's function in its module or
    class, in the item itself (unittest items bind theirs at setup: the class's function,
    unbound, is allowed), or the code object inside it."""
    if not _GUARD or item.nodeid not in _state.get("collected", {}):
        return
    held, bound, code = _state["collected"][item.nodeid]
    now = _bound(item)
    if (_holder_value(item) is not held or now is not None and now is not bound and now is not held
            or getattr(now if now is not None else held, "__code__", None) is not code):
        _state["foreign"].append("test function of " + item.nodeid[:80] + " swapped")
    elif _code_not_its_files(now if now is not None else held):
        # swapped before collection ended (from another thread, say), so collected that way
        _state["foreign"].append("test function of " + item.nodeid[:80] + " runs code its "
                                 "file did not define")


def _code_not_its_files(function):
    """A function of a test file (its globals are that module's) whose code is not one its
    file's module code defined: the code object was replaced (a function a test file builds
    with ``exec`` counts too)."""
    import inspect

    codes = _state.get("codes")
    try:
        function = inspect.unwrap(function)
    except ValueError:  # a __wrapped__ cycle: not a function of a file
        return False
    function = getattr(function, "__func__", function)
    module_file = (getattr(function, "__globals__", None) or {}).get("__file__")
    code = getattr(function, "__code__", None)
    if codes is None or code is None or not module_file or not _test_file(module_file):
        return False
    return id(code) not in codes or codes[id(code)] is not code


# Taken last, so that the reporter's own functions are among them.
_BEFORE = _guarded() if _GUARD else {}
if _GUARD and hasattr(__import__("sys"), "addaudithook"):
    __import__("sys").addaudithook(_audit_exec)
