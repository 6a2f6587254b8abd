"""``openai:MODEL[@BASE_URL]`` and ``openrouter:MODEL``: any OpenAI-compatible chat server.

Works with OpenAI, OpenRouter, vLLM, Ollama, LM Studio and LiteLLM proxies. Tool calling is
native by default; ``tool_mode="text"`` renders tools into the prompt instead, and
``tool_mode="auto"`` (the default) switches to text once when the server answers 400 because
the model cannot take tools. The SDK's own retries are off: :mod:`swemill.policies.retry`
decides what is transient.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Any, Literal
from urllib.parse import urlparse

from swemill.core.errors import MissingDependency, PolicyError
from swemill.core.records import Message, TextBlock, ToolUseBlock
from swemill.policies.openai_format import (
    from_openai_message,
    to_openai_messages,
    to_openai_tools,
    usage_from_openai,
)
from swemill.policies.policy import BasePolicy, PolicyReply, one_line
from swemill.policies.prices import Price, lookup_price
from swemill.policies.retry import RetryPolicy, Transient, call_with_retries, parse_retry_after
from swemill.policies.textproto import parse_tool_blocks, to_text_messages

__all__ = ["OpenAIPolicy", "from_spec", "from_openrouter_spec", "OPENAI_URL", "OPENROUTER_URL"]

OPENAI_URL = "https://api.openai.com/v1"
OPENROUTER_URL = "https://openrouter.ai/api/v1"
ToolMode = Literal["native", "text", "auto"]


def is_local_url(url: str) -> bool:
    """Loopback, private-network and ``localhost`` servers need no API key."""
    host = (urlparse(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".local"):
        return True
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    return addr.is_loopback or addr.is_private


def resolve_api_key(base_url: str, explicit: str | None = None) -> str:
    if explicit:
        return explicit
    hosted = "openrouter.ai" in base_url
    env_name = "OPENROUTER_API_KEY" if hosted else "OPENAI_API_KEY"
    key = os.environ.get(env_name, "").strip()
    if key:
        return key
    if is_local_url(base_url):
        return "none"
    raise PolicyError(f"no API key for {base_url}: set {env_name} (or pass api_key)")


class OpenAIPolicy(BasePolicy):
    """Chat completions over HTTP with the ``openai`` SDK."""

    def __init__(self, spec: str, model: str, base_url: str = OPENAI_URL, *,
                 api_key: str | None = None, max_tokens: int = 4096,
                 price: Price | str | None = None, tool_mode: ToolMode = "auto",
                 temperature: float | None = None, timeout_s: float = 120.0,
                 retry: RetryPolicy | None = None, family: str | None = None) -> None:
        if price is None and not is_local_url(base_url):
            price = lookup_price(model)
        super().__init__(spec, model, max_tokens=max_tokens, price=price, family=family)
        try:
            import openai
        except ImportError as exc:
            raise MissingDependency(
                f"policy {spec!r} needs the OpenAI SDK: pip install 'swemill[openai]'"
            ) from exc
        self.base_url = base_url.rstrip("/")
        self.tool_mode: ToolMode = tool_mode
        self.temperature = temperature
        self.retry = retry or RetryPolicy()
        self._openai = openai
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=resolve_api_key(self.base_url, api_key),
            max_retries=0,
            timeout=timeout_s,
        )

    def _request(self, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        text_mode = self.tool_mode == "text" and bool(tools)
        wire = to_openai_messages(to_text_messages(messages, tools) if text_mode else messages)
        req: dict[str, Any] = {"model": self.model, "messages": wire}
        # OpenAI's own API wants max_completion_tokens (reasoning models reject max_tokens).
        key = "max_completion_tokens" if self.base_url == OPENAI_URL else "max_tokens"
        req[key] = self.max_tokens
        if tools and not text_mode:
            req["tools"] = to_openai_tools(tools)
        if self.temperature is not None:
            req["temperature"] = self.temperature
        if "openrouter.ai" in self.base_url:
            req["extra_body"] = {"usage": {"include": True}}
        return req

    def _call(self, req: dict[str, Any]) -> dict[str, Any]:
        oa = self._openai
        try:
            resp = self._client.chat.completions.create(**req)
        except oa.APITimeoutError as exc:
            raise Transient(f"{self.base_url} timed out") from exc
        except oa.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            raise Transient(f"cannot reach {self.base_url}: {one_line(cause)}") from exc
        except oa.APIStatusError as exc:
            status = exc.status_code
            detail = _error_detail(exc)
            if status == 429 or status == 408 or status >= 500:
                hint = parse_retry_after(exc.response.headers.get("retry-after"))
                raise Transient(f"HTTP {status} from {self.base_url}: {detail}", hint) from exc
            raise PolicyError(
                f"{self.base_url} rejected the request for {self.model!r}: "
                f"HTTP {status}: {detail}"
            ) from exc
        except oa.OpenAIError as exc:
            raise PolicyError(f"bad response from {self.base_url}: {one_line(exc)}") from exc
        raw: dict[str, Any] = resp.model_dump(mode="json")
        return raw

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyReply:
        try:
            raw = self._send(messages, tools)
        except PolicyError as exc:
            if not (self.tool_mode == "auto" and tools and _tools_unsupported(str(exc))):
                raise
            self.tool_mode = "text"  # this model cannot take native tools; remember that
            raw = self._send(messages, tools)
        return self._reply(raw, id_prefix=f"call_{len(messages)}")

    def _send(self, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        req = self._request(messages, tools)
        return call_with_retries(lambda: self._call(req), self.retry, what=f"policy {self.spec}")

    def _reply(self, raw: dict[str, Any], id_prefix: str) -> PolicyReply:
        choices = raw.get("choices") or []
        if not choices:
            raise PolicyError(f"{self.base_url} returned no choices for {self.model!r}")
        choice = choices[0]
        message, errors = from_openai_message(choice.get("message") or {}, id_prefix)
        if self.tool_mode == "text":
            message, errors = _parse_text_calls(message, errors, id_prefix)
        usage, reported = usage_from_openai(raw.get("usage"))
        return self._priced(message, usage, raw=raw, errors=errors, reported=reported,
                            stop_reason=choice.get("finish_reason"))


def _parse_text_calls(
    message: Message, errors: list[str], id_prefix: str
) -> tuple[Message, list[str]]:
    prose, calls, text_errors = parse_tool_blocks(message.text, id_prefix)
    others = [b for b in message.content if not isinstance(b, TextBlock)]
    blocks: list[Any] = others + ([TextBlock(text=prose)] if prose else [])
    blocks += [ToolUseBlock(call=c) for c in calls]
    return message.model_copy(update={"content": blocks}), errors + text_errors


def _error_detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        msg = err.get("message") if isinstance(err, dict) else err
        if msg:
            return one_line(msg)
    return one_line(getattr(exc, "message", exc))


# How servers say "this model cannot take tools" (Ollama, vLLM without a tool parser, ...).
_NO_TOOLS_HINTS = ("support", "not available", "enable-auto-tool-choice", "tool-call-parser")


def _tools_unsupported(message: str) -> bool:
    low = message.lower()
    return "http 400" in low and "tool" in low and any(h in low for h in _NO_TOOLS_HINTS)


def _ctx_for(cls_kwargs: dict[str, Any]) -> dict[str, Any]:
    allowed = {"api_key", "max_tokens", "price", "tool_mode", "temperature", "timeout_s",
               "retry", "family"}
    return {k: v for k, v in cls_kwargs.items() if k in allowed and v is not None}


def from_spec(spec: str, rest: str, **ctx: Any) -> OpenAIPolicy:
    model, sep, url = rest.rpartition("@")
    if not sep or not url.startswith(("http://", "https://")):
        model, url = rest, OPENAI_URL
    if not model:
        raise PolicyError(f"policy spec {spec!r} names no model: use openai:MODEL[@BASE_URL]")
    return OpenAIPolicy(spec, model, url, **_ctx_for(ctx))


def from_openrouter_spec(spec: str, rest: str, **ctx: Any) -> OpenAIPolicy:
    if not rest:
        raise PolicyError(f"policy spec {spec!r} names no model: use openrouter:VENDOR/MODEL")
    return OpenAIPolicy(spec, rest, OPENROUTER_URL, **_ctx_for(ctx))
