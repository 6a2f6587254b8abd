"""bedrock: policy on a real boto3 client with botocore's Stubber, which checks every request
and response against the Bedrock Runtime service model."""

from __future__ import annotations

from typing import Any

import pytest

boto3 = pytest.importorskip("boto3")
from botocore.stub import Stubber  # noqa: E402

from swemill.core.errors import PolicyError, TransientPolicyError  # noqa: E402
from swemill.core.records import Message, TextBlock, ToolResultBlock  # noqa: E402
from swemill.core.tools import tool_schemas  # noqa: E402
from swemill.policies.policy import policy_from_spec  # noqa: E402
from swemill.policies.retry import RetryPolicy  # noqa: E402

MODEL = "us.anthropic.claude-sonnet-4-20250514-v1:0"
FAST = RetryPolicy(max_attempts=3, base_s=0.01, max_s=0.05)
TOOLS = tool_schemas(("read", "submit"))


def _client() -> Any:
    return boto3.client("bedrock-runtime", region_name="us-east-1",
                        aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret")


def _response(content: list[dict[str, Any]], stop: str = "tool_use") -> dict[str, Any]:
    return {"output": {"message": {"role": "assistant", "content": content}},
            "stopReason": stop, "metrics": {"latencyMs": 12},
            "usage": {"inputTokens": 1000, "outputTokens": 40, "totalTokens": 1040}}


def _start() -> list[Message]:
    return [Message(role="system", content=[TextBlock(text="You fix bugs.")]),
            Message(role="user", content=[TextBlock(text="Fix it.")])]


def test_converse_round_trip_checks_the_request_shape() -> None:
    client = _client()
    policy = policy_from_spec(f"bedrock:{MODEL}", client=client, retry=FAST, max_tokens=512)
    tool_config = {"tools": [
        {"toolSpec": {"name": t["function"]["name"], "description": t["function"]["description"],
                      "inputSchema": {"json": t["function"]["parameters"]}}} for t in TOOLS]}
    use = {"toolUse": {"toolUseId": "tu1", "name": "read", "input": {"path": "a.py"}}}
    with Stubber(client) as stub:
        stub.add_response("converse", _response([{"text": "Reading."}, use]), {
            "modelId": MODEL,
            "messages": [{"role": "user", "content": [{"text": "Fix it."}]}],
            "system": [{"text": "You fix bugs."}],
            "inferenceConfig": {"maxTokens": 512},
            "toolConfig": tool_config,
        })
        first = policy.act(_start(), TOOLS)
        stub.add_client_error("converse", "ThrottlingException", "slow down",
                              http_status_code=429)
        stub.add_response("converse", _response([{"text": "Done."}], "end_turn"), {
            "modelId": MODEL,
            "messages": [
                {"role": "user", "content": [{"text": "Fix it."}]},
                {"role": "assistant", "content": [{"text": "Reading."}, use]},
                {"role": "user", "content": [{"toolResult": {
                    "toolUseId": "tu1", "content": [{"text": "x = 1"}], "status": "success"}}]},
            ],
            "system": [{"text": "You fix bugs."}],
            "inferenceConfig": {"maxTokens": 512},
            "toolConfig": tool_config,
        })
        history = _start() + [first.message, Message(role="tool", content=[
            ToolResultBlock(call_id="tu1", content="x = 1")])]
        second = policy.act(history, TOOLS)
        stub.assert_no_pending_responses()
    assert [(c.name, c.args, c.id) for c in first.message.tool_calls] == [
        ("read", {"path": "a.py"}, "tu1")]
    assert first.usage.input_tokens == 1000 and first.cost_source == "price"
    assert first.usage.cost_usd == pytest.approx((1000 * 3 + 40 * 15) / 1e6)
    assert second.message.text == "Done." and second.stop_reason == "end_turn"
    assert policy.family == "anthropic" and "ResponseMetadata" not in (second.raw or {})


def test_validation_errors_are_not_retried() -> None:
    client = _client()
    policy = policy_from_spec(f"bedrock:{MODEL}", client=client, retry=FAST)
    with Stubber(client) as stub:
        stub.add_client_error("converse", "ValidationException", "bad input",
                              http_status_code=400)
        with pytest.raises(PolicyError, match="ValidationException: bad input") as info:
            policy.act(_start(), TOOLS)
    assert not isinstance(info.value, TransientPolicyError)


def test_throttling_is_retried_then_given_up() -> None:
    client = _client()
    policy = policy_from_spec(f"bedrock:{MODEL}", client=client, retry=FAST)
    with Stubber(client) as stub:
        for _ in range(3):
            stub.add_client_error("converse", "ServiceUnavailableException", "busy",
                                  http_status_code=503)
        with pytest.raises(TransientPolicyError, match="gave up after 3 attempts"):
            policy.act(_start(), TOOLS)
        stub.assert_no_pending_responses()


def test_unknown_model_has_no_price_but_still_runs() -> None:
    client = _client()
    policy = policy_from_spec("bedrock:custom.my-model-v1", client=client, retry=FAST)
    with Stubber(client) as stub:
        stub.add_response("converse", _response([{"text": "hi"}], "end_turn"))
        reply = policy.act(_start(), [])
    assert (reply.usage.cost_usd, reply.cost_source) == (0.0, "unknown")
    with pytest.raises(PolicyError, match="--price"):
        policy.worst_case_cost(_start(), [])
