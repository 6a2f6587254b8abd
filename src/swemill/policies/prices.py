"""Token prices, and how a call's cost is decided.

Order of trust, highest first:

1. the cost the provider reports for the call (OpenRouter's ``usage.cost``; the fake server
   reports one the same way);
2. an explicit price the user gave (``--price IN,OUT`` in $ per million tokens), or
3. this table, matched on the normalised model id (longest known prefix wins).

A model that is in none of them costs 0 and its replies say ``cost_source="unknown"``. That is
fine for a run without a dollar budget; with one, :meth:`Price`-less policies refuse to
estimate a worst case (:func:`require_price`), because a budget that cannot bound a call is
not a budget. Local servers are no exception: pass ``--price 0,0`` to declare one free.

The table is a convenience with list prices (USD per million tokens, late 2025); it goes stale.
Users who care pass ``--price``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from swemill.core.errors import ConfigError, PolicyError
from swemill.core.records import Usage

__all__ = [
    "Price", "PRICES", "CostSource", "lookup_price", "parse_price", "cost_of", "require_price",
]

CostSource = Literal["provider", "price", "unknown", "none"]


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens. Cache prices default to the input price when not listed."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, usage: Usage) -> float:
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        total = (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * read
            + usage.cache_write_tokens * write
        )
        return total / 1_000_000


def _anthropic(i: float, o: float) -> Price:
    # Anthropic bills cache reads at 0.1x and 5-minute cache writes at 1.25x the input price.
    return Price(i, o, cache_read=i * 0.1, cache_write=i * 1.25)


PRICES: dict[str, Price] = {
    "gpt-4o-mini": Price(0.15, 0.60, cache_read=0.075),
    "gpt-4o": Price(2.50, 10.00, cache_read=1.25),
    "gpt-4.1-nano": Price(0.10, 0.40, cache_read=0.025),
    "gpt-4.1-mini": Price(0.40, 1.60, cache_read=0.10),
    "gpt-4.1": Price(2.00, 8.00, cache_read=0.50),
    "gpt-5-nano": Price(0.05, 0.40, cache_read=0.005),
    "gpt-5-mini": Price(0.25, 2.00, cache_read=0.025),
    "gpt-5": Price(1.25, 10.00, cache_read=0.125),
    "o4-mini": Price(1.10, 4.40, cache_read=0.275),
    "o3": Price(2.00, 8.00, cache_read=0.50),
    "claude-3-haiku": _anthropic(0.25, 1.25),
    "claude-3-sonnet": _anthropic(3.00, 15.00),
    "claude-3-opus": _anthropic(15.00, 75.00),
    "claude-3-5-haiku": _anthropic(0.80, 4.00),
    "claude-haiku-4-5": _anthropic(1.00, 5.00),
    "claude-3-5-sonnet": _anthropic(3.00, 15.00),
    "claude-3-7-sonnet": _anthropic(3.00, 15.00),
    "claude-sonnet-4": _anthropic(3.00, 15.00),
    "claude-opus-4-5": _anthropic(5.00, 25.00),
    "claude-opus-4": _anthropic(15.00, 75.00),
    "deepseek-chat": Price(0.27, 1.10),
    "deepseek-v3": Price(0.27, 1.10),
    "deepseek-r1": Price(0.55, 2.19),
    "qwen3-coder": Price(0.40, 1.60),
    "llama3-3-70b": Price(0.72, 0.72),
    "llama-3.3-70b": Price(0.72, 0.72),
    "llama3-1-8b": Price(0.22, 0.22),
    "mistral-large": Price(2.00, 6.00),
    "devstral": Price(0.10, 0.30),
    "gemini-2.5-flash": Price(0.30, 2.50),
    "gemini-2.5-pro": Price(1.25, 10.00),
    "nova-pro": Price(0.80, 3.20),
    "nova-lite": Price(0.06, 0.24),
}

# Provider prefixes and region prefixes on ids: "openai/gpt-4o", "us.anthropic.claude-...",
# "anthropic.claude-3-5-sonnet-20241022-v2:0", "meta-llama/llama-3.3-70b-instruct".
_PREFIX = re.compile(r"^(?:[a-z0-9_-]+/)+|^(?:(?:us|eu|apac|global)\.)?[a-z0-9-]+\.(?=[a-z])")


def _normalise(model: str) -> str:
    m = model.strip().lower()
    return _PREFIX.sub("", m, count=1)


def lookup_price(model: str) -> Price | None:
    """The table's price for ``model`` (longest matching prefix), or None if unknown."""
    norm = _normalise(model)
    best = max((k for k in PRICES if norm.startswith(k)), key=len, default=None)
    return PRICES[best] if best else None


def parse_price(text: str) -> Price:
    """``"IN,OUT"`` in $ per million tokens, e.g. ``"3,15"`` or ``"0,0"`` for a free server."""
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != 2 or min(values) < 0:
        raise ConfigError(f"--price must be 'IN,OUT' in $ per million tokens, got {text!r}")
    return Price(values[0], values[1])


def cost_of(
    usage: Usage, price: Price | None, reported: float | None
) -> tuple[float, CostSource]:
    """The cost of one call and where the number came from."""
    if reported is not None and reported >= 0:
        return float(reported), "provider"
    if price is None:
        return 0.0, "unknown"
    return price.cost(usage), "price"


def require_price(model: str, price: Price | None) -> Price:
    """The price to bound a call with under a dollar budget; refuse when there is none."""
    if price is None:
        raise PolicyError(
            f"no price known for model {model!r}: a dollar budget cannot bound its calls; "
            "pass --price IN,OUT ($ per million tokens; '0,0' for a free local server)"
        )
    return price
