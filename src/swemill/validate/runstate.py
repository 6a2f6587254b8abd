"""What one ``swemill tasks`` run shares between its strategies, and how it writes a task.

Each accepted candidate is written with the environment it was validated in: the head's, or
its base commit's own (:class:`~swemill.repo.commitenv.CommitEnvs`), whose key, test command
and generated files go with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from swemill.core.progress import Progress
from swemill.core.records import Golden, RunManifest, Task
from swemill.policies import policy_from_spec
from swemill.policies.budget import Budget
from swemill.policies.policy import Policy
from swemill.policies.prices import parse_price
from swemill.repo.commitenv import CommitEnvs
from swemill.repo.envbuild import RepoEnv
from swemill.repo.sources import ResolvedSource
from swemill.store import Store
from swemill.store.layout import env_prefix
from swemill.suite.runner import command_line
from swemill.synth.lm_bugs import BugWriter
from swemill.synth.problem import PolicyProblemWriter, TemplateProblemWriter
from swemill.validate.check import Checked
from swemill.validate.emit import Writer, emit_task
from swemill.validate.tasks_config import TasksConfig

__all__ = ["RunState", "bug_writer", "charge", "problem_writer", "run_budget",
           "tasks_spent"]

@dataclass
class RunState:
    """Everything one run shares between its strategies."""

    spec: str
    src: ResolvedSource
    env: RepoEnv
    store: Store
    run_id: str
    config: TasksConfig
    tier: str
    test_cmd: str
    progress: Progress
    envs: CommitEnvs
    bug_writer: BugWriter | None = None
    issue_writer: PolicyProblemWriter | None = None
    """The model writing the statements; None: the template."""

    @property
    def writer(self) -> Writer:
        return (self.issue_writer or TemplateProblemWriter()).statement

    def emit(self, checked: list[Checked]) -> list[tuple[Task, Golden]]:
        """Each task with its environment's test command and key: the head's, or its base
        commit's own (whose clone holds what that build generated)."""
        out = []
        for c in checked:
            env = self.envs.by_key(c.env_key) or self.env
            own = env.key != self.env.key
            out.append(emit_task(
                self.store, c, run_id=self.run_id, source=env.source_path if own else
                self.src.path, spec=self.spec, repo=self.src.repo,
                env_recipe=env_prefix(env.repo, env.key.rpartition("@")[2] if own
                                      else self.env.commit),
                test_cmd=command_line(env) if own else self.test_cmd,
                license_tier=self.tier, writer=self.writer,  # type: ignore[arg-type]
                generated=env.generated))
        return out


def run_budget(config: TasksConfig, manifest: RunManifest) -> Budget:
    """What is left of the run's ``--max-usd`` for its model calls (bug writing and issue
    writing draw from this one budget; an earlier invocation of the run may have spent some)."""
    left = None if config.max_usd is None else max(0.0, config.max_usd - tasks_spent(manifest))
    return Budget(left, name="tasks")


def tasks_spent(manifest: RunManifest) -> float:
    """Dollars the run's bug-writing and issue-writing calls have cost so far."""
    return sum(float((manifest.metadata.get(key) or {}).get("cost_usd", 0.0))
               for key in ("bug_writer", "issue_writer"))


def _model(spec: str, config: TasksConfig, budget: Budget, max_tokens: int) -> Policy:
    ctx: dict[str, Any] = {"max_tokens": max_tokens, "seed": config.seed}
    if config.price:
        ctx["price"] = parse_price(config.price)
    policy = policy_from_spec(spec, **ctx)
    if budget.limits_usd and not policy.synthetic:
        policy.worst_case_cost([], [])  # a ceiling without a price: one clear error, now
    return policy


def problem_writer(config: TasksConfig, budget: Budget) -> PolicyProblemWriter | None:
    """The model that writes the statements (``--issue-writer``, by default the bug writer),
    spending from ``budget``; None: the template writes them."""
    spec = config.issue_writer
    if spec is None:
        return None
    policy = _model(spec, config, budget, config.issue_writer_max_tokens)
    return PolicyProblemWriter(policy, budget=budget)


def bug_writer(config: TasksConfig, budget: Budget) -> BugWriter | None:
    """The model ``--bug-writer`` names, spending from ``budget``."""
    if not config.bug_writer:
        return None
    policy = _model(config.bug_writer, config, budget, config.bug_writer_max_tokens)
    return BugWriter(policy, budget, config.bug_writer_workers)


def charge(manifest: RunManifest, key: str, writer: BugWriter | PolicyProblemWriter | None,
           calls: int, cost_usd: float) -> None:
    """A strategy's model calls into the manifest: ``cost_usd`` and ``metadata[key]``
    (``bug_writer`` or ``issue_writer``: the spec, model, calls and cost over every
    invocation of the run, and for the bug writer its prompt versions)."""
    if writer is None or not calls:
        return
    manifest.cost_usd += cost_usd
    old = manifest.metadata.get(key) or {}
    entry = writer.summary()
    entry["calls"] = int(old.get("calls", 0)) + calls
    entry["cost_usd"] = round(float(old.get("cost_usd", 0.0)) + cost_usd, 9)
    manifest.metadata[key] = entry
    manifest.policies = sorted(set(manifest.policies) | {writer.policy.spec})
