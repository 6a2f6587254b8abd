"""The policies package's public names are pinned, and importing it loads no SDK."""

from __future__ import annotations

import subprocess
import sys

import swemill.policies


def test_all_is_pinned() -> None:
    assert sorted(swemill.policies.__all__) == [
        "BasePolicy", "Policy", "PolicyReply", "Price", "RetryPolicy", "estimate_tokens",
        "family_of", "lookup_price", "parse_price", "policy_from_spec",
    ]
    for name in swemill.policies.__all__:
        assert hasattr(swemill.policies, name), name


def test_importing_policies_loads_no_provider_sdk() -> None:
    code = ("import sys, swemill.policies, swemill.policies.budget; "
            "print(sorted(m for m in ('openai', 'anthropic', 'boto3') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"
