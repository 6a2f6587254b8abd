"""swemill.envs: sessions are forks of a task's prepared workspace; the reward is the grader's,
given once, on submit or at the step limit."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from swemill import envs
from swemill.core.errors import SessionError
from swemill.policies.policy import policy_from_spec
from swemill.sandbox.cgroups import leftover_groups

from .conftest import SampleTasks, play

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pool(sample_tasks: SampleTasks) -> Iterator[envs.EnvPool]:
    p = envs.EnvPool.of_run(sample_tasks.store, sample_tasks.run_id,
                            sample_tasks.env_config(lint=False, test_timeout_s=120.0))
    yield p
    p.close()


def test_oracle_episode_is_rewarded_and_a_give_up_is_not(sample_tasks: SampleTasks,
                                                         pool: envs.EnvPool) -> None:
    task = sample_tasks.tasks[0]
    oracle = policy_from_spec("oracle", golden=sample_tasks.goldens[task.instance_id])
    with envs.open(task.instance_id, sample_tasks.store, pool=pool) as sess:
        opening = sess.reset().model_dump()
        assert opening["messages"][0]["role"] == "system"
        assert task.problem_statement.strip() in opening["content"]
        assert [t["function"]["name"] for t in opening["tools"]][-1] == "submit"
        last, results = play(oracle, opening, lambda c: sess.step(c).model_dump())
        assert last["reward"] == 1.0 and last["info"]["resolved"] is True
        assert last["info"]["f2p_fraction"] == 1.0 and last["info"]["stop"] == "submitted"
        assert all(r["reward"] == 0.0 and not r["done"] for r in results[:-1])
        with pytest.raises(SessionError, match="episode is over"):
            sess.step({"name": "bash", "arguments": {"command": "true"}})
        # reset: a fresh fork of the prepared workspace, the oracle's edits gone
        sess.reset()
        res = sess.step({"name": "submit", "arguments": {}})
        assert (res.reward, res.done, res.info.resolved, res.info.f2p_fraction) == \
            (0.0, True, False, 0.0)


def test_sessions_of_one_task_share_its_base_but_never_their_writes(
        sample_tasks: SampleTasks, pool: envs.EnvPool) -> None:
    task_id = sample_tasks.tasks[1].instance_id
    a = envs.open(task_id, sample_tasks.store, pool=pool)
    b = envs.open(task_id, sample_tasks.store, pool=pool)
    try:
        a.reset()
        b.reset()
        assert pool.base(task_id) is pool.base(task_id)
        a.step({"name": "write", "arguments": {"path": "only_in_a.txt", "content": "a"}})
        seen = b.step({"name": "bash", "arguments": {"command": "ls only_in_a.txt"}})
        assert seen.observation.is_error and "No such file" in seen.observation.content
        bad = a.step({"name": "read", "arguments": {"path": "/etc/passwd"}})
        assert bad.observation.is_error and not bad.done
        unknown = a.step({"name": "rm_rf", "arguments": {}})
        assert unknown.observation.is_error and "unknown tool" in unknown.observation.content
    finally:
        a.close()
        b.close()


def test_the_step_limit_ends_and_grades_the_episode(sample_tasks: SampleTasks,
                                                    pool: envs.EnvPool) -> None:
    task_id = sample_tasks.tasks[0].instance_id
    with envs.open(task_id, sample_tasks.store, pool=pool, max_steps=2) as sess:
        sess.reset()
        first = sess.step({"name": "bash", "arguments": {"command": "true"}})
        assert (first.done, first.info.graded) == (False, False)
        second = sess.step({"name": "bash", "arguments": {"command": "true"}})
        assert second.done and second.info.graded and second.info.stop == "step_limit"
        assert second.reward == 0.0 and second.info.resolved is False
        assert sess.state().reward == 0.0


_WHO_RAN_ME = "grep -c swemill-run''ner /proc/$PPID/cmdline; echo $PPID"  # not itself
_SLEEPERS = ("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done 2>/dev/null "
             "| grep -c '^sleep 297.5'")


def _spare_ready(pool: envs.EnvPool, task_id: str) -> bool:
    deadline = time.monotonic() + 60
    while pool.spare_count(task_id) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    return pool.spare_count(task_id) == 1


def _episode(store: object, task_id: str, pool: envs.EnvPool, runner: bool) -> str:
    """Who forks a session's commands, whether background processes outlive them, and what
    the policy's ``run_tests`` says; returns its first line. With runners, the session is
    the task's spare one, whose runner has started: its first command is forked there too."""
    if runner:  # a reset makes the task's spare (alone, no earlier test of the module has)
        with envs.open(task_id, store, pool=pool) as first:  # type: ignore[arg-type]
            first.reset()
        assert _spare_ready(pool, task_id)
    with envs.open(task_id, store, pool=pool) as sess:  # type: ignore[arg-type]
        sess.reset()

        def bash(command: str) -> list[str]:
            obs = sess.step({"name": "bash", "arguments": {"command": command}})
            return obs.observation.content.split()

        seen = [bash(_WHO_RAN_ME)[:2] for _ in range(3)]
        if runner:
            assert seen[0][0] == "1" and seen.count(seen[0]) == 3, seen
        else:
            assert all(n == "0" for n, _ in seen), seen
        assert "started" in bash("(sleep 297.5 &); nohup sleep 297.5 >/dev/null 2>&1 & "
                                 "echo started")
        assert bash(_SLEEPERS)[0] == "0"
        tests = sess.step({"name": "run_tests", "arguments": {}}).observation
        assert not tests.is_error or "failed" in tests.content, tests.content
        return tests.content.splitlines()[0]


def test_a_sessions_commands_run_in_one_sandbox_and_leave_nothing_running(
        sample_tasks: SampleTasks, pool: envs.EnvPool) -> None:
    """With ``session_runner`` (the default) every command of a session is forked by one
    runner in one long-lived sandbox; without, each has a sandbox of its own. Either way a
    background process ends with the command that started it, and ``run_tests`` (served warm
    in both pools) reports the same."""
    task_id = sample_tasks.tasks[0].instance_id
    warm = _episode(sample_tasks.store, task_id, pool, runner=True)
    apart = envs.EnvPool.of_run(sample_tasks.store, sample_tasks.run_id,
                                sample_tasks.env_config(lint=False, session_runner=False))
    try:
        assert _episode(sample_tasks.store, task_id, apart, runner=False) == warm
    finally:
        apart.close()
    assert "tests:" in warm


def test_spare_sessions_are_ready_handed_out_once_and_closed_with_the_pool(
        sample_tasks: SampleTasks) -> None:
    """After a task's first reset the pool keeps one spare fork of it, its runner started;
    each reset takes a spare (never the same one twice) and another is made; closing the pool
    closes the spares and leaves no cgroup behind."""
    task_id = sample_tasks.tasks[1].instance_id
    before = set(leftover_groups())  # other pools' (the module's) groups, left as they are
    pool = envs.EnvPool.of_run(sample_tasks.store, sample_tasks.run_id,
                               sample_tasks.env_config(lint=False), spares=1)
    try:
        assert pool.spare_count() == 0  # none before a task is used
        first = envs.open(task_id, sample_tasks.store, pool=pool)
        first.reset()
        assert _spare_ready(pool, task_id) and pool.spare_count() == 1
        second = envs.open(task_id, sample_tasks.store, pool=pool)
        second.reset()
        assert second.step({"name": "bash", "arguments": {"command": _WHO_RAN_ME}}
                           ).observation.content.split()[0] == "1"  # the spare's runner
        assert _spare_ready(pool, task_id)
        second.step({"name": "write", "arguments": {"path": "mine.txt", "content": "2"}})
        third = envs.open(task_id, sample_tasks.store, pool=pool)
        third.reset()
        seen = third.step({"name": "bash", "arguments": {"command": "ls mine.txt"}})
        assert seen.observation.is_error and "No such file" in seen.observation.content
        for sess in (first, second, third):
            sess.close()
    finally:
        pool.close()
    assert pool.spare_count() == 0
    deadline = time.monotonic() + 10  # a grading server still starting closes when it has
    while not set(leftover_groups()) <= before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert set(leftover_groups()) <= before
    with pytest.raises(SessionError, match="negative"):
        envs.EnvPool.of_run(sample_tasks.store, sample_tasks.run_id, spares=-1)


def test_open_by_task_record_and_unknown_task(sample_tasks: SampleTasks) -> None:
    task = sample_tasks.tasks[0]
    with envs.open(task, sample_tasks.store) as sess:
        assert sess.state().task_id == task.instance_id
    with pytest.raises(SessionError, match="unknown task"):
        envs.open("nope", sample_tasks.store, run_id=sample_tasks.run_id)
    with pytest.raises(SessionError, match="give run_id"):
        envs.open(task.instance_id, sample_tasks.store)


def test_public_api_is_pinned() -> None:
    assert sorted(envs.__all__) == sorted([
        "open", "open_session", "Session", "EnvPool", "Observation", "StepResult", "StepInfo",
        "SessionState", "TaskCard", "ToolCallIn", "as_call"])
