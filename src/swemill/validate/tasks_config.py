"""What ``run_tasks`` is asked to do (:class:`TasksConfig`) and what it did (``TasksResult``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, field_validator

from swemill.core.errors import ConfigError
from swemill.validate.inside.protocol import Flags, ProtocolError

if TYPE_CHECKING:
    from swemill.validate.drops import DropSummary

__all__ = ["TasksConfig", "TasksResult", "StrategyYield", "DEFAULT_STRATEGIES",
           "MODEL_STRATEGIES", "TEMPLATE"]

DEFAULT_STRATEGIES = ("procedural", "pr-mirror", "combine")
_KNOWN = ("procedural", "pr-mirror", "combine", "rows", "lm-modify", "lm-rewrite")
MODEL_STRATEGIES = ("lm-modify", "lm-rewrite")
"""Strategies whose candidates a model writes (``bug_writer``)."""
TEMPLATE = "template"
"""``--issue-writer template``: the template writes the statements, even with a bug writer."""


class TasksConfig(BaseModel):
    """Settings of one ``swemill tasks`` run; written into the run's manifest."""

    model_config = ConfigDict(extra="forbid")

    strategies: list[str] = Field(default_factory=lambda: list(DEFAULT_STRATEGIES))
    """Strategies in the order they run; ``combine`` always runs last, over validated bugs."""
    rows: Path | None = None
    """SWE-bench / SWE-smith rows file for the ``rows`` strategy."""
    rows_repo: Path | None = None
    """A local clone holding the rows' base commits (default: the source's working copy)."""
    max_tasks: int = Field(default=4, ge=1)
    """Tasks to write in all, shared evenly between the strategies; the share of one that can
    yield nothing here (``pr-mirror`` on a one-commit history) goes to the first that can,
    and what one leaves unfilled passes on to the next in the run's order, ``combine`` last
    (the default is sized for a first run, ``swemill tasks`` alone or in a build)."""
    max_candidates: int | None = Field(default=None, ge=1)
    """Candidates each strategy may validate at most (default: 8 per task asked of it)."""
    workers: int = Field(default_factory=lambda: max(1, os.cpu_count() or 1), ge=1)
    """Parallel validation workers, each a fork of the workspace with a warm pytest server."""
    seed: int = 0
    """Fixes which candidates are made and in what order: same seed, same tasks."""
    audit: int | None = Field(default=None, ge=0)
    """Re-run the full suite cold on this many written tasks (0: none; None: every task while
    the run wrote fewer than 20, else 10%, at least 2; see ``validate.audit``). A task that
    disagrees with its lists is removed and counted (``audit_rejected``); after one, every
    other task is audited too."""
    near_misses: int = Field(default=2, ge=0)
    """Near-miss variants (other procedural mutants of the same function) run against each
    accepted task's lists for its ``near_miss_*`` columns; 0: none."""
    repeat: int = Field(default=3, ge=1)
    """Runs of a broken tree that passed the first gates: a FAIL_TO_PASS test fails in every
    one, and passes in each of ``max(2, repeat)`` golden runs; a test whose outcome changes
    between the broken runs is in neither list."""
    backend: str = "auto"
    """Sandbox backend: auto, bwrap, local."""
    executor: str = "local"
    """Where candidates are validated: ``local`` (warm workers in this process), ``ray``
    (chunks of candidates as Ray tasks) or ``aws-batch`` (chunks as array children); see
    ``swemill.validate.chunks``. The tasks are the same on all three."""
    allow_contaminated: bool = False
    """Let an evaluation benchmark's repository through (the manifest records it)."""
    problem_writer: str | None = None
    """What writes the problem statements from the failing tests' evidence
    (``--issue-writer``): a policy spec (see ``policy_from_spec``), or ``template`` for the
    template. Default (None): the bug writer's model where ``bug_writer`` is set, else the
    template (:attr:`issue_writer`). Either is leak-checked (:mod:`swemill.synth.leaks`); a
    model's calls spend from ``max_usd`` like the bug writer's."""
    issue_writer_max_tokens: int = Field(default=1024, ge=64)
    """Output tokens one statement may take (its worst case under ``max_usd``)."""
    bug_writer: str | None = None
    """A policy spec (``--bug-writer``) that writes the ``lm-modify`` / ``lm-rewrite`` bugs."""
    bug_writer_workers: int = Field(default=8, ge=1)
    """Bug-writing calls in flight at once (ahead of validation)."""
    bug_writer_max_tokens: int = Field(default=2048, ge=64)
    """Output tokens one bug-writing answer may take (its worst case under ``max_usd``)."""
    max_usd: float | None = Field(default=None, ge=0)
    """Dollar ceiling of the run's model calls, bug writing and issue writing together
    (reserve the worst case, settle the real cost: never passed); None: no ceiling."""
    price: str | None = None
    """``IN,OUT`` dollars per million tokens of the models the run calls (bug writer, issue
    writer; ``--price``), for a model the price table does not know; ``0,0`` for a free
    local server. A cost the provider reports for a call comes first."""
    timeout_factor: float = Field(default=3.0, gt=0)
    """A run may take this many times its tests' baseline durations, plus start-up."""
    timeout_margin_s: float = Field(default=5.0, ge=0)
    suite_timeout_s: float | None = Field(default=None, gt=0)
    """Bound on one baseline run of the whole suite (the baseline itself has no durations
    yet); None derives it from the suite's size (``suite.timeouts.suite_timeout_for``)."""
    memory_mb: int = Field(default=4096, ge=64)
    """Memory limit of each worker's sandbox."""
    head_image: bool = True
    """Serve selected-test runs at head from each worker's head image (a process that has
    collected the suite once; see ``swemill.validate.inside.image``); off: every run starts
    pytest afresh in a fork of the warm server."""
    shadow_every: int = Field(default=50, ge=0)
    """Shadow checks: the first head-image run and then one in this many are run again the
    ordinary way (no head image) and compared; a disagreement turns the image off for the
    rest of the run and is counted (``shadow_mismatches``; see ``swemill.validate.shadow``).
    0: none."""
    fast_paths_off: list[str] = Field(default_factory=list)
    """Optimisations of the warm server to switch off, by name (``fork``, ``code_cache``,
    ``report_cache``, ``head_image``, ``hotpatch``, ``tree_image``; see
    ``swemill.validate.inside.protocol``):
    for finding out whether one of them changes a verdict."""
    combine_feed: int = Field(default=6, ge=0)
    """With ``combine``: validate at least this many bugs of the first strategy to merge."""
    commit_envs: int = Field(default=3, ge=0)
    """Base commits (pr-mirror, rows) that declare other dependencies than the head run in an
    environment built for them (cached by what they declare); at most this many are built per
    run, the other commits run in the head's (0: all do). See ``swemill.repo.commitenv``."""
    recipe: Path | None = None
    """An install recipe file (``--recipe``, see docs/recipes.md) instead of the detected one
    (or the repository's committed ``.swemill/recipe.toml``)."""

    @field_validator("strategies")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        names = [v.strip() for v in value if v.strip()]
        bad = [n for n in names if n not in _KNOWN]
        if bad:
            raise ValueError(f"unknown strategy {bad[0]!r}; known: {', '.join(_KNOWN)}")
        if not names:
            raise ValueError("no strategy given")
        return list(dict.fromkeys(names))

    @field_validator("fast_paths_off")
    @classmethod
    def _flags(cls, value: list[str]) -> list[str]:
        try:
            Flags.without(value)
        except ProtocolError as exc:
            raise ValueError(str(exc)) from exc
        return value

    @property
    def issue_writer(self) -> str | None:
        """The policy spec that writes the statements, or None for the template."""
        if self.problem_writer == TEMPLATE:
            return None
        return self.problem_writer or self.bug_writer

    def check(self) -> TasksConfig:
        if "rows" in self.strategies and self.rows is None:
            raise ConfigError("the rows strategy needs a rows file (--rows FILE)")
        if self.executor not in ("local", "ray", "aws-batch"):
            raise ConfigError(f"tasks cannot run on executor {self.executor!r}: local, ray or "
                              "aws-batch")
        if self.backend not in ("auto", "bwrap", "local"):
            raise ConfigError(f"unknown sandbox backend {self.backend!r}: auto, bwrap or local")
        from swemill.policies.policy import REGISTRY, split_spec

        # the bug writer first: the issue writer may be the same spec, taken from it
        for what, spec in (("bug writer", self.bug_writer), ("issue writer", self.issue_writer)):
            if spec is not None and split_spec(spec)[0] not in REGISTRY:
                also = f", or {TEMPLATE!r} for the template" if what == "issue writer" else ""
                raise ConfigError(f"unknown {what} {spec!r}: a policy spec, one of "
                                  f"{', '.join(sorted(REGISTRY))}{also}")
        lm = [s for s in self.strategies if s in MODEL_STRATEGIES]
        if lm and self.bug_writer is None:
            raise ConfigError(f"the {lm[0]} strategy needs a model: --bug-writer SPEC (e.g. "
                              "openai:MODEL@URL)")
        if self.price is not None:
            from swemill.policies.prices import parse_price

            parse_price(self.price)
        return self


@dataclass(slots=True)
class StrategyYield:
    candidates: int = 0
    tasks: int = 0
    """Written (at most the strategy's share of ``max_tasks``, with the shares others could
    not fill)."""
    valid: int = 0
    """Accepted by the gates (a few more than written when combine needs material)."""
    drops: dict[str, int] = field(default_factory=dict)
    """Validated candidates the gates refused, per reason."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Items the strategy passed over before validation (a row whose patch no longer
    applies, an unparseable file ...), per reason."""
    note: str | None = None
    """Why the strategy produced nothing, when it did not."""
    cost_usd: float = 0.0
    """What the strategy's model calls cost (``lm-modify``, ``lm-rewrite``)."""
    calls: int = 0
    statement_fallbacks: dict[str, int] = field(default_factory=dict)
    """Tasks whose statement was replaced by the template's (or by the failing test names
    alone), per reason (:data:`~swemill.synth.problem.FALLBACK_REASONS`: ``leak`` when it
    gave the edit away, :mod:`swemill.synth.leaks`; ``over_budget`` when ``max_usd`` could
    not hold the issue writer's call ...)."""
    statement_calls: int = 0
    """The issue writer's calls for the strategy's tasks."""
    statement_cost_usd: float = 0.0

    @property
    def rate(self) -> float:
        return self.valid / self.candidates if self.candidates else 0.0


@dataclass(slots=True)
class TasksResult:
    run_id: str
    source: str
    repo: str
    commit: str
    license_tier: str
    tasks: int = 0
    candidates: int = 0
    yields: dict[str, StrategyYield] = field(default_factory=dict)
    drops: dict[str, int] = field(default_factory=dict)
    timings_s: dict[str, float] = field(default_factory=dict)
    cpu_s: float = 0.0
    """CPU seconds of validation: this process plus every test process the warm servers
    forked and the head images' collection (measured inside the sandbox); the servers' one-off
    warm-up and git are not in it."""
    head_image: dict[str, object] = field(default_factory=dict)
    """Runs the head images served, and why the others were not (local executor only)."""
    shadow_checks: int = 0
    """Head-image runs run again cold and compared (see ``swemill.validate.shadow``)."""
    shadow_mismatches: int = 0
    """Of those, the ones that disagreed (the image was then off for the rest of the run)."""
    shadow_details: list[str] = field(default_factory=list)
    instance_ids: list[str] = field(default_factory=list)
    audited: int = 0
    audit_rejected: dict[str, str] = field(default_factory=dict)
    """Tasks the audit removed: instance id -> what disagreed."""
    head_flaky: list[str] = field(default_factory=list)
    """Tests that did not pass on the head tree (which the baseline passed them on) in a
    golden run or in the audit's runs: taken out of every task's PASS_TO_PASS; a task whose
    FAIL_TO_PASS held one was removed (``flaky_at_head``)."""
    flaky_removed: dict[str, str] = field(default_factory=dict)
    """Tasks removed for such a test: instance id -> the test."""
    resumed: list[str] = field(default_factory=list)
    """Strategies whose shards were already complete and were read back, not redone."""
    drop_summary: DropSummary | None = None
    """Top drop reasons of the source's candidates (read back from ``candidates/``)."""
    env_skipped: list[str] = field(default_factory=list)
    """Test dependencies the environment could not install (``requirement: cause``)."""
    commit_envs: dict[str, str] = field(default_factory=dict)
    """Environments built for older base commits (key -> the commit), and those not built
    (``deps-<hash>`` -> why their commits ran in the head's)."""

    def to_dict(self) -> dict[str, object]:
        return {
            "run_id": self.run_id, "source": self.source, "repo": self.repo,
            "commit": self.commit, "license_tier": self.license_tier, "tasks": self.tasks,
            "candidates": self.candidates,
            "yields": {k: {"candidates": v.candidates, "tasks": v.tasks, "valid": v.valid,
                           "yield": round(v.rate, 4), "drops": v.drops,
                           "skipped": v.skipped, "note": v.note,
                           "statement_fallback": sum(v.statement_fallbacks.values()),
                           "statement_fallbacks": v.statement_fallbacks,
                           **({"calls": v.calls, "cost_usd": round(v.cost_usd, 9)}
                              if v.calls else {}),
                           **({"statement_calls": v.statement_calls,
                               "statement_cost_usd": round(v.statement_cost_usd, 9)}
                              if v.statement_calls else {})}
                       for k, v in self.yields.items()},
            "drops": self.drops, "timings_s": self.timings_s, "cpu_s": round(self.cpu_s, 3),
            "instance_ids": self.instance_ids, "audited": self.audited,
            "audit_rejected": self.audit_rejected, "head_flaky": self.head_flaky,
            "flaky_removed": self.flaky_removed, "resumed": self.resumed,
            "head_image": self.head_image, "env_skipped": self.env_skipped,
            "commit_envs": self.commit_envs,
            "shadow_checks": self.shadow_checks, "shadow_mismatches": self.shadow_mismatches,
            "shadow_details": self.shadow_details,
            "drop_summary": self.drop_summary.to_dict() if self.drop_summary else None,
            "drop_lines": self.drop_summary.lines() if self.drop_summary else [],
        }
