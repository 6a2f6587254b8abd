"""``anthropic:MODEL``: the Anthropic Messages API through the ``anthropic`` SDK.

Tool results travel as ``tool_result`` blocks at the head of a user turn; consecutive turns of
one role are merged, since the API wants user and assistant to alternate. Thinking blocks are
not sent back (the API needs their signatures, which the canonical IR does not keep).
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
from swemill.policies.openai_compat import is_local_url
from swemill.policies.policy import BasePolicy, PolicyReply, one_line, tool_use_block, usage_from
from swemill.policies.prices import Price, lookup_price
from swemill.policies.retry import RetryPolicy, Transient, call_with_retries, parse_retry_after
from swemill.policies.textproto import tool_specs

__all__ = ["AnthropicPolicy", "from_spec", "to_anthropic", "merge_same_role"]

ANTHROPIC_URL = "https://api.anthropic.com"


def merge_same_role(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Join consecutive turns of one role; result blocks stay in front of a user turn."""
    out: list[dict[str, Any]] = []
    for turn in turns:
        if not turn["content"]:
            continue
        if out and out[-1]["role"] == turn["role"]:
            out[-1]["content"] = out[-1]["content"] + turn["content"]
        else:
            out.append({"role": turn["role"], "content": list(turn["content"])})
    for turn in out:
        results = [b for b in turn["content"] if _is_result(b)]
        turn["content"] = results + [b for b in turn["content"] if not _is_result(b)]
    return out


def _is_result(block: dict[str, Any]) -> bool:
    return block.get("type") == "tool_result" or "toolResult" in block


def _block(b: Any) -> dict[str, Any] | None:
    if isinstance(b, TextBlock):
        return {"type": "text", "text": b.text} if b.text.strip() else None
    if isinstance(b, ToolUseBlock):
        return {"type": "tool_use", "id": b.call.id, "name": b.call.name, "input": b.call.args}
    if isinstance(b, ToolResultBlock):
        return {"type": "tool_result", "tool_use_id": b.call_id,
                "content": b.content or "(no output)", "is_error": b.is_error}
    return None  # thinking: see the module docstring


def to_anthropic(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """(system prompt, Messages-API turns)."""
    system = "\n\n".join(m.text for m in messages if m.role == "system" and m.text)
    turns = []
    for m in messages:
        if m.role == "system":
            continue
        role = "assistant" if m.role == "assistant" else "user"
        blocks = [x for x in (_block(b) for b in m.content) if x is not None]
        turns.append({"role": role, "content": blocks})
    return system, merge_same_role(turns)


def from_anthropic(raw: dict[str, Any]) -> tuple[Message, list[str]]:
    blocks: list[Any] = []
    errors: list[str] = []
    for b in raw.get("content") or []:
        kind = b.get("type")
        if kind == "text" and b.get("text"):
            blocks.append(TextBlock(text=b["text"]))
        elif kind == "thinking" and b.get("thinking"):
            blocks.append(ThinkingBlock(text=b["thinking"]))
        elif kind == "tool_use":
            block, error = tool_use_block(b.get("name"), b.get("input"), b.get("id"))
            blocks += [block] if block else []
            errors += [error] if error else []
    return Message(role="assistant", content=blocks), errors


def usage_from_anthropic(raw: dict[str, Any] | None) -> Usage:
    return usage_from(raw, "input_tokens", "output_tokens", "cache_read_input_tokens",
                      "cache_creation_input_tokens")


class AnthropicPolicy(BasePolicy):
    def __init__(self, spec: str, model: str, *, base_url: str | None = None,
                 api_key: str | None = None, max_tokens: int = 4096,
                 price: Price | str | None = None, temperature: float | None = None,
                 timeout_s: float = 120.0, retry: RetryPolicy | None = None) -> None:
        local = base_url is not None and is_local_url(base_url)
        if price is None and not local:
            price = lookup_price(model)
        super().__init__(spec, model, max_tokens=max_tokens, price=price, family="anthropic")
        try:
            import anthropic
        except ImportError as exc:
            raise MissingDependency(
                f"policy {spec!r} needs the Anthropic SDK: pip install 'swemill[anthropic]'"
            ) from exc
        key = api_key or os.environ.get("ANTHROPIC_API_KEY", "").strip() or (
            "none" if local else "")
        if not key:
            raise PolicyError(f"no API key for {spec!r}: set ANTHROPIC_API_KEY")
        self.base_url = base_url or ANTHROPIC_URL
        self.temperature = temperature
        self.retry = retry or RetryPolicy()
        self._sdk = anthropic
        self._client = anthropic.Anthropic(api_key=key, base_url=self.base_url, max_retries=0,
                                           timeout=timeout_s)

    def _request(self, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        system, turns = to_anthropic(messages)
        req: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens,
                               "messages": turns}
        if system:
            req["system"] = system
        if tools:
            req["tools"] = [{"name": n, "description": d, "input_schema": s}
                            for n, d, s in tool_specs(tools)]
        if self.temperature is not None:
            req["temperature"] = self.temperature
        return req

    def _call(self, req: dict[str, Any]) -> dict[str, Any]:
        sdk = self._sdk
        try:
            resp = self._client.messages.create(**req)
        except sdk.APITimeoutError as exc:
            raise Transient(f"{self.base_url} timed out") from exc
        except sdk.APIConnectionError as exc:
            cause = one_line(exc.__cause__ or exc)
            raise Transient(f"cannot reach {self.base_url}: {cause}") from exc
        except sdk.APIStatusError as exc:
            status, detail = exc.status_code, one_line(exc.message)
            if status in (408, 429) or status >= 500:
                hint = parse_retry_after(exc.response.headers.get("retry-after"))
                raise Transient(f"HTTP {status} from {self.base_url}: {detail}", hint) from exc
            raise PolicyError(f"{self.base_url} rejected the request for {self.model!r}: "
                              f"HTTP {status}: {detail}") from exc
        except sdk.AnthropicError as exc:
            raise PolicyError(f"bad response from {self.base_url}: {one_line(exc)}") from exc
        raw: dict[str, Any] = resp.model_dump(mode="json")
        return raw

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyReply:
        req = self._request(messages, tools)
        raw = call_with_retries(lambda: self._call(req), self.retry, what=f"policy {self.spec}")
        message, errors = from_anthropic(raw)
        return self._priced(message, usage_from_anthropic(raw.get("usage")), raw=raw,
                            errors=errors, stop_reason=raw.get("stop_reason"))


def from_spec(spec: str, rest: str, **ctx: Any) -> AnthropicPolicy:
    if not rest:
        raise PolicyError(f"policy spec {spec!r} names no model: use anthropic:MODEL")
    allowed = {"base_url", "api_key", "max_tokens", "price", "temperature", "timeout_s", "retry"}
    return AnthropicPolicy(spec, rest, **{k: v for k, v in ctx.items()
                                          if k in allowed and v is not None})
