"""The one config object of ``swemill build``: CLI flags resolve to it, the manifest keeps it."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from swemill.core.errors import ConfigError
from swemill.policies.policy import REGISTRY, split_spec

__all__ = ["BuildConfig", "DEFAULT_POLICIES", "RUNTIME_SETTINGS", "SAMPLE_SOURCE"]

SAMPLE_SOURCE = "sample"
DEFAULT_POLICIES = ("oracle", "noisy-oracle:0.5")
"""The scripted pair: the oracle's solved runs feed SFT, the noisy oracle's wrong fixes give
the rejected side of execution-graded DPO pairs. No network, no key."""

RUNTIME_SETTINGS = frozenset({"workers", "executor", "suite_timeout_s"})
"""Settings that change where or how fast work runs, never what it produces: left out of the
config hash, and the only ones a resumed run may change (a build whose suite ran out of time
resumes with a larger ``--suite-timeout``)."""


class BuildConfig(BaseModel):
    """Everything a build's output depends on (and ``workers``, which it does not)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policies: tuple[str, ...] = DEFAULT_POLICIES
    """Policy specs for the rollouts (``oracle``, ``noisy-oracle:P``, ``openai:MODEL``...)."""
    samples: int = Field(default=4, ge=1)
    """Rollouts per task, cycling through ``policies`` (several give the preference pairs)."""
    max_tasks: int = Field(default=4, ge=1)
    """Validated tasks to write, shared between the synthesis strategies."""
    strategies: tuple[str, ...] | None = None
    """Synthesis strategies; None uses the tasks stage's defaults."""
    workers: int = Field(default=2, ge=1)
    """Parallel workers for validation and rollouts."""
    seed: int = 0
    """Seed of synthesis, noisy policies and the held-out split."""
    max_usd: float | None = Field(default=None, ge=0.0)
    """Dollar ceiling for the whole run's policy calls; None means no ceiling."""
    executor: Literal["local", "ray", "aws-batch"] = "local"
    """Where validation and rollouts run: ``local`` workers, ``ray`` or ``aws-batch`` (same
    output; aws-batch needs an s3:// root and the job queue settings)."""
    backend: Literal["auto", "bwrap", "local"] = "auto"
    """Sandbox backend for the baseline, validation and rollouts."""
    suite_timeout_s: float | None = Field(default=None, gt=0)
    """Seconds one baseline run of the whole suite may take; None derives the bound from the
    suite's size (``suite.timeouts.suite_timeout_for``)."""
    repeat: int = Field(default=3, ge=1)
    """Runs of each broken tree in validation (``TasksConfig.repeat``)."""
    audit: int | None = Field(default=None, ge=0)
    """Tasks to audit cold (``TasksConfig.audit``; None: the sampled default, 0: off)."""
    holdout: float = Field(default=0.1, ge=0.0, lt=1.0)
    """Share of rows held out (whole groups), for the corpus split."""
    issue_writer: str | None = None
    """Policy spec that writes the statements (``TasksConfig.problem_writer``); None: the
    template."""
    bug_writer: str | None = None
    """Policy spec that writes the ``lm-modify`` / ``lm-rewrite`` bugs
    (``TasksConfig.bug_writer``); its calls spend from ``max_usd`` before the rollouts do."""
    price: str | None = None
    """``IN,OUT`` dollars per million tokens of the models this build calls (the bug writer
    and the rollout policies) where the price table does not know them; ``0,0`` for a free
    local server. Needed with ``max_usd`` for such models."""
    emit_wm: bool = False
    """Also write world-model tuples to ``corpus/wm/``."""
    allow_contaminated: bool = False
    """Let a benchmark's repository through the gate (the verdict still says it is one)."""

    @field_validator("issue_writer", "bug_writer")
    @classmethod
    def _known_writer(cls, value: str | None) -> str | None:
        if value is not None and split_spec(value)[0] not in REGISTRY:
            raise ValueError(f"unknown policy spec {value!r}: the prefix must be one of "
                             f"{', '.join(sorted(REGISTRY))}")
        return value

    @field_validator("price")
    @classmethod
    def _price(cls, value: str | None) -> str | None:
        if value is not None:
            from swemill.policies.prices import parse_price

            try:
                parse_price(value)
            except ConfigError as exc:
                raise ValueError(str(exc)) from exc
        return value

    @field_validator("policies")
    @classmethod
    def _some_policy(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value or any(not p.strip() for p in value):
            raise ValueError("at least one non-empty policy spec is needed")
        for spec in value:  # refused now, not after the tasks are validated
            if split_spec(spec)[0] not in REGISTRY:
                known = ", ".join(sorted(REGISTRY))
                raise ValueError(f"unknown policy spec {spec!r}: the prefix must be one of {known}")
        return value

    def resolved(self) -> dict[str, Any]:
        """The config as written into the manifest (JSON types only)."""
        return self.model_dump(mode="json")

    def hash(self) -> str:
        """``sha256:`` of the settings the output depends on (``workers`` left out)."""
        data = {k: v for k, v in self.resolved().items() if k not in RUNTIME_SETTINGS}
        blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()[:16]

    @classmethod
    def from_manifest(cls, data: dict[str, Any]) -> BuildConfig:
        """The config a run was started with (what ``--resume`` continues under)."""
        try:
            return cls.model_validate(data)
        except ValueError as exc:
            first = str(exc).splitlines()[0]
            raise ConfigError(f"the run's recorded build config cannot be read: {first}") from exc
