"""The Policy protocol, the reply it returns, and the spec-string registry.

A policy maps a message history plus the tool schemas to one assistant message. Backends live
in their own modules and are imported only when their spec prefix is used, so a missing SDK
fails at construction with the extra to install, not at import time of swemill.

Spec strings::

    openai:MODEL[@BASE_URL]    any OpenAI-compatible server (OpenRouter, vLLM, Ollama, ...)
    openrouter:MODEL           openai: with OpenRouter's base URL
    anthropic:MODEL            Anthropic Messages API
    bedrock:MODEL_ID           Amazon Bedrock Converse
    oracle | noisy-oracle:P    scripted: apply the golden fix (or, with probability P, a wrong one)
    scripted:NAME | scripted:@FILE.json
"""

from __future__ import annotations

import asyncio
import importlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from swemill.core.errors import PolicyError
from swemill.core.records import Message, ToolUseBlock, Usage
from swemill.core.tools import ToolCall
from swemill.policies.prices import CostSource, Price, cost_of, parse_price, require_price

__all__ = [
    "Policy",
    "PolicyReply",
    "BasePolicy",
    "REGISTRY",
    "policy_from_spec",
    "split_spec",
    "family_of",
    "estimate_tokens",
    "one_line",
    "TRUNCATED",
    "usage_from",
    "tool_use_block",
]


TRUNCATED = frozenset({"length", "max_tokens"})
"""Stop reasons that mean an answer was cut at the token limit (OpenAI, Anthropic, Bedrock)."""


def one_line(text: object, limit: int = 300) -> str:
    """A provider's message squeezed onto one line, for errors users read."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def usage_from(raw: dict[str, Any] | None, input_key: str, output_key: str,
               cache_read_key: str, cache_write_key: str) -> Usage:
    """A provider's usage object read under its own key names (absent counts are 0)."""
    raw = raw or {}
    return Usage(input_tokens=int(raw.get(input_key) or 0),
                 output_tokens=int(raw.get(output_key) or 0),
                 cache_read_tokens=int(raw.get(cache_read_key) or 0),
                 cache_write_tokens=int(raw.get(cache_write_key) or 0))


def tool_use_block(name: Any, args: Any, call_id: Any) -> tuple[ToolUseBlock | None, str | None]:
    """A provider's tool call as a block, or why it cannot be one (the input is not a JSON
    object): a format error the harness reports back to the model."""
    if isinstance(args, dict):
        return ToolUseBlock(call=ToolCall(name, args, id=call_id)), None
    return None, (f"tool call {name!r} ({call_id}): input is not a JSON object: "
                  f"{str(args)[:200]!r}")


@dataclass(slots=True)
class PolicyReply:
    """One assistant turn: the message (text and tool-use blocks), its usage and cost, the
    provider's raw response, and any format errors (bad tool-call JSON, unparsable text
    tool blocks). Format errors never raise: the harness reports them back and goes on."""

    message: Message
    usage: Usage = field(default_factory=Usage)
    raw: dict[str, Any] | None = None
    format_errors: list[str] = field(default_factory=list)
    cost_source: CostSource = "unknown"
    stop_reason: str | None = None


@runtime_checkable
class Policy(Protocol):
    name: str
    spec: str
    family: str
    synthetic: bool

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyReply: ...

    def worst_case_cost(self, messages: list[Message], tools: list[dict[str, Any]]) -> float: ...

    def worst_case_tokens(self, messages: list[Message], tools: list[dict[str, Any]]) -> int: ...


# Conservative on purpose: real tokenizers average 3-4 bytes per token on code and prose, so
# dividing by 2 over-estimates for everything but adversarial text; the budget relies on it.
BYTES_PER_TOKEN = 2.0
_PER_MESSAGE_TOKENS = 16


def estimate_tokens(messages: list[Message], tools: list[dict[str, Any]]) -> int:
    """An over-estimate of the prompt's token count, cheap enough to run before every call."""
    size = sum(len(m.model_dump_json().encode()) for m in messages)
    size += len(json.dumps(tools).encode())
    return int(size / BYTES_PER_TOKEN) + _PER_MESSAGE_TOKENS * (len(messages) + 1)


class BasePolicy:
    """Shared plumbing for model-backed policies: naming, worst-case cost, an async wrapper."""

    synthetic = False

    def __init__(self, spec: str, model: str, *, max_tokens: int = 4096,
                 price: Price | str | None = None, family: str | None = None) -> None:
        self.spec = spec
        self.model = model
        self.name = spec
        self.max_tokens = max_tokens
        self.price = parse_price(price) if isinstance(price, str) else price
        self.family = family or family_of(model)

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyReply:
        raise NotImplementedError

    def _priced(self, message: Message, usage: Usage, *, raw: dict[str, Any],
                errors: list[str], stop_reason: str | None,
                reported: float | None = None) -> PolicyReply:
        """The reply to one call, its cost from the provider's figure or this policy's
        price (see :func:`~swemill.policies.prices.cost_of`)."""
        cost, source = cost_of(usage, self.price, reported)
        usage = usage.model_copy(update={"cost_usd": cost})
        return PolicyReply(message=message.model_copy(update={"usage": usage}), usage=usage,
                           raw=raw, format_errors=errors, cost_source=source,
                           stop_reason=stop_reason)

    async def aact(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyReply:
        """``act`` off the event loop (SDK clients here are synchronous)."""
        return await asyncio.to_thread(self.act, messages, tools)

    def worst_case_tokens(self, messages: list[Message], tools: list[dict[str, Any]]) -> int:
        return estimate_tokens(messages, tools) + self.max_tokens

    def worst_case_cost(self, messages: list[Message], tools: list[dict[str, Any]]) -> float:
        """The most this call can cost: the prompt estimate at the input price plus every
        allowed output token at the output price. Raises when the model has no price."""
        price = require_price(self.model, self.price)
        prompt = estimate_tokens(messages, tools)
        return (prompt * price.input + self.max_tokens * price.output) / 1_000_000


# prefix -> "module:factory"; the factory takes (spec, rest, **ctx).
REGISTRY: dict[str, str] = {
    "openai": "swemill.policies.openai_compat:from_spec",
    "openrouter": "swemill.policies.openai_compat:from_openrouter_spec",
    "anthropic": "swemill.policies.anthropic:from_spec",
    "bedrock": "swemill.policies.bedrock:from_spec",
    "oracle": "swemill.policies.scripted:oracle_from_spec",
    "noisy-oracle": "swemill.policies.scripted:noisy_oracle_from_spec",
    "scripted": "swemill.policies.scripted:scripted_from_spec",
}


def split_spec(spec: str) -> tuple[str, str]:
    prefix, _, rest = spec.strip().partition(":")
    return prefix.strip().lower(), rest.strip()


def policy_from_spec(spec: str, **ctx: Any) -> Policy:
    """Build the policy a spec string names. ``ctx`` carries what the spec cannot: a
    ``price`` (:class:`Price`), ``max_tokens``, ``golden_patch`` for the oracles, ``seed``..."""
    prefix, rest = split_spec(spec)
    target = REGISTRY.get(prefix)
    if target is None:
        known = ", ".join(sorted(REGISTRY))
        raise PolicyError(f"unknown policy spec {spec!r}: the prefix must be one of {known}")
    module_name, _, attr = target.partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    policy: Policy = factory(spec, rest, **ctx)
    return policy


# Vendor prefixes in OpenRouter / Bedrock ids, then name fragments; first match wins.
_VENDORS = {
    "openai": "openai", "anthropic": "anthropic", "meta-llama": "meta", "meta": "meta",
    "mistralai": "mistral", "mistral": "mistral", "qwen": "qwen", "deepseek": "deepseek",
    "deepseek-ai": "deepseek", "google": "google", "x-ai": "xai", "cohere": "cohere",
    "microsoft": "microsoft", "amazon": "amazon", "ai21": "ai21", "moonshotai": "moonshot",
    "z-ai": "zhipu", "thudm": "zhipu", "nvidia": "nvidia", "writer": "writer",
}
_FRAGMENTS = [
    (r"\bgpt|^o[1-9]\b|^o[1-9]-|codex", "openai"), (r"claude", "anthropic"),
    (r"llama", "meta"), (r"mistral|mixtral|codestral|devstral|magistral", "mistral"),
    (r"qwen|qwq", "qwen"), (r"deepseek", "deepseek"), (r"gemini|gemma", "google"),
    (r"grok", "xai"), (r"\bphi-?\d", "microsoft"), (r"nova|titan", "amazon"),
    (r"command", "cohere"), (r"glm", "zhipu"), (r"kimi|moonshot", "moonshot"),
    (r"jamba", "ai21"), (r"nemotron", "nvidia"),
]


def family_of(model: str) -> str:
    """The model family (``openai``, ``anthropic``, ``meta``, ...) from a model id, used to keep
    teacher pools heterogeneous. ``unknown`` when nothing matches."""
    m = model.strip().lower()
    m = re.sub(r"^(?:us|eu|apac|global)\.", "", m)
    vendor = re.split(r"[/.]", m, maxsplit=1)[0]
    if ("/" in m or "." in m) and vendor in _VENDORS:
        return _VENDORS[vendor]
    for pattern, family in _FRAGMENTS:
        if re.search(pattern, m):
            return family
    return "unknown"
