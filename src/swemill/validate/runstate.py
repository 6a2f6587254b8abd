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

__all__ = ["RunState", "bug_writer", "charge", "problem_writer"]

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
    writer: Writer
    progress: Progress
    envs: CommitEnvs
    bug_writer: BugWriter | None = None

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


def problem_writer(config: TasksConfig) -> Writer:
    """The template from the failing tests, or the policy ``--issue-writer`` names."""
    if not config.problem_writer:
        return TemplateProblemWriter().write
    return PolicyProblemWriter(policy_from_spec(config.problem_writer)).write


def bug_writer(config: TasksConfig, manifest: RunManifest) -> BugWriter | None:
    """The model ``--bug-writer`` names, spending from what is left of the run's
    ``--max-usd`` (an earlier invocation of the same run may have spent some)."""
    if not config.bug_writer:
        return None
    spent = float((manifest.metadata.get("bug_writer") or {}).get("cost_usd", 0.0))
    left = None if config.max_usd is None else max(0.0, config.max_usd - spent)
    ctx: dict[str, Any] = {"max_tokens": config.bug_writer_max_tokens, "seed": config.seed}
    if config.price:
        ctx["price"] = parse_price(config.price)
    policy = policy_from_spec(config.bug_writer, **ctx)
    if left is not None and not policy.synthetic:
        policy.worst_case_cost([], [])  # a ceiling without a price: one clear error, now
    return BugWriter(policy, Budget(left, name="tasks"), config.bug_writer_workers)


def charge(manifest: RunManifest, writer: BugWriter | None, calls: int, cost_usd: float
           ) -> None:
    """A strategy's model calls into the manifest: ``cost_usd`` and ``metadata.bug_writer``
    (the spec, model, prompt versions, calls and cost over every invocation of the run)."""
    if writer is None or not calls:
        return
    manifest.cost_usd += cost_usd
    old = manifest.metadata.get("bug_writer") or {}
    entry = writer.summary()
    entry["calls"] = int(old.get("calls", 0)) + calls
    entry["cost_usd"] = round(float(old.get("cost_usd", 0.0)) + cost_usd, 9)
    manifest.metadata["bug_writer"] = entry
    manifest.policies = sorted(set(manifest.policies) | {writer.policy.spec})
