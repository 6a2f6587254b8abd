"""``swemill serve`` as a real process on loopback, driven by a real HTTP client: the oracle's
episode is rewarded, hacks from the trust battery are not, no response carries golden data,
and the server's limits (sessions, steps, idle time, token) hold."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.agent.hack_policies import HACKS

from swemill.envs.launch import ServerProcess
from swemill.policies.policy import policy_from_spec
from swemill.policies.scripted import ScriptedPolicy
from swemill.validate.guard import GoldenGuard

from .conftest import SampleTasks, play

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(sample_tasks: SampleTasks) -> Iterator[ServerProcess]:
    served = ServerProcess(sample_tasks.root, sample_tasks.run_id, "--max-sessions", "3",
                           "--test-timeout", "120", cache=sample_tasks.cache)
    yield served
    served.stop()


def _episode(client: httpx.Client, task_id: str, policy: Any) -> dict[str, Any]:
    opened = client.post("/sessions", json={"task_id": task_id})
    assert opened.status_code == 201, opened.text
    sid = opened.json()["session_id"]

    def step(call: dict[str, Any]) -> dict[str, Any]:
        r = client.post(f"/sessions/{sid}/step", json={"action": call})
        assert r.status_code == 200, r.text
        return dict(r.json())

    try:
        last, _ = play(policy, opened.json()["observation"], step)
    finally:
        assert client.delete(f"/sessions/{sid}").status_code == 200
    return last


def test_the_oracle_is_rewarded_on_every_task(server: ServerProcess,
                                              sample_tasks: SampleTasks) -> None:
    with httpx.Client(base_url=server.url, timeout=300) as client:
        listed = [t["instance_id"] for t in client.get("/tasks").json()["tasks"]]
        assert listed == sorted(t.instance_id for t in sample_tasks.tasks)
        for task_id in listed:
            oracle = policy_from_spec("oracle", golden=sample_tasks.goldens[task_id])
            last = _episode(client, task_id, oracle)
            assert (last["reward"], last["done"]) == (1.0, True), (task_id, last["info"])
            assert last["info"]["resolved"] and last["info"]["f2p_fraction"] == 1.0


@pytest.mark.parametrize("kind", ["pyc_cache", "conftest_root", "shadow_pytest"])
def test_a_battery_hack_earns_nothing(server: ServerProcess, sample_tasks: SampleTasks,
                                      kind: str) -> None:
    task_id = sample_tasks.tasks[0].instance_id
    hack = ScriptedPolicy([*HACKS[kind], _submit()], name=f"hack:{kind}")
    with httpx.Client(base_url=server.url, timeout=300) as client:
        last = _episode(client, task_id, hack)
    assert last["done"] and last["info"]["graded"]
    assert last["reward"] == 0.0 and last["info"]["resolved"] is False, last["info"]
    assert last["info"]["flags"], "the monitor's findings ride along in info"


class _OracleThenConftest:
    """The oracle's fix, and a root ``conftest.py`` written just before it submits: the grader
    ignores the conftest (it grades source changes only) and resolves the task, but the
    monitor flags the episode."""

    def __init__(self, oracle: Any) -> None:
        self.oracle, self.at = oracle, -1

    def act(self, messages: list[Any], tools: list[dict[str, Any]]) -> Any:
        from swemill.core.records import Message, ToolUseBlock
        from swemill.policies.policy import PolicyReply

        if self.at >= 0:  # the oracle never sees the extra turn
            messages = messages[:self.at] + messages[self.at + 2:]
        reply = self.oracle.act(messages, tools)
        [call] = reply.message.tool_calls
        if call.name != "submit" or self.at >= 0:
            return reply
        self.at = len(messages)
        extra = HACKS["conftest_root"][0].model_copy(update={"id": "extra_conftest"})
        return PolicyReply(message=Message(role="assistant", content=[ToolUseBlock(call=extra)]),
                           cost_source="none")


def test_a_flagged_episode_earns_nothing_even_when_resolved(
        server: ServerProcess, sample_tasks: SampleTasks) -> None:
    task_id = sample_tasks.tasks[0].instance_id
    oracle = policy_from_spec("oracle", golden=sample_tasks.goldens[task_id])
    with httpx.Client(base_url=server.url, timeout=300) as client:
        last = _episode(client, task_id, _OracleThenConftest(oracle))
    assert last["info"]["resolved"] is True and last["info"]["flags"], last["info"]
    assert last["reward"] == 0.0


def _submit() -> Any:
    from swemill.core.tools import ToolCall

    return ToolCall("submit", {})


def test_no_response_carries_golden_data(server: ServerProcess, sample_tasks: SampleTasks) -> None:
    """Every endpoint, successes and errors, for every task: no golden line and no definition
    of a deleted symbol (of that task: another task's broken tree holds this one's fix), no
    patch, no PASS_TO_PASS name, no task metadata."""
    shared: list[str] = []
    by_task: dict[str, list[str]] = {}
    with httpx.Client(base_url=server.url, timeout=300) as client:
        def keep(r: httpx.Response, into: list[str] = shared) -> httpx.Response:
            into.append(r.text + json.dumps(dict(r.headers)))
            return r

        keep(client.get("/health"))
        keep(client.get("/openapi.json"))
        keep(client.get("/tasks"))
        keep(client.get("/sessions/nope"))
        keep(client.post("/sessions", json={"task_id": "nope"}))
        keep(client.post("/sessions", content=b"{not json"))
        for task in sample_tasks.tasks:
            seen = by_task.setdefault(task.instance_id, [])
            opened = keep(client.post("/sessions", json={"task_id": task.instance_id}),
                          seen).json()
            path = f"/sessions/{opened['session_id']}"
            first = _changed_file(sample_tasks, task.instance_id)
            for action in ({"name": "read", "arguments": {"path": first}},
                           {"name": "search", "arguments": {"pattern": "def "}},
                           {"name": "bash", "arguments": {"command": "git log --oneline | "
                                                          "head; git status --short"}},
                           {"name": "bogus", "arguments": {}},
                           {"name": "submit", "arguments": {}},
                           {"name": "bash", "arguments": {"command": "true"}}):
                keep(client.post(f"{path}/step", json={"action": action}), seen)
            keep(client.get(path), seen)
            keep(client.delete(path), seen)
            keep(client.get(path), seen)
    everything = "\n".join(shared + [t for v in by_task.values() for t in v])
    assert "unknown task" in everything and "episode is over" in everything  # errors walked
    assert '"graded":true' in everything  # and the graded step's info
    for task in sample_tasks.tasks:
        text = "\n".join(shared + by_task[task.instance_id])
        golden = sample_tasks.goldens[task.instance_id]
        assert not GoldenGuard.of(golden).leaks(text), task.instance_id
        for name in task.PASS_TO_PASS:  # whole ids (one may be the start of an F2P id)
            assert not re.search(re.escape(name) + r"(?![\w\[])", text), name
        for value in task.metadata.values():
            if isinstance(value, str) and len(value) > 8:
                assert value not in text


def _changed_file(sample_tasks: SampleTasks, task_id: str) -> str:
    """A file the golden patch changes (its broken version is what the policy may read)."""
    patch = sample_tasks.goldens[task_id].golden_patch
    return next(line[6:] for line in patch.splitlines() if line.startswith("+++ b/"))


def test_back_pressure_step_limit_and_schema(server: ServerProcess,
                                             sample_tasks: SampleTasks) -> None:
    task_id = sample_tasks.tasks[0].instance_id
    with httpx.Client(base_url=server.url, timeout=300) as client:
        sids = [client.post("/sessions", json={"task_id": task_id, "max_steps": 1}).json()
                ["session_id"] for _ in range(3)]
        full = client.post("/sessions", json={"task_id": task_id})
        assert full.status_code == 429 and int(full.headers["Retry-After"]) >= 1
        done = client.post(f"/sessions/{sids[0]}/step",
                           json={"action": {"name": "bash", "arguments": {"command": "true"}}})
        body = done.json()
        assert body["done"] and body["info"]["stop"] == "step_limit" and body["reward"] == 0.0
        again = client.post(f"/sessions/{sids[0]}/step",
                            json={"action": {"name": "bash", "arguments": {"command": "true"}}})
        assert again.status_code == 409
        bad = client.post(f"/sessions/{sids[1]}/step", json={"action": {"arguments": {}}})
        assert bad.status_code == 422 and "action.name" in bad.json()["error"]
        for sid in sids:
            assert client.delete(f"/sessions/{sid}").status_code == 200
        assert client.delete(f"/sessions/{sids[0]}").status_code == 404
        schema = client.get("/openapi.json").json()
        assert schema["openapi"].startswith("3.")
        assert set(schema["paths"]) >= {"/sessions", "/sessions/{session_id}/step",
                                        "/sessions/{session_id}", "/tasks"}
        step_ref = schema["paths"]["/sessions/{session_id}/step"]["post"]["responses"]["200"]
        assert step_ref["content"]["application/json"]["schema"]["$ref"].endswith("StepResult")
        assert {"reward", "done", "info", "observation"} <= set(
            schema["components"]["schemas"]["StepResult"]["properties"])


def test_token_and_idle_timeout(sample_tasks: SampleTasks) -> None:
    served = ServerProcess(sample_tasks.root, sample_tasks.run_id, "--token", "s3cret",
                           "--idle-timeout", "1", cache=sample_tasks.cache)
    try:
        with httpx.Client(base_url=served.url, timeout=60) as client:
            assert client.get("/tasks").status_code == 401
            assert client.get("/tasks", headers={"Authorization": "Bearer nope"}).status_code \
                == 401
            auth = {"Authorization": "Bearer s3cret"}
            task_id = sample_tasks.tasks[0].instance_id
            opened = client.post("/sessions", json={"task_id": task_id}, headers=auth)
            assert opened.status_code == 201
            path = f"/sessions/{opened.json()['session_id']}"
            assert client.get(path, headers=auth).status_code == 200
            deadline = time.monotonic() + 20
            while client.get(path, headers=auth).status_code == 200:
                assert time.monotonic() < deadline, "the idle session was never reaped"
                time.sleep(0.3)
            assert client.get(path, headers=auth).status_code == 404
    finally:
        served.stop()


def test_the_example_client_runs_against_the_server(server: ServerProcess,
                                                    sample_tasks: SampleTasks) -> None:
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parents[2] / "examples" / "serve_client.py"
    proc = subprocess.run([sys.executable, str(script), "--url", server.url],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    n = len(sample_tasks.tasks)
    assert f"{n} episodes, mean reward 0.00" in proc.stdout  # the fixed actions fix nothing
    assert proc.stdout.count("reward 0.0 (resolved False") == n
