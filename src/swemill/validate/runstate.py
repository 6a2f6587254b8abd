"""What one ``swemill tasks`` run shares between its strategies, and how it writes a task.

Each accepted candidate is written with the environment it was validated in: the head's, or
its base commit's own (:class:`~swemill.repo.commitenv.CommitEnvs`), whose key, test command
and generated files go with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from swemill.core.progress import Progress
from swemill.core.records import Golden, Task
from swemill.policies import policy_from_spec
from swemill.repo.commitenv import CommitEnvs
from swemill.repo.envbuild import RepoEnv
from swemill.repo.sources import ResolvedSource
from swemill.store import Store
from swemill.store.layout import env_prefix
from swemill.suite.runner import command_line
from swemill.synth.problem import PolicyProblemWriter, TemplateProblemWriter
from swemill.validate.check import Checked
from swemill.validate.emit import Writer, emit_task
from swemill.validate.tasks_config import TasksConfig

__all__ = ["RunState", "problem_writer"]



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
