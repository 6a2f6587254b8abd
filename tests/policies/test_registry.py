"""Spec strings, lazy backends, model families and prices."""

from __future__ import annotations

import re

import pytest

from swemill.core.errors import ConfigError, PolicyError
from swemill.core.records import Golden, Usage
from swemill.policies.policy import Policy, family_of, policy_from_spec
from swemill.policies.prices import Price, cost_of, lookup_price, parse_price, require_price

PATCH = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpt4", "unknown policy spec 'gpt4'"),
        ("llama:70b", "the prefix must be one of"),
        ("openai:", "names no model"),
        ("anthropic:", "names no model"),
        ("bedrock:", "names no model"),
        ("openrouter:", "names no model"),
        ("noisy-oracle:lots", "noisy-oracle:P"),
        ("noisy-oracle:1.5", "within [0, 1]"),
        ("scripted:nope", "unknown script 'nope'"),
        ("oracle", "needs the task's golden patch"),
    ],
)
def test_bad_specs_fail_with_one_clear_line(spec: str, message: str) -> None:
    ctx = {"golden_patch": PATCH} if spec.startswith("noisy") else {}
    with pytest.raises(PolicyError, match=re.escape(message)) as info:
        policy_from_spec(spec, **ctx)
    assert "\n" not in str(info.value)


def test_every_backend_is_a_policy() -> None:
    golden = Golden(instance_id="t", bug_patch="", golden_patch=PATCH)
    built = [
        policy_from_spec("openai:qwen2.5-coder@http://127.0.0.1:9/v1"),
        policy_from_spec("oracle", golden=golden),
        policy_from_spec("noisy-oracle:0.25", golden_patch=PATCH, seed=3),
        policy_from_spec("scripted:explore"),
    ]
    for policy in built:
        assert isinstance(policy, Policy)
    assert [p.family for p in built] == ["qwen", "scripted", "scripted", "scripted"]
    assert [p.synthetic for p in built] == [False, True, True, True]


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("gpt-4.1-mini", "openai"),
        ("o4-mini", "openai"),
        ("openai/gpt-5", "openai"),
        ("claude-sonnet-4-5", "anthropic"),
        ("us.anthropic.claude-3-7-sonnet-20250219-v1:0", "anthropic"),
        ("meta.llama3-3-70b-instruct-v1:0", "meta"),
        ("meta-llama/llama-3.3-70b-instruct", "meta"),
        ("mistralai/devstral-small", "mistral"),
        ("codestral-latest", "mistral"),
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen"),
        ("qwen2.5-coder:7b", "qwen"),
        ("deepseek/deepseek-chat-v3", "deepseek"),
        ("deepseek.r1-v1:0", "deepseek"),
        ("google/gemini-2.5-pro", "google"),
        ("x-ai/grok-code-fast-1", "xai"),
        ("amazon.nova-pro-v1:0", "amazon"),
        ("moonshotai/kimi-k2", "moonshot"),
        ("my-finetune", "unknown"),
    ],
)
def test_family_of(model: str, family: str) -> None:
    assert family_of(model) == family


def test_price_lookup_normalises_provider_ids() -> None:
    assert lookup_price("gpt-4o-mini-2024-07-18") == Price(0.15, 0.60, cache_read=0.075)
    assert lookup_price("openai/gpt-4o") == lookup_price("gpt-4o")
    assert lookup_price("gpt-4o") != lookup_price("gpt-4o-mini")  # longest prefix wins
    sonnet = lookup_price("us.anthropic.claude-sonnet-4-20250514-v1:0")
    assert sonnet is not None and (sonnet.input, sonnet.output) == (3.0, 15.0)
    assert lookup_price("anthropic/claude-sonnet-4") == sonnet
    assert lookup_price("my-finetune") is None


def test_cost_prefers_the_provider_then_the_price() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cache_read_tokens=1_000_000)
    price = Price(3.0, 15.0, cache_read=0.3)
    assert cost_of(usage, price, 0.5) == (0.5, "provider")
    assert cost_of(usage, price, None) == (pytest.approx(3.0 + 1.5 + 0.3), "price")
    assert cost_of(usage, None, None) == (0.0, "unknown")


def test_parse_price() -> None:
    assert parse_price("3,15") == Price(3.0, 15.0)
    assert parse_price(" 0 , 0 ") == Price(0.0, 0.0)
    for bad in ("3", "a,b", "-1,2", "1,2,3"):
        with pytest.raises(ConfigError, match="--price"):
            parse_price(bad)
    with pytest.raises(PolicyError, match="no price known for model 'x'"):
        require_price("x", None)


@pytest.mark.parametrize(
    ("module", "spec", "extra"),
    [
        ("openai", "openai:m@http://127.0.0.1:9/v1", "swemill[openai]"),
        ("anthropic", "anthropic:claude-x", "swemill[anthropic]"),
        ("boto3", "bedrock:amazon.nova-pro-v1:0", "swemill[aws]"),
    ],
)
def test_a_missing_sdk_names_the_extra(module: str, spec: str, extra: str) -> None:
    """Run in a child process where the SDK cannot be imported (as if not installed)."""
    import subprocess
    import sys

    code = (
        f"import sys; sys.modules[{module!r}] = None\n"
        "from swemill.core.errors import MissingDependency\n"
        "from swemill.policies import policy_from_spec\n"
        "try:\n"
        f"    policy_from_spec({spec!r}, api_key='k')\n"
        "except MissingDependency as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert f"pip install '{extra}'" in out.stdout and out.stdout.count("\n") == 1
