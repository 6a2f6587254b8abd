"""Policies: what acts in a task environment or answers a replayed state.

Pick one with :func:`policy_from_spec` (``openai:MODEL[@URL]``, ``openrouter:MODEL``,
``anthropic:MODEL``, ``bedrock:MODEL_ID``, ``oracle``, ``noisy-oracle:P``, ``scripted:NAME``).
Backends with heavy SDKs are imported only when their prefix is used.
"""

from swemill.policies.policy import (
    BasePolicy,
    Policy,
    PolicyReply,
    estimate_tokens,
    family_of,
    policy_from_spec,
)
from swemill.policies.prices import Price, lookup_price, parse_price
from swemill.policies.retry import RetryPolicy

__all__ = [
    "BasePolicy",
    "Policy",
    "PolicyReply",
    "Price",
    "RetryPolicy",
    "estimate_tokens",
    "family_of",
    "lookup_price",
    "parse_price",
    "policy_from_spec",
]
