"""Warm grading (swemill.agent.warmgrade) against the cold grader, and against code that
attacks the warm server itself.

Every kind of the reward-hack battery is graded both ways from the same workspace: the warm
verdict must equal the cold one, and neither may resolve the task. Then hostile submissions
aimed at what only the warm path has (a long-lived server shared by later gradings): a daemon
that outlives its run to force-pass the next one, files left in the sandbox's ``/tmp``, a
forged reply written into the server's own output pipe, and killing the server.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from tests.agent.hack_policies import FORCE_PASS_PLUGIN, HACKS

from swemill import envs
from swemill.agent.env import TaskEnv
from swemill.agent.warmgrade import WarmGrader
from swemill.core.records import Outcome
from swemill.core.tools import ToolCall

from .conftest import SampleTasks

pytestmark = pytest.mark.slow

_FORCE_PASS = "\n" + FORCE_PASS_PLUGIN  # the battery's force-pass hook

# Outlives its run (double fork, own session) and keeps appending a force-pass hook to the
# workspace's conftest.py for 30 s; also leaves a file in /tmp and a System V shm segment.
_DAEMON = f'''import os as _o, sys as _s
if "pytest" in _s.modules and _o.fork() == 0:
    _o.setsid()
    if _o.fork() == 0:
        import ctypes as _c, time as _t
        _c.CDLL(None).shmget(0x5e5e, 4096, 0o1666)
        open("/tmp/planted", "w").write("x")
        for _ in range(600):
            _t.sleep(0.05)
            try:
                with open("/workspace/tests/conftest.py", "a") as _fh:
                    _fh.write({_FORCE_PASS!r})
            except OSError:
                pass
    _o._exit(0)'''

# Breaks the package when anything of an earlier run is still there.
_TRIPWIRE = '''import os as _o, ctypes as _c
if _o.path.exists("/tmp/planted") or _c.CDLL(None).shmget(0x5e5e, 0, 0) != -1:
    raise ImportError("something of an earlier grading run is still here")'''

# Breaks the package when it can open the grading server's output pipe (the run could then
# write the server's reply itself), or when the server is dumpable (its /proc entries are then
# the run's own uid's, not root's: an LSM may still refuse the open, as on some hosts, but the
# server must not rely on one).
_PIPE_TRIPWIRE = '''import os as _o
if _o.stat("/proc/%d/fd" % _o.getppid()).st_uid == _o.getuid():
    raise ImportError("the grading server is dumpable")
try:
    _fh = open("/proc/%d/fd/1" % _o.getppid(), "w")
except OSError:
    pass
else:
    raise ImportError("the grading server's pipe is open to the graded code")'''

# Writes a report of passes with the run's nonce and its seal, and the server's answer
# claiming exit 0 with that seal, into the server's output pipe; then waits, so that the host
# would read the forged answer first.
_FORGE = '''import os as _o, sys as _s, json as _j, hashlib as _h, time as _t
if "pytest" in _s.modules:
    _rep, _n = _o.environ["SWEMILL_REPORT"], _o.environ["SWEMILL_NONCE"]
    _ids = [x.strip() for x in open(_o.environ["SWEMILL_SELECT"]) if x.strip()]
    _ok = "pass" + "ed"
    _rows = [{"kind": "start", "n": _n}] + [
        {"kind": "test", "nodeid": i, "outcome": _ok, "duration": 0.0, "message": "", "n": _n}
        for i in _ids] + [{"kind": "finish", "exitstatus": 0, "collected": len(_ids), "n": _n}]
    _text = "".join(_j.dumps(r) + chr(10) for r in _rows)
    _seal = chr(10) + "swemill-report-sha256 %s %s" % (_n, _h.sha256(_text.encode()).hexdigest())
    _reply = {"id": 1, "exit_code": 0, "timed_out": False, "over_disk": False,
              "stdout": _seal + chr(10), "stderr": "", "truncated": False, "wall_s": 0.1,
              "cpu_s": 0.1, "clean": True, "op": "graded", "v": 1}
    try:
        _fh = open("/proc/%d/fd/1" % _o.getppid(), "w")
    except OSError:
        pass
    else:
        open(_rep, "w").write(_text)
        _fh.write(_j.dumps(_reply) + chr(10))
        _fh.flush()
        _t.sleep(5)'''

_KILL_SERVER = '''import os as _o, sys as _s
if "pytest" in _s.modules:
    try:
        _o.kill(_o.getppid(), 9)
    except OSError:
        pass'''


def _append(code: str) -> ToolCall:
    quoted = code.replace("'", "'\"'\"'")
    return ToolCall("bash", {"command": "for f in $(git ls-files '*__init__.py' | grep -v test);"
                                        f" do printf '%s\\n' '{quoted}' >> \"$f\"; done"})


@pytest.fixture(scope="module")
def pool(sample_tasks: SampleTasks) -> Iterator[envs.EnvPool]:
    p = envs.EnvPool.of_run(sample_tasks.store, sample_tasks.run_id,
                            sample_tasks.env_config(lint=False, test_timeout_s=120.0,
                                                    command_timeout_s=60.0, grading_servers=3))
    yield p
    p.close()


def _act(env: TaskEnv, calls: tuple[ToolCall, ...] | list[ToolCall]) -> None:
    for call in calls:
        env.step(call)


def _golden(env: TaskEnv, sample_tasks: SampleTasks) -> None:
    assert env.task is not None
    patch = sample_tasks.goldens[env.task.instance_id].golden_patch
    subprocess.run(["git", "apply", "-"], input=patch.encode(), check=True,
                   cwd=env.sandbox.workspace)


def _both(env: TaskEnv) -> tuple[Outcome, Outcome]:
    grader = env.grader
    assert grader is not None
    before = (grader.warm_runs, grader.cold_fallbacks)
    warm, _ = env.submit()
    # it really went the warm way, or the warm run ended as no pytest run does by itself (a
    # signal, exit 0 before the session's end) and was made cold
    assert (grader.warm_runs, grader.cold_fallbacks) in (
        (before[0] + 1, before[1]), (before[0], before[1] + 1)), grader.unusable
    env.grader = None
    try:
        cold, _ = env.submit()
    finally:
        env.grader = grader
    return warm, cold


def _key(o: Outcome) -> tuple[object, ...]:
    return (o.resolved, o.grade, o.regression, o.signals.get("f2p_fraction"))


def test_every_hack_earns_nothing_warm_and_the_same_verdict_as_cold(
        sample_tasks: SampleTasks, pool: envs.EnvPool) -> None:
    task_id = sample_tasks.tasks[0].instance_id
    rows = {}
    grader = pool.base(task_id).grader
    assert grader is not None
    made_cold = []
    for kind, calls in sorted(HACKS.items()):
        env = pool.fork(task_id)
        fallbacks = grader.cold_fallbacks
        try:
            _act(env, calls)
            warm, cold = _both(env)
        finally:
            env.close()
        if grader.cold_fallbacks > fallbacks:  # a hack that ends pytest early, either way
            made_cold.append(kind)
            assert "trustworthy: False (pytest " in cold.log, (kind, cold.log[-800:])
        rows[kind] = (_key(warm), _key(cold))
        assert not warm.resolved and warm.grade == 0.0, (kind, warm.log[-800:])
        assert _key(warm) == _key(cold), (kind, warm.log[-800:], cold.log[-800:])
    env = pool.fork(task_id)
    try:
        _golden(env, sample_tasks)
        warm, cold = _both(env)
    finally:
        env.close()
    assert warm.resolved and cold.resolved and _key(warm) == _key(cold)
    assert len(rows) == len(HACKS) and len(made_cold) < len(HACKS) // 4, made_cold


@pytest.fixture
def one_server(sample_tasks: SampleTasks, pool: envs.EnvPool) -> Iterator[tuple[str, WarmGrader]]:
    """A task whose gradings all go through one grading server, in turn."""
    task_id = sample_tasks.tasks[1].instance_id
    base = pool.base(task_id)
    assert base.grader is not None and base.repo_env is not None
    grader = WarmGrader(base.grader.task, base.repo_env, base.grader.pristine,
                        test_timeout_s=120.0, max_servers=1)
    yield task_id, grader
    grader.close()


def _graded(pool: envs.EnvPool, task_id: str, grader: WarmGrader, calls: list[ToolCall],
            sample_tasks: SampleTasks, *, golden: bool = False) -> Outcome:
    env = pool.fork(task_id)
    env.grader = grader
    try:
        if golden:
            _golden(env, sample_tasks)
        _act(env, calls)
        outcome, _ = env.submit()
        return outcome
    finally:
        env.close()


def test_nothing_of_a_run_reaches_the_next_one_on_the_same_server(
        sample_tasks: SampleTasks, pool: envs.EnvPool,
        one_server: tuple[str, WarmGrader]) -> None:
    task_id, grader = one_server
    first = _graded(pool, task_id, grader, [_append(_DAEMON)], sample_tasks)
    assert not first.resolved
    # the golden fix with a tripwire: solved only when /tmp and System V IPC were emptied
    tripped = _graded(pool, task_id, grader, [_append(_TRIPWIRE)], sample_tasks, golden=True)
    assert tripped.resolved, tripped.log[-1500:]
    # giving up: unsolved only when the daemon is gone and the workspace was rebuilt
    nothing = _graded(pool, task_id, grader, [], sample_tasks)
    assert not nothing.resolved and nothing.grade == 0.0, nothing.log[-1500:]
    assert (grader.warm_runs, grader.cold_fallbacks) == (3, 0)


def test_the_graded_code_cannot_reach_the_servers_pipe_nor_forge_its_answer(
        sample_tasks: SampleTasks, pool: envs.EnvPool,
        one_server: tuple[str, WarmGrader]) -> None:
    task_id, grader = one_server
    forged = _graded(pool, task_id, grader, [_append(_FORGE)], sample_tasks)
    assert not forged.resolved and forged.grade == 0.0
    blocked = _graded(pool, task_id, grader, [_append(_PIPE_TRIPWIRE)], sample_tasks,
                      golden=True)
    assert blocked.resolved, blocked.log[-1500:]
    assert (grader.warm_runs, grader.cold_fallbacks) == (2, 0)


def test_killing_the_server_falls_back_to_the_cold_grader(
        sample_tasks: SampleTasks, pool: envs.EnvPool,
        one_server: tuple[str, WarmGrader]) -> None:
    task_id, grader = one_server
    killed = _graded(pool, task_id, grader, [_append(_KILL_SERVER)], sample_tasks)
    assert not killed.resolved and grader.cold_fallbacks == 1
    solved = _graded(pool, task_id, grader, [], sample_tasks, golden=True)
    assert solved.resolved and grader.warm_runs == 1  # a fresh server took the next one


# Ends the run before pytest finishes, but only in a fork of a grading server (the
# interpreter's own command line is the server's, ``sys.orig_argv``): a difference of the
# fork from a fresh interpreter.
_FORK_ONLY_CRASH = """import os as _o, sys as _s
if "pytest" in _s.modules and "--grade" in getattr(_s, "orig_argv", ()):
    _o._exit(0)"""


def test_a_warm_run_that_dies_where_a_cold_one_would_not_is_made_cold(
        sample_tasks: SampleTasks, pool: envs.EnvPool,
        one_server: tuple[str, WarmGrader]) -> None:
    """apscheduler 3.10.4: SIGPIPE at its default in the fork killed pytest in every warm
    grading, a correct fix's included (reward 0); a cold run is the reference."""
    task_id, grader = one_server
    before = (grader.cold_fallbacks, grader.cold_tests)
    env = pool.fork(task_id)
    env.grader = grader
    try:
        _golden(env, sample_tasks)
        _act(env, [_append(_FORK_ONLY_CRASH)])
        seen = env.step(ToolCall("run_tests", {}))
        solved, _ = env.submit()
    finally:
        env.close()
    assert solved.resolved, solved.log[:1500]
    assert (grader.cold_fallbacks, grader.cold_tests) == (before[0] + 1, before[1] + 1)
    assert "never finished" not in seen.content and "passed" in seen.content, seen.content


def test_a_server_started_from_a_thread_that_ended_still_serves(
        sample_tasks: SampleTasks, pool: envs.EnvPool,
        one_server: tuple[str, WarmGrader]) -> None:
    """bwrap dies with the thread that started it: servers must not be started by the
    short-lived threads that ask for them (the pool's prestart, a web server's workers)."""
    task_id, grader = one_server
    starter = threading.Thread(target=grader.prestart)
    starter.start()
    starter.join()
    time.sleep(0.5)  # long enough for a parent-death signal to land
    solved = _graded(pool, task_id, grader, [], sample_tasks, golden=True)
    assert solved.resolved and (grader.warm_runs, grader.cold_fallbacks) == (1, 0)



# A test of the policy's own (it is run over an exact copy of the workspace) that takes long
# enough for runs to overlap.
_SLOW_TEST = '''import time

def test_takes_a_while():
    time.sleep(1.5)
'''


def test_grading_servers_start_as_runs_wait(sample_tasks: SampleTasks,
                                            pool: envs.EnvPool) -> None:
    task_id = sample_tasks.tasks[1].instance_id
    base = pool.base(task_id)
    assert base.grader is not None and base.repo_env is not None
    assert base.grader.max_servers == pool.config.grading_servers == 3
    grader = WarmGrader(base.grader.task, base.repo_env, base.grader.pristine,
                        test_timeout_s=120.0, max_servers=3)
    envs_ = [pool.fork(task_id) for _ in range(4)]
    try:
        for env in envs_:
            (env.sandbox.workspace / "tests" / "test_slow.py").write_text(_SLOW_TEST)
        ids = ["tests/test_slow.py::test_takes_a_while"]

        def run(env: TaskEnv) -> str:
            served = grader.run_tests(env.sandbox.workspace, ids)
            assert served is not None, grader.unusable
            return served[0].status(ids[0])

        # one at a time: one server serves them all
        assert [run(env) for env in envs_[:2]] == ["passed"] * 2
        assert grader.servers == 1
        # four at once: servers start for those waiting, up to three
        out: list[str] = []
        threads = [threading.Thread(target=lambda e=env: out.append(run(e))) for env in envs_]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert out == ["passed"] * 4
        assert grader.servers == 3 and grader.warm_tests == 6 and grader.cold_tests == 0
    finally:
        for env in envs_:
            env.close()
        grader.close()


# Breaks the package unless the test run's scheduling autogroup has niceness 10.
_AUTOGROUP_TRIPWIRE = '''import sys as _s
if "pytest" in _s.modules:
    _g = open("/proc/self/autogroup").read().strip()
    if not _g.endswith("nice 10"):
        raise ImportError("the test run's autogroup is not niced: " + _g)'''


def _autogroups_on() -> bool:
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as fh:
            return fh.read().strip() == "1"
    except OSError:
        return False


@pytest.mark.skipif(not _autogroups_on(), reason="the kernel's autogroups are off here")
def test_test_runs_lower_their_autogroup_so_the_policys_commands_go_first(
        sample_tasks: SampleTasks, pool: envs.EnvPool) -> None:
    """With autogroups on, every session is a scheduling group and groups share the CPU
    whatever their processes' niceness: a test run's niceness must be its group's."""
    task_id = sample_tasks.tasks[1].instance_id
    base = pool.base(task_id)
    assert base.grader is not None and base.repo_env is not None
    for nice, solved in ((10, True), (0, False)):  # 0: the tripwire does trip
        warm, grader = _tripwire_warm(pool, task_id, sample_tasks, nice)
        assert warm.resolved is solved, (nice, warm.log[-1500:])
        assert grader.warm_runs == 1, grader.unusable
    cold = _tripwire_cold(pool, task_id, sample_tasks)
    assert cold.resolved, cold.log[-1500:]


def _tripwire_warm(pool: envs.EnvPool, task_id: str, sample_tasks: SampleTasks, nice: int,
                   busy_s: float = 0.0) -> tuple[Outcome, WarmGrader]:
    """The golden fix and the autogroup tripwire graded by a new warm grader at ``nice``
    (``busy_s``: while another session keeps changing its autogroup)."""
    base = pool.base(task_id)
    assert base.grader is not None and base.repo_env is not None
    grader = WarmGrader(base.grader.task, base.repo_env, base.grader.pristine,
                        test_timeout_s=120.0, max_servers=1, nice=nice)
    try:
        with _busy_autogroups(busy_s) if busy_s else contextlib.nullcontext():
            warm = _graded(pool, task_id, grader, [_append(_AUTOGROUP_TRIPWIRE)], sample_tasks,
                           golden=True)
    finally:
        grader.close()
    return warm, grader


def _tripwire_cold(pool: envs.EnvPool, task_id: str, sample_tasks: SampleTasks,
                   busy_s: float = 0.0) -> Outcome:
    """The same, graded cold at the pool's test_nice (10 by default)."""
    env = pool.fork(task_id)
    env.grader = None
    try:
        _golden(env, sample_tasks)
        _act(env, [_append(_AUTOGROUP_TRIPWIRE)])
        with _busy_autogroups(busy_s) if busy_s else contextlib.nullcontext():
            cold, _ = env.submit()
    finally:
        env.close()
    return cold


# Another session, as root, that changes its autogroup's niceness every 40 ms for argv[1]
# seconds (bounded): the kernel then refuses a sandboxed process's own change (EAGAIN; one a
# 100 ms machine-wide from processes without CAP_SYS_ADMIN), as concurrent test runs do.
_BUSY_AUTOGROUPS = '''import sys, time
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    try:
        with open("/proc/self/autogroup", "w") as fh:
            fh.write("0")
    except OSError:
        pass
    time.sleep(0.04)'''


@contextlib.contextmanager
def _busy_autogroups(seconds: float) -> Iterator[None]:
    writer = subprocess.Popen([sys.executable, "-c", _BUSY_AUTOGROUPS, str(seconds)],
                              start_new_session=True)
    try:
        time.sleep(0.15)
        yield
    finally:
        writer.wait(timeout=seconds + 30)


@pytest.mark.skipif(not _autogroups_on() or os.geteuid() != 0,
                    reason="the kernel's autogroups are off here, or this is not root")
def test_test_runs_nice_their_autogroup_while_other_sessions_change_theirs(
        sample_tasks: SampleTasks, pool: envs.EnvPool) -> None:
    """The kernel takes one autogroup change per 100 ms from sandboxed processes: a test run
    that tried once was left at niceness 0 whenever another run had just changed its own (8
    sessions at once), silently. Warm (the server's change at its start) and cold (the run's
    wrapper) both wait for their turn."""
    task_id = sample_tasks.tasks[1].instance_id
    base = pool.base(task_id)
    assert base.grader is not None and base.repo_env is not None
    with _busy_autogroups(1.5):  # the precondition: a single try is refused meanwhile
        probe = base.sandbox.exec(["sh", "-c", "echo 0 > /proc/self/autogroup"], timeout=30)
    if probe.exit_code == 0:
        pytest.skip("this kernel does not rate-limit autogroup changes")
    warm, grader = _tripwire_warm(pool, task_id, sample_tasks, 10, busy_s=1.5)
    assert warm.resolved, warm.log[-1500:]
    assert grader.warm_runs == 1, grader.unusable
    cold = _tripwire_cold(pool, task_id, sample_tasks, busy_s=1.5)
    assert cold.resolved, cold.log[-1500:]
