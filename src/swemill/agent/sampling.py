"""Depth-1 multi-candidate sampling and execution-graded preference pairs.

At a *decision point* (a state of a trajectory: its message history and its workspace), N
candidates act: N samples of one policy or N different teachers. Each candidate runs in its
own ``fork()`` of the workspace, continues to completion and is graded by running the tests.
Two candidates with different grades make a :class:`PreferencePair` whose prompt is the
shared history, ``chosen`` the higher-graded continuation and ``rejected`` the lower, with
``preference_source="execution"``. A flagged candidate is never ``chosen``.

The first decision point is the task's opening (so the N candidates are N full samples, which
also give the task's solve rate); further points are turns of the first sample, forked while
it runs. The divergence rate is the share of decision points where the candidates' first
canonical actions were not all the same.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from swemill.agent.env import TaskEnv
from swemill.agent.harness import Limits, collect_trajectory, failed_trajectory, task_messages
from swemill.core.errors import SwemillError
from swemill.core.records import Message, PreferencePair, Task, Trajectory
from swemill.policies.budget import Budget
from swemill.policies.policy import Policy

__all__ = ["DecisionPoint", "SampleResult", "sample_task", "pairs_at", "first_action_key"]


@dataclass(slots=True)
class DecisionPoint:
    turn: int
    prefix: list[Message]
    candidates: list[Trajectory] = field(default_factory=list)

    @property
    def diverged(self) -> bool:
        keys = {first_action_key(c, len(self.prefix)) for c in self.candidates}
        return len(keys) > 1


@dataclass(slots=True)
class SampleResult:
    samples: list[Trajectory]
    """The N full samples (decision point 0), in policy order."""
    branches: list[Trajectory]
    """Candidates continued from later decision points of the first sample."""
    pairs: list[PreferencePair]
    points: list[DecisionPoint]

    @property
    def trajectories(self) -> list[Trajectory]:
        return self.samples + self.branches

    @property
    def compared(self) -> int:
        """Decision points with two candidates or more (the divergence rate's denominator)."""
        return sum(1 for p in self.points if len(p.candidates) >= 2)

    @property
    def divergent(self) -> int:
        return sum(1 for p in self.points if p.diverged)

    @property
    def solve_rate(self) -> float | None:
        graded = [t for t in self.samples if t.outcome is not None]
        if not graded:
            return None
        return sum(1 for t in graded if t.outcome and t.outcome.resolved) / len(graded)


def first_action_key(traj: Trajectory, start: int) -> str:
    """The canonical form of the first assistant turn after ``start`` (all its calls)."""
    for m in traj.messages[start:]:
        if m.role == "assistant":
            calls = [c.canonical_key() for c in m.tool_calls]
            return "|".join(calls) if calls else "text:" + m.text.strip()
    return "none"


def _score(t: Trajectory) -> float | None:
    return None if t.outcome is None else t.outcome.grade


def pairs_at(point: DecisionPoint, task: Task, *, max_pairs: int = 6) -> list[PreferencePair]:
    """Every (higher, lower) pair of graded candidates, clean higher side, best gaps first."""
    graded = [c for c in point.candidates if _score(c) is not None and not c.error]
    out: list[tuple[float, Trajectory, Trajectory]] = []
    for a, b in combinations(graded, 2):
        hi, lo = (a, b) if (_score(a) or 0.0) > (_score(b) or 0.0) else (b, a)
        gap = (_score(hi) or 0.0) - (_score(lo) or 0.0)
        if gap > 0 and not hi.flags:
            out.append((gap, hi, lo))
    out.sort(key=lambda x: -x[0])
    n = len(point.prefix)
    pairs = []
    for _, hi, lo in out[:max_pairs]:
        pid = hashlib.sha256(f"{task.instance_id}|{point.turn}|{hi.trajectory_id}|"
                             f"{lo.trajectory_id}".encode()).hexdigest()[:24]
        pairs.append(PreferencePair(
            pair_id=pid, prompt=list(point.prefix), chosen=hi.messages[n:],
            rejected=lo.messages[n:], preference_source="execution",
            chosen_score=_score(hi), rejected_score=_score(lo), task_id=task.instance_id,
            state_id=f"{task.instance_id}@{point.turn}", synthetic=hi.synthetic or lo.synthetic,
            license_tier=task.license_tier,
            metadata={"decision_turn": point.turn, "chosen_trajectory": hi.trajectory_id,
                      "rejected_trajectory": lo.trajectory_id, "chosen_policy": hi.policy,
                      "rejected_policy": lo.policy, "chosen_flags": hi.flags,
                      "rejected_flags": lo.flags}))
    return pairs


def sample_task(env: TaskEnv, task: Task, policies: Sequence[Policy], limits: Limits,
                budget: Budget | None = None, *, branch_turns: Sequence[int] = (),
                on_step: Callable[[Trajectory], None] | None = None, id_prefix: str = "",
                max_pairs: int = 6) -> SampleResult:
    """Sample ``policies`` on ``task`` (see the module docstring). ``env`` is reset here and
    closed before returning; a task whose workspace cannot be built gives N errored samples."""
    prefix_id = id_prefix or task.instance_id
    try:
        env.reset(task)
    except SwemillError as exc:
        env.close()
        samples = [failed_trajectory(task, p.spec, f"workspace: {exc}", f"{prefix_id}#s{i}",
                                     synthetic=p.synthetic)
                   for i, p in enumerate(policies)]
        for t in samples:
            if on_step is not None:
                on_step(t)
        return SampleResult(samples, [], [], [])
    try:
        opening = task_messages(task, env.workdir, limits.show_tests)
        start = DecisionPoint(0, opening)
        later: dict[int, tuple[TaskEnv, list[Message]]] = {}
        wanted = {t for t in branch_turns if t > 0}

        def fork_here(turn: int, messages: list[Message], cand: TaskEnv) -> None:
            if turn in wanted and turn not in later:
                later[turn] = (cand.fork(), list(messages))

        for i, policy in enumerate(policies):
            cand = env.fork()
            hook = (lambda t, m, c=cand: fork_here(t, m, c)) if i == 0 and wanted else None
            start.candidates.append(collect_trajectory(
                cand, task, policy, limits, budget, on_step, prefix=opening, on_turn=hook,
                trajectory_id=f"{prefix_id}#s{i}", metadata={"sample": i}))
        points = [start]
        branches: list[Trajectory] = []
        for turn, (state, prefix) in sorted(later.items()):
            point = DecisionPoint(turn, prefix, [start.candidates[0]])
            for i, policy in enumerate(policies[1:], 1):
                t = collect_trajectory(state.fork(), task, policy, limits, budget, on_step,
                                       prefix=prefix, trajectory_id=f"{prefix_id}#b{turn}.{i}",
                                       metadata={"sample": i, "decision_turn": turn})
                t.parent_id, t.branch_point = start.candidates[0].trajectory_id, len(prefix)
                point.candidates.append(t)
                branches.append(t)
            points.append(point)
        pairs = [p for point in points for p in pairs_at(point, task, max_pairs=max_pairs)]
        return SampleResult(start.candidates, branches, pairs, points)
    finally:
        env.close()
