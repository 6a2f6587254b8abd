"""The shipped fake model server, as a library and as a command."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from swemill_testkit.fake_server import (
    FakeError,
    FakeOpenAIServer,
    step_from_dict,
    text_reply,
    tool_reply,
)


def _post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read()), dict(resp.headers)
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read()), dict(err.headers)


def test_scripted_steps_errors_and_recording() -> None:
    script = [FakeError(429, "slow", retry_after=2), tool_reply("bash", {"command": "ls"},
                                                              cost=0.5)]
    with FakeOpenAIServer(script) as srv:
        url = srv.base_url + "/chat/completions"
        status, body, headers = _post(url, {"model": "m", "messages": []})
        assert (status, body["error"]["message"], headers["Retry-After"]) == (429, "slow", "2")
        status, body, _ = _post(url, {"model": "m", "messages": [{"role": "user"}]})
        assert status == 200 and body["usage"]["cost"] == 0.5
        call = body["choices"][0]["message"]["tool_calls"][0]["function"]
        assert (call["name"], json.loads(call["arguments"])) == ("bash", {"command": "ls"})
        status, body, _ = _post(url, {"model": "m"})
        assert status == 400 and "script exhausted" in body["error"]["message"]
        assert _post(srv.base_url + "/nothing", {})[0] == 404
    assert [r.body.get("messages") for r in srv.requests] == [[], [{"role": "user"}], None]


def test_prices_make_the_server_report_costs() -> None:
    with FakeOpenAIServer([text_reply("hi", prompt_tokens=1000, completion_tokens=10)],
                          price_in=2.0, price_out=10.0) as srv:
        _, body, _ = _post(srv.base_url + "/chat/completions", {"model": "m"})
    assert body["usage"]["cost"] == pytest.approx((1000 * 2 + 10 * 10) / 1e6)


def test_step_from_dict() -> None:
    assert step_from_dict({"error": 503, "retry_after": 1}) == FakeError(503, retry_after=1)
    step = step_from_dict({"tool_calls": [{"name": "edit", "arguments": "{bad"}],
                           "usage": {"prompt_tokens": 5, "completion_tokens": 2}, "cost": 0.1})
    assert step.tool_calls[0].arguments == "{bad" and step.cost == 0.1  # type: ignore[union-attr]


def test_command_line_server(tmp_path: Path) -> None:
    script = tmp_path / "steps.json"
    script.write_text(json.dumps([{"text": "hello"}]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "swemill_testkit.fake_server", "--script", str(script),
         "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("fake model server at http://127.0.0.1:")
        base = line.split(" at ")[1].strip()
        status, body, _ = _post(base + "/chat/completions", {"model": "m", "messages": []})
        assert status == 200 and body["choices"][0]["message"]["content"] == "hello"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
