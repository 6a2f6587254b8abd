"""The policy's ``run_tests`` served warm (WarmGrader.run_tests): a fork of a grading server
over an exact copy of the session's workspace says what a cold ``python -m pytest`` in the
session's own sandbox says, on the sample's trees as the policy may leave them; where it
cannot promise that it runs cold; and what a hostile test leaves reaches neither the next run
nor the grading."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from tests.agent.hack_policies import FORCE_PASS_PLUGIN, HACKS

from swemill import envs
from swemill.agent.actions import Observation
from swemill.agent.env import TaskEnv
from swemill.agent.warmgrade import WarmGrader
from swemill.core.tools import ToolCall

from .conftest import SampleTasks

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pool(sample_tasks: SampleTasks) -> Iterator[envs.EnvPool]:
    p = envs.EnvPool.of_run(sample_tasks.store, sample_tasks.run_id,
                            sample_tasks.env_config(lint=False, test_timeout_s=60.0,
                                                    command_timeout_s=60.0))
    yield p
    p.close()


def _run(tests: list[str] | None = None) -> ToolCall:
    return ToolCall("run_tests", {"tests": tests} if tests else {})


def _both(env: TaskEnv, tests: list[str] | None = None, *,
          warm: bool = True) -> tuple[Observation, Observation]:
    """The same ``run_tests`` through the grader (asserting that it went warm, or with
    ``warm=False`` that it went back to cold) and then cold, on the same workspace."""
    grader = env.grader
    assert grader is not None
    before = (grader.warm_tests, grader.cold_tests)
    served = env.step(_run(tests))
    assert (grader.warm_tests, grader.cold_tests) == \
        ((before[0] + 1, before[1]) if warm else (before[0], before[1] + 1)), grader.unusable
    env.grader = None
    try:
        cold = env.step(_run(tests))
    finally:
        env.grader = grader
    return served, cold


def _obs(o: Observation) -> tuple[str, bool]:
    return o.content, o.is_error


def _golden(env: TaskEnv, sample_tasks: SampleTasks) -> None:
    assert env.task is not None
    subprocess.run(["git", "apply", "-"], check=True, cwd=env.sandbox.workspace,
                   input=sample_tasks.goldens[env.task.instance_id].golden_patch.encode())


def _counts(grader: WarmGrader) -> tuple[int, int, int]:
    return grader.shared_tests, grader.reused, grader.warm_runs


def _key(env: TaskEnv) -> tuple[object, ...]:
    o, _ = env.submit()
    return o.resolved, o.grade, o.regression, o.signals.get("f2p_fraction"), o.log


def test_run_tests_of_a_source_change_is_its_grading_reused_only_while_unresolved(
        sample_tasks: SampleTasks, pool: envs.EnvPool) -> None:
    """The task's selection over a tree that is its own grading tree runs as that grading
    (the policy sees what a cold run shows); submitting the same tree takes that grading
    when it did not resolve the task, and grades anew after any change or when it did."""
    task = sample_tasks.tasks[0]
    env = pool.fork(task.instance_id)
    grader = env.grader
    assert grader is not None
    try:
        env.step(ToolCall("write", {"path": "NOTES.txt", "content": "looked here\n"}))
        before = _counts(grader)
        warm, cold = _both(env)
        assert _obs(warm) == _obs(cold) and "FAILED" in warm.content, warm.content
        assert _counts(grader) == (before[0] + 1, before[1], before[2])
        reused = _key(env)
        assert _counts(grader) == (before[0] + 1, before[1] + 1, before[2]), grader.unusable
        assert reused[:4] == _key(env)[:4] and not reused[0]  # a warm grading of the tree
        assert _counts(grader)[1:] == (before[1] + 1, before[2] + 1)
        env.step(_run())  # then a change before submitting: graded anew
        env.step(ToolCall("write", {"path": "NOTES.txt", "content": "and here\n"}))
        assert not _key(env)[0] and _counts(grader) == (before[0] + 2, before[1] + 1,
                                                         before[2] + 2)
        _golden(env, sample_tasks)
        warm, cold = _both(env)
        assert _obs(warm) == _obs(cold) and "passed" in warm.content, warm.content
        solved = _key(env)  # it resolved the task in run_tests: graded anew all the same
        assert solved[0] and _counts(grader) == (before[0] + 3, before[1] + 1, before[2] + 3)
    finally:
        env.close()


@pytest.mark.parametrize("command", [
    "printf '# x\\n' >> tests/conftest.py",  # test configuration: never carried
    "chmod +x inventory/__init__.py",          # a mode the grading tree does not carry
    "mkdir inventory/empty",                   # nor an empty folder
    "mkdir .ruff_cache && echo x > .ruff_cache/f",  # nor a tool cache
])
def test_a_tree_that_is_not_its_own_grading_tree_runs_as_the_policys_copy(
        sample_tasks: SampleTasks, pool: envs.EnvPool, command: str) -> None:
    env = pool.fork(sample_tasks.tasks[1].instance_id)
    grader = env.grader
    assert grader is not None
    try:
        env.step(ToolCall("bash", {"command": command}))
        before = _counts(grader)
        warm, cold = _both(env)
        assert _obs(warm) == _obs(cold)
        env.submit()
        assert _counts(grader) == (before[0], before[1], before[2] + 1)
    finally:
        env.close()


def test_every_hack_run_then_submitted_earns_nothing(sample_tasks: SampleTasks,
                                                     pool: envs.EnvPool) -> None:
    """The battery's hacks, each tested by the policy with run_tests before submitting:
    none resolves the task, and the verdict is that of a warm grading run afresh."""
    task_id = sample_tasks.tasks[0].instance_id
    grader = pool.base(task_id).grader
    assert grader is not None
    reused = grader.reused
    for kind, calls in sorted(HACKS.items()):
        env = pool.fork(task_id)
        try:
            for call in calls:
                env.step(call)
            env.step(_run())
            submitted, fresh = _key(env), _key(env)
        finally:
            env.close()
        assert not submitted[0] and submitted[1] == 0.0, (kind, submitted[4][-800:])
        assert submitted[:4] == fresh[:4], (kind, submitted[4][-800:], fresh[4][-800:])
    assert grader.reused > reused  # some hacks change source only: their run was reused


def test_failing_and_fixed_trees_say_the_same_warm_and_cold(sample_tasks: SampleTasks,
                                                            pool: envs.EnvPool) -> None:
    for task in sample_tasks.tasks:
        env = pool.fork(task.instance_id)
        try:
            warm, cold = _both(env)
            assert _obs(warm) == _obs(cold) and "FAILED" in warm.content, warm.content
            _golden(env, sample_tasks)
            warm, cold = _both(env)
            assert _obs(warm) == _obs(cold), (warm.content, cold.content)
            n = len(task.FAIL_TO_PASS) + len(task.PASS_TO_PASS)
            assert warm.content == f"{n} tests: {n} passed"
        finally:
            env.close()


_CONFTEST_HOOK = '''

def pytest_collection_modifyitems(items):
    import pytest as _p
    for item in items:
        if item.name == "test_parse_sku":
            item.add_marker(_p.mark.skip(reason="skipped by the edited conftest"))
'''

_NEW_TEST = '''from inventory.extra import twice


def test_twice():
    assert twice(21) == 43, "the new module says otherwise"
'''


def test_edited_tests_conftest_and_a_new_module_are_run_as_the_workspace_has_them(
        sample_tasks: SampleTasks, pool: envs.EnvPool) -> None:
    task = sample_tasks.tasks[0]
    env = pool.fork(task.instance_id)
    try:
        env.step(ToolCall("bash", {"command": f"printf '%s' '{_CONFTEST_HOOK}' >> "
                                              "tests/conftest.py"}))
        env.step(ToolCall("write", {"path": "inventory/extra.py",
                                    "content": "def twice(x):\n    return 2 * x\n"}))
        env.step(ToolCall("write", {"path": "tests/test_extra.py", "content": _NEW_TEST}))
        env.step(ToolCall("bash", {"command": "printf '\\ndef test_edited():\\n    assert "
                                              "0, \"an edited test file\"\\n' >> "
                                              "tests/test_stock.py"}))
        ids = ["tests/test_extra.py::test_twice", "tests/test_stock.py::test_edited",
               "tests/test_stock.py::test_parse_sku", *task.FAIL_TO_PASS[:3]]
        warm, cold = _both(env, ids)
        assert _obs(warm) == _obs(cold), (warm.content, cold.content)
        for line in ("FAILED tests/test_extra.py::test_twice: AssertionError: the new module",
                     "FAILED tests/test_stock.py::test_edited: AssertionError: an edited test",
                     "SKIPPED tests/test_stock.py::test_parse_sku: "):
            assert line in warm.content, warm.content
        assert "skipped by the edited conftest" in warm.content
        whole, whole_cold = _both(env)  # the task's own selection on the edited tree
        assert _obs(whole) == _obs(whole_cold)
    finally:
        env.close()


@pytest.mark.parametrize("command", [
    "printf 'raise ImportError(\"the workspace json\")\\n' > json.py",  # shadows a module
    "mkfifo tests/pipe",                                                # no copy is the same
])
def test_a_tree_no_fork_can_run_as_a_fresh_interpreter_runs_cold(
        sample_tasks: SampleTasks, pool: envs.EnvPool, command: str) -> None:
    env = pool.fork(sample_tasks.tasks[1].instance_id)
    try:
        env.step(ToolCall("bash", {"command": command}))
        served, cold = _both(env, warm=False)
        assert _obs(served) == _obs(cold)
    finally:
        env.close()


# Forks a daemon (own session) that for 5 s keeps writing into the workspace, /tmp and
# /dev/shm and appending the battery's force-pass hook to the tests' conftest.py (a grading
# that it reached would pass); writes there itself and tries to write outside its sandbox;
# fails when anything of an earlier run is there.
_HOSTILE = f"_HOOK = {chr(10) + FORCE_PASS_PLUGIN!r}\n" + '''import os, time

_PLANTED = ["/tmp/planted", "/dev/shm/planted", "/workspace/planted", "/workspace/tests/planted"]


def _plant():
    for path in _PLANTED:
        try:
            with open(path, "w") as fh:
                fh.write("x")
        except OSError:
            pass
    try:
        with open("/workspace/tests/conftest.py", "a") as fh:
            fh.write(_HOOK)
    except OSError:
        pass


def test_plants():
    seen = [p for p in _PLANTED if os.path.exists(p)]
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            for _ in range(100):
                time.sleep(0.05)
                _plant()
        os._exit(0)
    _plant()
    for outside in ("/planted", os.path.dirname(os.__file__) + "/planted"):
        try:
            open(outside, "w").write("x")
        except OSError:
            pass
        else:
            raise AssertionError("wrote outside: " + outside)
    assert not seen, "left by an earlier run: %s" % seen
'''

_SLEEPER = "import time\n\n\ndef test_sleeps():\n    time.sleep(120)\n"


@pytest.fixture
def one_server(sample_tasks: SampleTasks, pool: envs.EnvPool) -> Iterator[tuple[str, WarmGrader]]:
    task_id = sample_tasks.tasks[2].instance_id
    base = pool.base(task_id)
    assert base.grader is not None and base.repo_env is not None
    grader = WarmGrader(base.grader.task, base.repo_env, base.grader.pristine,
                        test_timeout_s=60.0, max_servers=1)
    yield task_id, grader
    grader.close()


def test_a_hostile_test_reaches_neither_the_next_run_nor_the_grading(
        sample_tasks: SampleTasks, pool: envs.EnvPool,
        one_server: tuple[str, WarmGrader]) -> None:
    task_id, grader = one_server
    env = pool.fork(task_id)
    env.grader = grader
    fixed = pool.fork(task_id)
    fixed.grader = grader
    try:
        env.step(ToolCall("write", {"path": "tests/test_hostile.py", "content": _HOSTILE}))
        ids = ["tests/test_hostile.py::test_plants", *env.task.FAIL_TO_PASS[:2]]  # type: ignore[union-attr]
        first = env.step(_run(ids))
        second = env.step(_run(ids))  # the same server: a daemon or a file left would show
        assert _obs(first) == _obs(second) and "test_plants" not in first.content, first.content
        assert not (env.sandbox.workspace / "planted").exists()  # it wrote into the copy
        warm_grade, _ = env.submit()
        _golden(fixed, sample_tasks)
        solved, _ = fixed.submit()
        env.grader = fixed.grader = None
        cold_grade, _ = env.submit()
        assert (warm_grade.resolved, warm_grade.grade) == (cold_grade.resolved,
                                                           cold_grade.grade) == (False, 0.0)
        assert solved.resolved, solved.log[-1500:]
        assert (grader.warm_tests, grader.warm_runs, grader.cold_tests,
                grader.cold_fallbacks) == (2, 2, 0, 0)
    finally:
        env.close()
        fixed.close()


def test_a_run_past_its_time_is_reported_so_and_the_next_run_is_served(
        sample_tasks: SampleTasks, pool: envs.EnvPool,
        one_server: tuple[str, WarmGrader]) -> None:
    task_id, _ = one_server
    base = pool.base(task_id)
    assert base.grader is not None and base.repo_env is not None
    grader = WarmGrader(base.grader.task, base.repo_env, base.grader.pristine,
                        test_timeout_s=2.0, max_servers=1)
    env = pool.fork(task_id)
    env.grader = grader
    try:
        env.step(ToolCall("write", {"path": "tests/test_sleeps.py", "content": _SLEEPER}))
        slept = env.step(_run(["tests/test_sleeps.py::test_sleeps"]))
        assert _obs(slept) == ("the test run cannot be trusted: the run timed out", True)
        warm, cold = _both(env, env.task.FAIL_TO_PASS[:3])  # type: ignore[union-attr]
        assert _obs(warm) == _obs(cold)
        assert grader.cold_tests == 0
    finally:
        env.close()
        grader.close()
