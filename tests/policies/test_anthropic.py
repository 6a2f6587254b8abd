"""anthropic: policy, with the real SDK pointed at the fake server's /v1/messages on loopback."""

from __future__ import annotations

import pytest

from swemill.core.errors import PolicyError, TransientPolicyError
from swemill.core.records import Message, TextBlock, ThinkingBlock, ToolResultBlock
from swemill.core.tools import tool_schemas
from swemill.policies.anthropic import to_anthropic
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
)

# Importing the Anthropic SDK alone takes several seconds on a loaded machine.
pytestmark = pytest.mark.slow

FAST = RetryPolicy(max_attempts=3, base_s=0.01, max_s=0.05)
TOOLS = tool_schemas()


def _start() -> list[Message]:
    return [Message(role="system", content=[TextBlock(text="You fix bugs.")]),
            Message(role="user", content=[TextBlock(text="Fix it.")])]


def test_round_trip_with_tool_use_and_tool_result() -> None:
    script = [
        *errors_then(1, status=529, message="overloaded"),
        FakeReply(text="Reading.", tool_calls=[FakeToolCall("read", {"path": "a.py"})],
                  prompt_tokens=2000, completion_tokens=50),
        text_reply("Done."),
    ]
    with FakeOpenAIServer(script) as srv:
        policy = policy_from_spec("anthropic:claude-sonnet-4-5", base_url=srv.root_url,
                                  retry=FAST, price=Price(3.0, 15.0))
        first = policy.act(_start(), TOOLS)
        (call,) = first.message.tool_calls
        assert (call.name, call.args, first.message.text) == ("read", {"path": "a.py"}, "Reading.")
        assert first.usage.cost_usd == pytest.approx((2000 * 3 + 50 * 15) / 1e6)
        assert first.stop_reason == "tool_use" and policy.family == "anthropic"
        history = _start() + [first.message, Message(role="tool", content=[
            ToolResultBlock(call_id=call.id, content="boom", is_error=True)])]
        assert policy.act(history, TOOLS).message.text == "Done."
    body = srv.requests[-1].body
    assert srv.requests[-1].path == "/v1/messages"
    assert body["system"] == "You fix bugs." and body["max_tokens"] == 4096
    assert body["tools"][0].keys() == {"name", "description", "input_schema"}
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": call.id, "content": "boom", "is_error": True}]


def test_client_error_is_not_retried_and_server_errors_are_bounded() -> None:
    with FakeOpenAIServer([FakeError(400, "max_tokens: too large")]) as srv:
        policy = policy_from_spec("anthropic:claude-x", base_url=srv.root_url, retry=FAST)
        with pytest.raises(PolicyError, match="HTTP 400") as info:
            policy.act(_start(), TOOLS)
        assert not isinstance(info.value, TransientPolicyError)
    with FakeOpenAIServer(errors_then(5, status=500)) as srv:
        policy = policy_from_spec("anthropic:claude-x", base_url=srv.root_url, retry=FAST)
        with pytest.raises(TransientPolicyError, match="gave up after 3 attempts"):
            policy.act(_start(), TOOLS)
        assert len(srv.requests) == 3


def test_missing_key_for_the_hosted_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(PolicyError, match="set ANTHROPIC_API_KEY"):
        policy_from_spec("anthropic:claude-sonnet-4-5")


def test_conversion_merges_turns_and_puts_results_first() -> None:
    messages = [
        Message(role="user", content=[TextBlock(text="a")]),
        Message(role="assistant", content=[ThinkingBlock(text="hmm"), TextBlock(text=" ")]),
        Message(role="assistant", content=[TextBlock(text="b")]),
        Message(role="user", content=[TextBlock(text="note")]),
        Message(role="tool", content=[ToolResultBlock(call_id="c1", content="")]),
    ]
    system, turns = to_anthropic(messages)
    assert system == ""
    assert turns == [
        {"role": "user", "content": [{"type": "text", "text": "a"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "b"}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "(no output)",
             "is_error": False},
            {"type": "text", "text": "note"}]},
    ]
