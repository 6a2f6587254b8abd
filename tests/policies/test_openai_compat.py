"""The openai: policy against the shipped fake server: real HTTP on 127.0.0.1, no patching."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import pytest

from swemill.core.errors import PolicyError, TransientPolicyError
from swemill.core.records import Message, TextBlock, ToolResultBlock
from swemill.core.tools import ToolCall, tool_schemas
from swemill.policies.policy import policy_from_spec
from swemill.policies.prices import Price
from swemill.policies.retry import RetryPolicy
from swemill_testkit.fake_server import (
    FakeError,
    FakeOpenAIServer,
    FakeReply,
    FakeToolCall,
    errors_then,
    text_reply,
    tool_reply,
)

FAST = RetryPolicy(max_attempts=4, base_s=0.01, max_s=0.05)
TOOLS = tool_schemas()


def _start() -> list[Message]:
    return [
        Message(role="system", content=[TextBlock(text="You fix bugs.")]),
        Message(role="user", content=[TextBlock(text="Make the failing test pass.")]),
    ]


def _policy(srv: FakeOpenAIServer, **ctx: Any) -> Any:
    ctx.setdefault("retry", FAST)
    return policy_from_spec(f"openai:fake-coder@{srv.base_url}", **ctx)


def test_tool_call_round_trip_sends_results_back_as_tool_messages() -> None:
    script = [
        tool_reply("read", {"path": "src/app.py"}, prompt_tokens=120, completion_tokens=15,
                   cost=0.0021),
        FakeReply(text="Fixed.", tool_calls=[FakeToolCall("submit", {})]),
    ]
    with FakeOpenAIServer(script) as srv:
        policy = _policy(srv)
        first = policy.act(_start(), TOOLS)
        call = first.message.tool_calls[0]
        assert (call.name, call.args) == ("read", {"path": "src/app.py"})
        assert call.id  # the server's id is kept, to pair the result with the call
        assert first.usage.input_tokens == 120 and first.usage.output_tokens == 15
        assert first.usage.cost_usd == pytest.approx(0.0021)
        assert first.cost_source == "provider"
        assert first.stop_reason == "tool_calls" and first.format_errors == []

        history = _start() + [
            first.message,
            Message(role="tool", content=[ToolResultBlock(call_id=call.id, content="x = 1\n")]),
        ]
        second = policy.act(history, TOOLS)
        assert second.message.text == "Fixed."
        assert [c.name for c in second.message.tool_calls] == ["submit"]

    body = srv.requests[1].body
    assert body["model"] == "fake-coder" and body["max_tokens"] == 4096
    assert [t["function"]["name"] for t in body["tools"]] == [t["function"]["name"] for t in TOOLS]
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    sent_call = body["messages"][2]["tool_calls"][0]
    assert sent_call["id"] == call.id
    assert json.loads(sent_call["function"]["arguments"]) == {"path": "src/app.py"}
    assert body["messages"][3] == {"role": "tool", "tool_call_id": call.id, "content": "x = 1\n"}


def test_malformed_arguments_become_a_format_error_not_a_crash() -> None:
    script = [FakeReply(tool_calls=[FakeToolCall("edit", '{"path": "a.py", "old_str": '),
                                    FakeToolCall("read", '{"path": "b.py"}')])]
    with FakeOpenAIServer(script) as srv:
        reply = _policy(srv).act(_start(), TOOLS)
    assert [c.name for c in reply.message.tool_calls] == ["read"]  # the good call survives
    assert len(reply.format_errors) == 1
    assert "'edit'" in reply.format_errors[0] and "not valid JSON" in reply.format_errors[0]


def test_arguments_that_are_json_but_not_an_object_are_a_format_error() -> None:
    with FakeOpenAIServer([FakeReply(tool_calls=[FakeToolCall("bash", '["ls"]')])]) as srv:
        reply = _policy(srv).act(_start(), TOOLS)
    assert reply.message.tool_calls == []
    assert "must be a JSON object" in reply.format_errors[0]


def test_server_errors_then_success_is_retried() -> None:
    script = [*errors_then(2, status=500), FakeError(status=503), tool_reply("submit")]
    with FakeOpenAIServer(script) as srv:
        reply = _policy(srv).act(_start(), TOOLS)
    assert [c.name for c in reply.message.tool_calls] == ["submit"]
    assert len(srv.requests) == 4


def test_rate_limit_waits_for_retry_after() -> None:
    script = [FakeError(status=429, retry_after=0.3), tool_reply("submit")]
    with FakeOpenAIServer(script) as srv:
        t0 = time.monotonic()
        reply = _policy(srv, retry=RetryPolicy(base_s=0.001, max_s=5)).act(_start(), TOOLS)
        waited = time.monotonic() - t0
    assert reply.message.tool_calls[0].name == "submit"
    assert waited >= 0.3


def test_retries_are_bounded() -> None:
    with (
        FakeOpenAIServer(errors_then(10, status=502)) as srv,
        pytest.raises(TransientPolicyError, match=r"HTTP 502.*gave up after 4 attempts"),
    ):
        _policy(srv).act(_start(), TOOLS)
    assert len(srv.requests) == 4


def test_client_error_is_not_retried() -> None:
    script = [FakeError(status=400, message="messages: bad role"), tool_reply("submit")]
    with (
        FakeOpenAIServer(script) as srv,
        pytest.raises(PolicyError, match="HTTP 400: messages: bad role") as info,
    ):
        _policy(srv).act(_start(), TOOLS)
    assert not isinstance(info.value, TransientPolicyError)
    assert len(srv.requests) == 1


def test_unreachable_server_is_a_clear_error() -> None:
    with socket.socket() as s:  # a port that was just free and is now closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    policy = policy_from_spec(f"openai:m@http://127.0.0.1:{port}/v1",
                              retry=RetryPolicy(max_attempts=2, base_s=0.01))
    with pytest.raises(TransientPolicyError, match=rf"cannot reach http://127.0.0.1:{port}/v1"):
        policy.act(_start(), TOOLS)


def test_missing_api_key_for_a_hosted_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    with pytest.raises(PolicyError, match="set OPENAI_API_KEY"):
        policy_from_spec("openai:gpt-4o-mini")
    with pytest.raises(PolicyError, match="set OPENROUTER_API_KEY"):
        policy_from_spec("openrouter:qwen/qwen3-coder")
    with pytest.raises(PolicyError, match="set OPENAI_API_KEY"):
        policy_from_spec("openai:m@https://llm.example.com/v1")


def test_hosted_policy_reads_its_key_and_table_price(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-test")
    policy = policy_from_spec("openrouter:anthropic/claude-sonnet-4")
    assert policy.family == "anthropic"
    assert policy.worst_case_cost(_start(), []) > 4096 * 15 / 1e6


def test_text_mode_renders_tools_into_the_prompt_and_parses_fenced_calls() -> None:
    answer = 'Let me look.\n```tool\n{"name": "read", "args": {"path": "a.py"}}\n```'
    with FakeOpenAIServer([text_reply(answer), text_reply("```tool\n{oops}\n```")]) as srv:
        policy = _policy(srv, tool_mode="text")
        reply = policy.act(_start(), TOOLS)
        assert reply.message.text == "Let me look."
        assert reply.message.tool_calls[0].args == {"path": "a.py"}
        history = _start() + [reply.message, Message(role="tool", content=[
            ToolResultBlock(call_id=reply.message.tool_calls[0].id, content="x = 1")])]
        bad = policy.act(history, TOOLS)
    assert bad.message.tool_calls == [] and "not valid JSON" in bad.format_errors[0]
    first, second = (r.body for r in srv.requests)
    assert "tools" not in first
    assert "```tool" in first["messages"][0]["content"]  # the system prompt lists the tools
    assert "run_tests" in first["messages"][0]["content"]
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "user"]
    assert "Tool result (ok):\nx = 1" in second["messages"][3]["content"]


def test_auto_mode_falls_back_to_text_when_the_model_has_no_tools() -> None:
    def script(request: dict[str, Any]) -> FakeError | FakeReply:
        if "tools" in request["body"]:
            return FakeError(status=400, message="this model does not support tools")
        return text_reply('```tool\n{"name": "submit", "args": {}}\n```')

    with FakeOpenAIServer(script) as srv:
        policy = _policy(srv)
        reply = policy.act(_start(), TOOLS)
        assert [c.canonical() for c in reply.message.tool_calls] == [ToolCall("submit", {})]
        assert policy.tool_mode == "text"
        policy.act(_start(), TOOLS)  # the second call goes straight to text mode
    assert ["tools" in r.body for r in srv.requests] == [True, False, False]


def test_cost_from_price_when_the_server_reports_none() -> None:
    script = [tool_reply("submit", prompt_tokens=1000, completion_tokens=100)]
    with FakeOpenAIServer(script) as srv:
        reply = _policy(srv, price=Price(3.0, 15.0)).act(_start(), TOOLS)
    assert reply.cost_source == "price"
    assert reply.usage.cost_usd == pytest.approx((1000 * 3 + 100 * 15) / 1e6)


def test_local_server_without_price_costs_nothing_but_cannot_be_budgeted() -> None:
    with FakeOpenAIServer([tool_reply("submit")]) as srv:
        policy = _policy(srv)
        reply = policy.act(_start(), TOOLS)
        assert (reply.usage.cost_usd, reply.cost_source) == (0.0, "unknown")
        with pytest.raises(PolicyError, match="--price"):
            policy.worst_case_cost(_start(), TOOLS)


def test_a_reply_slower_than_the_timeout_is_retried() -> None:
    script = [FakeReply(text="late", delay_s=1.0), text_reply("on time")]
    with FakeOpenAIServer(script) as srv:
        reply = _policy(srv, timeout_s=0.3).act(_start(), TOOLS)
    assert reply.message.text == "on time" and len(srv.requests) == 2


def test_vllm_without_a_tool_parser_falls_back_to_text() -> None:
    def script(request: dict[str, Any]) -> FakeError | FakeReply:
        if "tools" in request["body"]:
            return FakeError(400, '"auto" tool choice requires --enable-auto-tool-choice '
                                  "and --tool-call-parser to be set")
        return text_reply("No tools needed.")

    with FakeOpenAIServer(script) as srv:
        policy = _policy(srv, price="0,0")
        assert policy.act(_start(), TOOLS).message.text == "No tools needed."
        assert policy.worst_case_cost(_start(), TOOLS) == 0.0  # declared free


def test_a_multi_line_server_message_becomes_one_line() -> None:
    script = [FakeError(422, "bad request:\n  field messages\n  is wrong")]
    with FakeOpenAIServer(script) as srv, pytest.raises(PolicyError) as info:
        _policy(srv).act(_start(), TOOLS)
    assert str(info.value).endswith("HTTP 422: bad request: field messages is wrong")
