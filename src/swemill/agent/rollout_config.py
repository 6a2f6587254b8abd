"""``RolloutConfig``: every setting of a rollout run, written next to its outputs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from swemill.agent.grading import RegressionPolicy, RewardWeights
from swemill.agent.harness import Limits
from swemill.core.errors import ConfigError
from swemill.policies.prices import Price, parse_price
from swemill.policies.retry import RetryPolicy

__all__ = ["RolloutConfig"]


class RolloutConfig(BaseModel):
    """Settings of one ``swemill rollout`` run (CLI flags and config files resolve to this)."""

    model_config = ConfigDict(extra="forbid")

    policy: str
    """A policy spec (``openai:MODEL[@URL]``, ``oracle``, ``noisy-oracle:P``, ...) or several,
    comma-separated, to sample N different teachers."""
    samples: int | None = Field(default=None, ge=1)
    """Candidates per task (and per decision point); default: 1, or one per teacher."""
    select: Literal["all", "fractional"] = "all"
    """``fractional`` keeps only tasks the policy solves sometimes but not always."""
    branch_turns: list[int] = Field(default_factory=list)
    """Later decision points (assistant turns of the first sample) to branch at, depth 1."""
    max_pairs: int = Field(default=6, ge=0)
    """Preference pairs kept per decision point (largest grade gaps first)."""
    max_usd: float | None = Field(default=None, ge=0)
    """Dollar limit of the whole run, never exceeded (reserve the worst case, settle the real)."""
    max_usd_task: float | None = Field(default=None, ge=0)
    max_turns: int = Field(default=50, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    """Tokens per trajectory (input + output)."""
    wall_s: float | None = Field(default=1800.0, gt=0)
    """Wall-clock limit per trajectory."""
    max_output_tokens: int | None = Field(default=None, ge=1)
    """Output tokens per model call (the policy's default when None)."""
    temperature: float | None = None
    price: str | None = None
    """``IN,OUT`` dollars per million tokens; needed with --max-usd for unknown models."""
    retries: int = Field(default=5, ge=1)
    """Attempts per model call for transient errors (rate limits, 5xx, dropped connections)."""
    retry_base_s: float = Field(default=1.0, ge=0)
    workers: int = Field(default_factory=lambda: max(1, os.cpu_count() or 1), ge=1)
    """Tasks rolled out at once (worker threads here), one per CPU by default, as validation."""
    executor: str = "local"
    """Where shards run: ``local`` (worker threads here), ``ray`` (one Ray task per shard) or
    ``aws-batch`` (one array child per shard); see ``swemill.agent.shards``. With
    ``max_usd`` each shard gets an equal share."""
    tasks_per_shard: int = Field(default=1, ge=1)
    max_tasks: int | None = Field(default=None, ge=1)
    seed: int = 0
    backend: str = "auto"
    command_timeout_s: float = Field(default=120.0, gt=0)
    test_timeout_s: float = Field(default=900.0, gt=0)
    regression: RegressionPolicy = "zero"
    weights: dict[str, float] = Field(default_factory=dict)
    """Composite-reward weights: correctness, diff, turns, tokens, lint."""
    checkpoint: bool = True
    """Save each running trajectory after every step."""
    cache: str | None = None
    """swemill's cache directory (sources, environments); default ``$SWEMILL_CACHE``."""

    def candidate_specs(self) -> list[str]:
        specs = [s.strip() for s in self.policy.split(",") if s.strip()]
        n = self.samples or len(specs)
        return [specs[i % len(specs)] for i in range(n)]

    def check(self) -> RolloutConfig:
        if not self.candidate_specs():
            raise ConfigError("no policy given: pass --policy SPEC")
        if self.select == "fractional" and len(self.candidate_specs()) < 2:
            raise ConfigError("--select fractional needs a solve rate: use --samples 2 or more")
        if self.executor not in ("local", "ray", "aws-batch"):
            raise ConfigError(f"rollouts cannot run on executor {self.executor!r}: local, ray "
                              "or aws-batch")
        if self.backend not in ("auto", "bwrap", "docker", "local"):
            raise ConfigError(f"unknown sandbox backend {self.backend!r}")
        self.reward_weights()
        self.parsed_price()
        return self

    def parsed_price(self) -> Price | None:
        return parse_price(self.price) if self.price else None

    def reward_weights(self) -> RewardWeights:
        known = set(RewardWeights.__dataclass_fields__)
        bad = sorted(set(self.weights) - known)
        if bad:
            raise ConfigError(f"unknown reward weight {bad[0]!r}: use {', '.join(sorted(known))}")
        return RewardWeights(**self.weights)

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(max_attempts=self.retries, base_s=self.retry_base_s)

    def limits(self) -> Limits:
        return Limits(max_turns=self.max_turns, max_tokens=self.max_tokens, wall_s=self.wall_s,
                      max_usd=self.max_usd_task)

    def cache_path(self) -> Path | None:
        return Path(self.cache) if self.cache else None
