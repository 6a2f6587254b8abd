"""Helpers for replay tests: ingested sessions, fake teachers on loopback, hand-made states."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from swemill.core.records import Message, TextBlock, ToolResultBlock, ToolUseBlock
from swemill.core.tools import ToolCall
from swemill.store import Store
from swemill.traces import ingest
from swemill.traces.states import TraceState
from swemill_testkit.fake_server import FakeOpenAIServer, Script
from swemill_testkit.fake_sessions import SessionWriter, text, tool_use

# Three families, named so that family_of() tells them apart; prices in $ per Mtok.
FAMILIES = {"qwen3-coder": "qwen", "llama-3.3-70b": "meta", "mistral-large": "mistral"}
PRICE_IN, PRICE_OUT = 1.0, 2.0


@pytest.fixture(autouse=True)
def _no_real_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Nothing here may reach a real provider: no keys, no AWS profile from the host."""
    for name in ("OPENAI_API_KEY", "OPENROUTER_API_KEY", "ANTHROPIC_API_KEY",
                 "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE", "SWEMILL_BEDROCK_ROLE_ARN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def write_session(path: Path, turns: int, errors: set[int] = frozenset(),  # type: ignore[assignment]
                  session: str = "sess") -> Path:
    """A Claude Code session: a prompt, then ``turns`` Bash calls; turn k's result is an
    error when k is in ``errors``; a closing text turn."""
    w = SessionWriter(session, cwd="/workspace")
    w.user("Make the failing test pass.")
    for k in range(turns):
        call = f"toolu_{k:04d}"
        w.assistant([text(f"step {k}"), tool_use(call, "Bash", {"command": f"cat f{k}.txt"})],
                    {"input_tokens": 100, "output_tokens": 20})
        w.tool_result(call, "boom" if k in errors else f"content {k}", is_error=k in errors)
    w.assistant([text("done")], {"input_tokens": 100, "output_tokens": 5})
    return w.write(path)


def ingested(tmp_path: Path, turns: int, errors: set[int] = frozenset(),  # type: ignore[assignment]
             root: str | None = None) -> tuple[Store, str]:
    session = write_session(tmp_path / "sessions" / "sess.jsonl", turns, errors)
    store = Store.open(root or str(tmp_path / "store"))
    result = ingest([session], store, run_id="r1")
    return store, result.run_id


@contextmanager
def teachers(scripts: list[Script], **kw: Any) -> Iterator[list[str]]:
    """Three fake OpenAI-compatible teachers of three families; yields their specs."""
    with ExitStack() as stack:
        specs = []
        for model, script in zip(FAMILIES, scripts, strict=True):
            srv = stack.enter_context(FakeOpenAIServer(script, price_in=PRICE_IN,
                                                       price_out=PRICE_OUT, **kw))
            specs.append(f"openai:{model}@{srv.base_url}#price={PRICE_IN}/{PRICE_OUT}")
        yield specs


def bash(cmd: str, call_id: str = "c1") -> Message:
    return Message(role="assistant",
                   content=[ToolUseBlock(call=ToolCall("bash", {"command": cmd}, id=call_id))])


def state(state_id: str = "s::0000", action: str = "ls", error: bool = False,
          model: str = "claude-sonnet-4-5") -> TraceState:
    """A hand-made state: a prompt, one earlier call and its result, then ``action``."""
    response = bash(action, "orig")
    history = [Message(role="user", content=[TextBlock(text="fix the bug")]),
               bash("pwd", "c0"),
               Message(role="user", content=[ToolResultBlock(call_id="c0", content="/w")])]
    call = response.tool_calls[0]
    return TraceState(
        state_id=state_id, session_id="s", trajectory_id="s", turn=1, prefix_len=3,
        messages=history, response=response, actions=[call],
        action_keys=[call.canonical_key()],
        results=[ToolResultBlock(call_id="orig", content="x", is_error=error)],
        has_error=error, model=model)
