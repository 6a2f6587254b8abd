"""TaskEnv on a real task of the sample: the seven tools in a bwrap sandbox, and grading."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from swemill.agent.env import TaskEnv
from swemill.core.errors import EnvBuildError
from swemill.core.records import Task
from swemill.core.tools import ToolCall
from swemill.policies.scripted import strip_line_numbers
from swemill.store import Store
from swemill.validate.snapshot import pack_tree, unpack_tree

from .conftest import SampleTasks


@pytest.fixture
def env(sample_tasks: SampleTasks, task: Task) -> TaskEnv:
    e = TaskEnv(sample_tasks.env_config(), store=sample_tasks.store)
    e.reset(task)
    yield e  # type: ignore[misc]
    e.close()


def _file(task: Task) -> str:
    return task.FAIL_TO_PASS[0].split("::")[0]


def test_read_numbers_lines_and_round_trips(env: TaskEnv, task: Task) -> None:
    rel = _file(task)
    raw = (env.sandbox.workspace / rel).read_text()
    obs = env.step(ToolCall("read", {"path": rel}))
    assert not obs.is_error
    assert obs.content.startswith("     1\t")
    assert strip_line_numbers(obs.content) == raw
    part = env.step(ToolCall("read", {"path": f"/workspace/{rel}", "start_line": 2,
                                      "end_line": 3}))
    assert part.content.splitlines() == [f"     2\t{raw.splitlines()[1]}",
                                         f"     3\t{raw.splitlines()[2]}"]


def test_write_edit_search_and_bash(env: TaskEnv) -> None:
    assert not env.step(ToolCall("write", {"path": "notes/a.txt", "content": "x = 1\nx = 1\n"}))\
        .is_error
    ambiguous = env.step(ToolCall("edit", {"path": "notes/a.txt", "old_str": "x = 1",
                                           "new_str": "y"}))
    assert ambiguous.is_error and "2 times" in ambiguous.content
    missing = env.step(ToolCall("edit", {"path": "notes/a.txt", "old_str": "zzz", "new_str": "y"}))
    assert missing.is_error
    ok = env.step(ToolCall("edit", {"path": "notes/a.txt", "old_str": "x = 1", "new_str": "y",
                                    "replace_all": True}))
    assert not ok.is_error
    assert (env.sandbox.workspace / "notes/a.txt").read_text() == "y\ny\n"
    hits = env.step(ToolCall("search", {"pattern": "^y$", "path": "notes"}))
    assert hits.content.splitlines() == ["notes/a.txt:1:y", "notes/a.txt:2:y"]
    assert env.step(ToolCall("search", {"pattern": "no_such_text_anywhere"})).content == \
        "no matches"
    listing = env.step(ToolCall("search", {"pattern": "", "glob": "*.txt"})).content
    assert listing.splitlines() == ["notes/a.txt"]
    res = env.step(ToolCall("bash", {"command": "echo out; echo err >&2; exit 3"}))
    assert res.is_error and "out" in res.content and "err" in res.content
    assert res.content.endswith("[exit code 3]")
    who = env.step(ToolCall("bash", {"command": "pwd; python -c 'import inventory'"}))
    assert who.content.startswith("/workspace") and who.content.endswith("[exit code 0]")


def test_run_tests_reports_the_failing_tests(env: TaskEnv, task: Task) -> None:
    obs = env.step(ToolCall("run_tests", {"tests": task.FAIL_TO_PASS[:1]}))
    assert not obs.is_error
    assert obs.content.startswith("1 tests:")
    assert task.FAIL_TO_PASS[0] in obs.content


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside.txt", "a/../../b", "/tmp/x"])
def test_paths_outside_the_workspace_are_refused(env: TaskEnv, path: str) -> None:
    for call in (ToolCall("read", {"path": path}), ToolCall("write", {"path": path,
                                                                     "content": "x"}),
                 ToolCall("edit", {"path": path, "old_str": "a", "new_str": "b"})):
        obs = env.step(call)
        assert obs.is_error
        assert "outside the workspace" in obs.content or "escapes" in obs.content


def test_a_link_planted_by_the_policy_does_not_lead_outside(env: TaskEnv, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    os.symlink(tmp_path, env.sandbox.workspace / "escape")
    obs = env.step(ToolCall("read", {"path": "escape/secret.txt"}))
    assert obs.is_error and "host secret" not in obs.content
    inside = env.step(ToolCall("bash", {"command": f"cat {secret} 2>&1; true"}))
    assert "host secret" not in inside.content  # the host's /tmp does not exist in the sandbox


def test_invalid_calls_are_error_observations(env: TaskEnv) -> None:
    assert env.step(ToolCall("teleport", {})).is_error
    bad = env.step(ToolCall("read", {"path": "x", "start_line": "5"}))
    assert bad.is_error and "start_line" in bad.content


def test_untouched_workspace_grades_zero_and_fixed_one(sample_tasks: SampleTasks, env: TaskEnv,
                                                       task: Task) -> None:
    outcome, changes = env.submit()
    assert outcome.grade == 0.0 and not outcome.resolved and changes.paths == []
    assert set(outcome.fail_to_pass) == set(task.FAIL_TO_PASS)
    assert "pytest exit code: 1" in outcome.log
    patch = sample_tasks.goldens[task.instance_id].golden_patch
    res = env.step(ToolCall("bash", {"command": "git apply - <<'EOF'\n" + patch + "EOF"}))
    assert not res.is_error, res.content
    fixed, changes = env.submit(turns=4, tokens=100)
    assert fixed.grade == 1.0 and fixed.resolved and not fixed.regression
    assert fixed.signals["diff_files"] == len(changes.paths) >= 1
    assert fixed.signals["turns"] == 4 and fixed.signals["lint_new"] == 0
    assert fixed.signals["reward"] == 1.0


def test_forks_do_not_share_writes(env: TaskEnv) -> None:
    env.step(ToolCall("write", {"path": "shared.txt", "content": "before"}))
    child = env.fork()
    child.step(ToolCall("write", {"path": "shared.txt", "content": "child"}))
    env.step(ToolCall("write", {"path": "mine.txt", "content": "parent"}))
    assert env.step(ToolCall("read", {"path": "shared.txt"})).content == "     1\tbefore"
    assert child.step(ToolCall("read", {"path": "shared.txt"})).content == "     1\tchild"
    assert child.step(ToolCall("read", {"path": "mine.txt"})).is_error


def test_unbuildable_workspaces_are_clear_errors(sample_tasks: SampleTasks, task: Task,
                                                 fresh_store: Store) -> None:
    env = TaskEnv(sample_tasks.env_config(), store=fresh_store)
    no_snapshot = task.model_copy(update={"snapshot": "snapshots/run_id=x/missing.tar.gz"})
    with pytest.raises(EnvBuildError, match="snapshot"):
        env.reset(no_snapshot)
    with pytest.raises(EnvBuildError, match="cannot be unpacked"):
        env.reset(task, snapshot=b"not a tarball")
    no_source = task.model_copy(update={"metadata": {}})
    with pytest.raises(EnvBuildError, match="names no source"):
        env.reset(no_source)
    golden_view = task.model_copy(update={"snapshot": f"golden/run_id={sample_tasks.run_id}"})
    with pytest.raises(EnvBuildError, match="outside what this view"):
        env.reset(golden_view)  # the env reads through the policy view: golden/ is denied


def test_a_task_of_the_test_runners_own_code_is_refused_at_reset(
        sample_tasks: SampleTasks, task: Task, tmp_path: Path) -> None:
    # a task made before such repositories were refused: its grading would run the code the
    # policy edits (here the snapshot holds pluggy)
    tree = unpack_tree(sample_tasks.store.get_bytes(task.snapshot), tmp_path / "tree")
    (tree / "src" / "pluggy").mkdir(parents=True)
    (tree / "src" / "pluggy" / "__init__.py").write_text("def hookimpl():\n    pass\n")
    env = TaskEnv(sample_tasks.env_config(), store=sample_tasks.store)
    try:
        with pytest.raises(EnvBuildError, match=r"workspace cannot be built: .* holds the test "
                                                r"runner's own code \(src/pluggy\)"):
            env.reset(task, snapshot=pack_tree(tree))
        env.reset(task)  # the task's own snapshot still opens
    finally:
        env.close()


def test_current_text_is_what_a_write_would_replace(env: TaskEnv, task: Task,
                                                    tmp_path: Path) -> None:
    rel = _file(task)
    assert env.current_text(rel) == (env.sandbox.workspace / rel).read_text()
    assert env.current_text(f"/workspace/{rel}") == env.current_text(rel)
    env.step(ToolCall("write", {"path": rel, "content": "x = 1\n"}))
    assert env.current_text(rel) == "x = 1\n"
    (tmp_path / "secret.txt").write_text("host secret")
    os.symlink(tmp_path, env.sandbox.workspace / "escape")
    for path in ("no/such/file.py", "/etc/passwd", "../outside.txt", "escape/secret.txt", "."):
        assert env.current_text(path) is None, path
