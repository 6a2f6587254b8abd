"""Baseline and selected runs in a real bwrap sandbox over a real environment.

Regression classes: a test that passes only on an idle machine must be flaky (the stuttered
run), never PASS_TO_PASS material; a hanging test must end at the timeout and never read as
a pass; a run that dies with exit 0 before pytest's summary (``os._exit(0)`` in a test) is
not a pass, and one that crashes says what it last said; a selection must run exactly what
was asked; the coverage map must name the functions a test really executes and none it does
not.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from swemill.repo.envbuild import RepoEnv, build_env
from swemill.repo.sources import resolve_source
from swemill.suite.baseline import fresh_sandbox, load_baseline, run_baseline
from swemill.suite.runner import run_tests
from swemill.suite.timeouts import adaptive_timeout

pytestmark = [pytest.mark.slow, pytest.mark.network]

FILES = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "calcdemo"
        version = "0.1"
        [tool.setuptools]
        packages = ["calcdemo"]
        [tool.pytest.ini_options]
        addopts = "-x -p no:warnings -ra"
        """,
    "calcdemo/__init__.py": """
        def add(a, b):
            return a + b


        def mul(a, b):
            total = 0
            for _ in range(b):
                total = add(total, a)
            return total


        class Acc:
            def __init__(self):
                self.v = 0

            def push(self, x):
                self.v = add(self.v, x)
                return self


        def untested():
            return 42
        """,
    "tests/test_calc.py": """
        import os
        import time

        import pytest

        from calcdemo import Acc, add, mul

        def test_add():
            assert add(2, 3) == 5

        def test_mul():
            assert mul(3, 4) == 12

        def test_acc():
            assert Acc().push(2).push(3).v == 5

        def test_broken():
            assert add(1, 1) == 3

        @pytest.mark.skip(reason="not here")
        def test_skipped():
            pass

        @pytest.mark.xfail(reason="known")
        def test_known_bug():
            assert mul(2, 2) == 5

        def test_maybe_hang():
            if os.path.exists("HANG"):
                time.sleep(600)

        def test_wakes_on_time():
            # passes on an idle machine; on a busy one a 2 ms sleep can wake 20 ms late
            gaps, last = [], time.monotonic()
            for _ in range(40):
                time.sleep(0.002)
                now = time.monotonic()
                gaps.append(now - last)
                last = now
            assert max(gaps) < 0.015

        def test_maybe_exit():
            if os.path.exists("EXIT"):
                os._exit(0)
            if os.path.exists("CRASH"):  # what a C extension's bug does
                import ctypes
                ctypes.string_at(0)
        """,
}
T = "tests/test_calc.py::"


@pytest.fixture(scope="module")
def calc_env(shared_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> RepoEnv:
    root = tmp_path_factory.mktemp("calc") / "calcdemo"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text).lstrip())
    return build_env(resolve_source(str(root), cache=shared_cache), cache=shared_cache)


def test_baseline_outcomes_durations_and_coverage_map(calc_env: RepoEnv) -> None:
    b = run_baseline(calc_env, backend="bwrap", runs=3, suite_timeout=300)
    assert b.outcomes == {
        T + "test_add": "passed", T + "test_mul": "passed", T + "test_acc": "passed",
        T + "test_broken": "failed", T + "test_skipped": "skipped",
        T + "test_known_bug": "xfailed", T + "test_maybe_hang": "passed",
        T + "test_maybe_exit": "passed", T + "test_wakes_on_time": "passed",
    }  # the repo's -x was dropped: every test ran
    # the third run was stuttered: the test that needs an idle machine is flaky, nothing else
    assert b.flaky == [T + "test_wakes_on_time"] and b.runs == 3 and b.stutter == "20:40"
    assert b.load_flaky == [T + "test_wakes_on_time"]
    assert set(b.durations_s) == set(b.outcomes)
    assert b.coverage["calcdemo/__init__.py::add"] == sorted(
        [T + "test_acc", T + "test_add", T + "test_broken", T + "test_known_bug",
         T + "test_mul"])
    assert b.coverage["calcdemo/__init__.py::Acc.push"] == [T + "test_acc"]
    assert b.coverage["calcdemo/__init__.py::mul"] == [T + "test_known_bug", T + "test_mul"]
    assert "calcdemo/__init__.py::untested" not in b.coverage
    assert b.startup_s > 0 and b.suite_wall_s > 0
    assert "-p no:randomly" in b.test_cmd and "-ra" in b.test_cmd
    assert b.passing() == {T + n for n in ("test_add", "test_mul", "test_acc",
                                           "test_maybe_hang", "test_maybe_exit")}
    stamp = calc_env.baseline_path.stat().st_mtime_ns
    assert run_baseline(calc_env, backend="bwrap") == b == load_baseline(calc_env)
    assert calc_env.baseline_path.stat().st_mtime_ns == stamp  # reused, not rerun
    assert adaptive_timeout(b, [T + "test_add"]) < adaptive_timeout(b)


def test_selected_run_runs_exactly_the_selection(calc_env: RepoEnv) -> None:
    wanted = [T + "test_add", T + "test_broken", T + "test_gone", "tests/test_deleted.py::t"]
    with fresh_sandbox(calc_env, "bwrap") as sb:
        r = run_tests(sb, calc_env, wanted, timeout=120)
        assert not list(sb.workspace.glob(".swemill-run-*"))  # nothing left behind
    assert r.trustworthy, r.problem
    assert set(r.results) == set(wanted)
    assert [r.status(n) for n in wanted] == ["passed", "failed", "error", "error"]


def test_a_stuttered_run_stops_the_tests_as_a_busy_machine_would(calc_env: RepoEnv) -> None:
    wanted = [T + "test_add", T + "test_wakes_on_time"]
    with fresh_sandbox(calc_env, "bwrap") as sb:
        r = run_tests(sb, calc_env, wanted, timeout=120, stutter="20:40")
        assert not list(sb.workspace.glob(".swemill-run-*"))
    assert r.trustworthy, r.problem
    assert r.stutter_stops is not None and r.stutter_stops >= 2, r.stutter_stops
    assert r.status(T + "test_add") == "passed"
    assert r.status(T + "test_wakes_on_time") == "failed"  # a 20 ms stop in its 80 ms


def test_hanging_test_ends_at_the_timeout_and_is_not_a_pass(calc_env: RepoEnv) -> None:
    with fresh_sandbox(calc_env, "bwrap") as sb:
        sb.write_file("HANG", "")
        r = run_tests(sb, calc_env, [T + "test_add", T + "test_maybe_hang"], timeout=5)
    assert r.timed_out and not r.trustworthy and r.wall_s < 60
    assert r.status(T + "test_add") == "error" and r.status(T + "test_maybe_hang") == "error"


def test_a_baseline_past_its_bound_names_the_test_it_was_in(calc_env: RepoEnv) -> None:
    # apscheduler 3.10.4: its mongodb tests wait 30 s each for a server the sandbox lacks; the
    # baseline said only "did not finish within 332 s; raise it with --suite-timeout"
    from swemill.core.errors import TestRunError

    hang = calc_env.source_path / "HANG"
    hang.write_text("")
    try:
        with pytest.raises(TestRunError) as info:
            run_baseline(calc_env, backend="bwrap", runs=1, suite_timeout=5, rebuild=True)
    finally:
        hang.unlink()
    message = str(info.value)
    assert f"it was still running {T}test_maybe_hang (" in message, message
    assert "--deselect" in message and "--suite-timeout" in message, message
    assert "\n" not in message


def test_exit_zero_before_the_summary_is_not_a_pass(calc_env: RepoEnv) -> None:
    with fresh_sandbox(calc_env, "bwrap") as sb:
        sb.write_file("EXIT", "")
        r = run_tests(sb, calc_env, [T + "test_add", T + "test_maybe_exit"], timeout=120)
    assert r.exit_code == 0 and not r.trustworthy
    assert "never finished" in r.problem
    assert r.status(T + "test_add") == "error"


def test_a_run_that_crashes_says_what_it_last_said(calc_env: RepoEnv) -> None:
    # "killed or os._exit" alone hid the cause; faulthandler's line on stderr names it
    with fresh_sandbox(calc_env, "bwrap") as sb:
        sb.write_file("CRASH", "")
        r = run_tests(sb, calc_env, [T + "test_add", T + "test_maybe_exit"], timeout=120)
    assert not r.trustworthy and "never finished" in r.problem, r.problem
    assert "killed by SIGSEGV; its last words: Fatal Python error: Segmentation fault" in \
        r.problem, r.problem


def test_a_suite_whose_whole_collection_fails_names_the_collection_error(
        shared_cache: Path, tmp_path: Path) -> None:
    # docopt: its conftest makes a collector for its `.docopt` case files the way pytest 6
    # stopped allowing; collecting the root failed, and the baseline said only "collected
    # no tests"
    from swemill.core.errors import TestRunError

    root = tmp_path / "casesdemo"
    files = {
        "pyproject.toml": FILES["pyproject.toml"].replace("calcdemo", "casesdemo"),
        "casesdemo/__init__.py": "VALUE = 1\n",
        "conftest.py": """
            def pytest_collect_file(file_path, parent):
                if file_path.suffix == ".cases":
                    raise RuntimeError("cannot build a collector for " + file_path.name)
            """,
        "tests.cases": "1\n",
        "test_value.py": "from casesdemo import VALUE\n\ndef test_value():\n    assert VALUE\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text).lstrip())
    env = build_env(resolve_source(str(root), cache=shared_cache), cache=shared_cache)
    with pytest.raises(TestRunError) as info:
        run_baseline(env, runs=1)
    message = str(info.value)
    assert "collected no tests in casesdemo: collecting" in message, message
    assert "cannot build a collector for tests.cases" in message, message


def test_a_selection_runs_its_files_in_the_order_a_whole_suite_run_does(
        calc_env: RepoEnv) -> None:
    """pytest runs file arguments in the order given. A grading selection lists FAIL_TO_PASS
    first; a suite whose later file leaves state behind (pyrsistent 0.20.0) then failed
    tests that pass in every whole-suite run. The files go in collection order."""
    z = "tests/test_z_state.py::test_sets_state"
    a = "tests/test_a_state.py::test_state_untouched"
    with fresh_sandbox(calc_env, "bwrap") as sb:
        sb.write_file("tests/test_z_state.py",
                      "import calcdemo\n\n\ndef test_sets_state():\n"
                      "    calcdemo.add = lambda a, b: 0  # never put back\n")
        sb.write_file("tests/test_a_state.py",
                      "import calcdemo\n\n\ndef test_state_untouched():\n"
                      "    assert calcdemo.add(1, 2) == 3\n")
        r = run_tests(sb, calc_env, [z, a], timeout=120)
    assert r.trustworthy, r.problem
    assert r.status(a) == "passed" and r.status(z) == "passed"


def test_files_are_ordered_as_each_pytest_walks_the_tree() -> None:
    from swemill.suite.runner import _collection_key

    files = ["tests/sub/test_b.py", "tests/test_z.py", "tests/test_a.py", "a_doc.py"]
    # pytest >= 8: a directory's files and subdirectories by name, among one another
    assert sorted(files, key=lambda f: _collection_key(f, False)) == [
        "a_doc.py", "tests/sub/test_b.py", "tests/test_a.py", "tests/test_z.py"]
    # before: a directory's files, then its subdirectories
    assert sorted(files, key=lambda f: _collection_key(f, True)) == [
        "a_doc.py", "tests/test_a.py", "tests/test_z.py", "tests/sub/test_b.py"]
