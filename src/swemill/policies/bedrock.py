"""``bedrock:MODEL_ID``: Amazon Bedrock's Converse API through boto3 (one API for every model).

Credentials and region come from the usual AWS chain (``AWS_REGION`` / ``AWS_DEFAULT_REGION``,
default ``us-east-1``); a ready client can be passed as ``client=`` (tests pass one wrapped in
botocore's Stubber, which checks each request against the service model). botocore's own
retries are off so :mod:`swemill.policies.retry` alone decides what is transient.
"""

from __future__ import annotations

import os
from typing import Any

from swemill.core.errors import MissingDependency, PolicyError
from swemill.core.records import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from swemill.policies.anthropic import merge_same_role
from swemill.policies.policy import BasePolicy, PolicyReply, one_line, tool_use_block, usage_from
from swemill.policies.prices import Price, lookup_price
from swemill.policies.retry import RetryPolicy, Transient, call_with_retries
from swemill.policies.textproto import tool_specs

__all__ = ["BedrockPolicy", "from_spec", "to_converse", "from_converse"]

_TRANSIENT_CODES = {
    "ThrottlingException", "ServiceUnavailableException", "InternalServerException",
    "ModelNotReadyException", "ModelTimeoutException", "TooManyRequestsException",
}


def _block(b: Any) -> dict[str, Any] | None:
    if isinstance(b, TextBlock):
        return {"text": b.text} if b.text.strip() else None
    if isinstance(b, ToolUseBlock):
        return {"toolUse": {"toolUseId": b.call.id, "name": b.call.name, "input": b.call.args}}
    if isinstance(b, ToolResultBlock):
        return {"toolResult": {"toolUseId": b.call_id,
                               "content": [{"text": b.content or "(no output)"}],
                               "status": "error" if b.is_error else "success"}}
    return None  # thinking blocks need provider signatures; not replayed


def to_converse(messages: list[Message]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(system blocks, Converse messages)."""
    system = [{"text": m.text} for m in messages if m.role == "system" and m.text.strip()]
    turns = []
    for m in messages:
        if m.role == "system":
            continue
        role = "assistant" if m.role == "assistant" else "user"
        turns.append({"role": role, "content": [x for x in map(_block, m.content) if x]})
    return system, merge_same_role(turns)


def from_converse(raw: dict[str, Any]) -> tuple[Message, list[str]]:
    blocks: list[Any] = []
    errors: list[str] = []
    content = ((raw.get("output") or {}).get("message") or {}).get("content") or []
    for b in content:
        if b.get("text"):
            blocks.append(TextBlock(text=b["text"]))
        elif "reasoningContent" in b:
            text = ((b["reasoningContent"] or {}).get("reasoningText") or {}).get("text")
            if text:
                blocks.append(ThinkingBlock(text=text))
        elif "toolUse" in b:
            use = b["toolUse"]
            block, error = tool_use_block(use.get("name"), use.get("input"), use.get("toolUseId"))
            blocks += [block] if block else []
            errors += [error] if error else []
    return Message(role="assistant", content=blocks), errors


def usage_from_converse(raw: dict[str, Any] | None) -> Usage:
    return usage_from(raw, "inputTokens", "outputTokens", "cacheReadInputTokens",
                      "cacheWriteInputTokens")


def _make_client(region: str | None, timeout_s: float) -> Any:
    try:
        import boto3
        from botocore.config import Config
    except ImportError as exc:
        raise MissingDependency("bedrock policies need boto3: pip install 'swemill[aws]'") from exc
    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    config = Config(retries={"max_attempts": 1, "mode": "standard"}, read_timeout=timeout_s,
                    connect_timeout=min(timeout_s, 30))
    return boto3.client("bedrock-runtime", region_name=region or "us-east-1", config=config)


class BedrockPolicy(BasePolicy):
    def __init__(self, spec: str, model_id: str, *, client: Any = None, region: str | None = None,
                 max_tokens: int = 4096, price: Price | str | None = None,
                 temperature: float | None = None, timeout_s: float = 120.0,
                 retry: RetryPolicy | None = None, family: str | None = None) -> None:
        super().__init__(spec, model_id, max_tokens=max_tokens,
                         price=price or lookup_price(model_id), family=family)
        self.temperature = temperature
        self.retry = retry or RetryPolicy()
        self._client = client if client is not None else _make_client(region, timeout_s)

    def _request(self, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        system, turns = to_converse(messages)
        inference: dict[str, Any] = {"maxTokens": self.max_tokens}
        if self.temperature is not None:
            inference["temperature"] = self.temperature
        req: dict[str, Any] = {"modelId": self.model, "messages": turns,
                               "inferenceConfig": inference}
        if system:
            req["system"] = system
        if tools:
            req["toolConfig"] = {"tools": [
                {"toolSpec": {"name": n, "description": d or n, "inputSchema": {"json": s}}}
                for n, d, s in tool_specs(tools)]}
        return req

    def _call(self, req: dict[str, Any]) -> dict[str, Any]:
        from botocore import exceptions as bex

        try:
            raw: dict[str, Any] = self._client.converse(**req)
        except bex.NoCredentialsError as exc:
            raise PolicyError(f"no AWS credentials for {self.spec!r}: configure the AWS "
                              "credential chain (AWS_PROFILE, AWS_ACCESS_KEY_ID, ...)") from exc
        except (bex.EndpointConnectionError, bex.ConnectTimeoutError,
                bex.ReadTimeoutError, bex.ConnectionClosedError) as exc:
            raise Transient(f"cannot reach Bedrock: {one_line(exc)}") from exc
        except bex.ClientError as exc:
            err = exc.response.get("Error", {})
            code, msg = err.get("Code", "?"), one_line(err.get("Message", exc))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if code in _TRANSIENT_CODES or status == 429 or status >= 500:
                raise Transient(f"Bedrock {code}: {msg}") from exc
            raise PolicyError(f"Bedrock rejected the request for {self.model!r}: "
                              f"{code}: {msg}") from exc
        return raw

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyReply:
        req = self._request(messages, tools)
        raw = call_with_retries(lambda: self._call(req), self.retry, what=f"policy {self.spec}")
        message, errors = from_converse(raw)
        return self._priced(message, usage_from_converse(raw.get("usage")),
                            raw={k: v for k, v in raw.items() if k != "ResponseMetadata"},
                            errors=errors, stop_reason=raw.get("stopReason"))


def from_spec(spec: str, rest: str, **ctx: Any) -> BedrockPolicy:
    if not rest:
        raise PolicyError(f"policy spec {spec!r} names no model: use bedrock:MODEL_ID")
    allowed = {"client", "region", "max_tokens", "price", "temperature", "timeout_s", "retry",
               "family"}
    return BedrockPolicy(spec, rest, **{k: v for k, v in ctx.items()
                                        if k in allowed and v is not None})
