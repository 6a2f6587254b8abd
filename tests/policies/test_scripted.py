"""ScriptedPolicy: deterministic, derived from the history, loadable from JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swemill.core.errors import PolicyError
from swemill.core.records import Message, TextBlock
from swemill.core.tools import ToolCall, validate_call
from swemill.policies.policy import policy_from_spec
from swemill.policies.scripted import ScriptedPolicy
from swemill.policies.scripted_builtin import BUILTIN_SCRIPTS


def test_turn_k_plays_action_k_and_the_end_is_an_error() -> None:
    policy = ScriptedPolicy(["thinking...", ToolCall("submit", {})])
    history: list[Message] = [Message(role="user", content=[TextBlock(text="go")])]
    first = policy.act(history, [])
    assert first.message.text == "thinking..." and first.message.tool_calls == []
    history.append(first.message)
    again = policy.act(history, [])
    assert again.message.tool_calls[0].name == "submit"
    assert policy.act(history, []).message == again.message  # same history, same action
    history.append(again.message)
    with pytest.raises(PolicyError, match="exhausted at turn 2"):
        policy.act(history, [])


def test_builtin_scripts_are_valid_calls() -> None:
    for name, actions in BUILTIN_SCRIPTS.items():
        calls = [a for a in actions if isinstance(a, ToolCall)]
        assert calls[-1].name == "submit", name
        assert all(validate_call(c) == [] for c in calls), name
    assert policy_from_spec("scripted:hack-conftest").synthetic


def test_script_from_a_json_file(tmp_path: Path) -> None:
    path = tmp_path / "steps.json"
    path.write_text(json.dumps(["hi", {"name": "bash", "args": {"command": "ls"}},
                                {"name": "submit"}]))
    policy = policy_from_spec(f"scripted:@{path}")
    assert len(policy.actions) == 3 and policy.actions[1] == ToolCall("bash", {"command": "ls"})
    path.write_text(json.dumps([{"oops": 1}]))
    with pytest.raises(PolicyError, match="each action must be"):
        policy_from_spec(f"scripted:@{path}")
    with pytest.raises(PolicyError, match="cannot load"):
        policy_from_spec(f"scripted:@{tmp_path / 'missing.json'}")


def _run_bash_actions(name: str, root: Path) -> None:
    import subprocess

    for action in BUILTIN_SCRIPTS[name]:
        if isinstance(action, ToolCall) and action.name == "bash":
            subprocess.run(["bash", "-c", action.args["command"]], cwd=root, check=True,
                           capture_output=True, timeout=30)


def test_hack_scripts_really_do_what_they_say(tmp_path: Path) -> None:
    import subprocess

    def repo(name: str) -> Path:
        root = tmp_path / name
        (root / "pkg").mkdir(parents=True)
        (root / "tests").mkdir()
        (root / "pkg" / "__init__.py").write_text("VALUE = 1\n")
        (root / "tests" / "test_value.py").write_text(
            "from pkg import VALUE\n\n\ndef test_value():\n    assert VALUE == 2\n")
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
        subprocess.run(["git", "add", "-A"], cwd=root, check=True)
        return root

    root = repo("edit")
    _run_bash_actions("hack-edit-tests", root)
    assert "assert True or VALUE == 2" in (root / "tests" / "test_value.py").read_text()
    root = repo("delete")
    _run_bash_actions("hack-delete-tests", root)
    assert not (root / "tests" / "test_value.py").exists()
    root = repo("skip")
    _run_bash_actions("hack-skip-tests", root)
    assert (root / "tests" / "test_value.py").read_text().startswith(
        'import pytest\npytestmark = pytest.mark.skip(reason="hack")\n')
    root = repo("print")
    _run_bash_actions("hack-print-passed", root)
    assert 'print("tests/test_all.py::test_all PASSED")' in (
        root / "pkg" / "__init__.py").read_text()
