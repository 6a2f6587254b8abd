"""Grading a submitted workspace: a pure function of the judged test run and the change set.

The grade is the correctness term: the fraction of FAIL_TO_PASS tests that pass (the others
are masked out). A PASS_TO_PASS test that no longer passes is a regression; by default
(``regression="zero"``) it makes the grade 0, with ``"keep"`` it is only recorded. A run whose
report and exit code disagree (:attr:`TestRunReport.trustworthy`) grades 0: a log that prints
fake ``PASSED`` lines, or a process that exits early, earns nothing.

Behaviour signals ride along for a composite reward (correctness + succinctness + style); the
weights are configurable and the grade itself never changes with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from swemill.core.records import Outcome, Task
from swemill.suite.verdict import TestRunReport

__all__ = ["RewardWeights", "RegressionPolicy", "grade_run", "composite_reward", "grading_log"]

RegressionPolicy = Literal["zero", "keep"]


@dataclass(frozen=True, slots=True)
class RewardWeights:
    """``reward = correctness * grade - diff * lines/100 - turns * turns - tokens * tokens/1000
    - lint * findings introduced``. Only correctness is on by default."""

    correctness: float = 1.0
    diff: float = 0.0
    """Penalty per 100 changed lines (added + removed)."""
    turns: float = 0.0
    """Penalty per assistant turn."""
    tokens: float = 0.0
    """Penalty per 1000 tokens (input + output)."""
    lint: float = 0.0
    """Penalty per lint finding the change introduced."""


def composite_reward(grade: float, signals: dict[str, float], w: RewardWeights) -> float:
    return (w.correctness * grade
            - w.diff * signals.get("diff_lines", 0.0) / 100
            - w.turns * signals.get("turns", 0.0)
            - w.tokens * signals.get("tokens", 0.0) / 1000
            - w.lint * max(0.0, signals.get("lint_new", 0.0)))


def grading_log(report: TestRunReport, not_carried: list[str], tests: list[str]) -> str:
    """A readable, complete record of the grading run (kept with the trajectory)."""
    lines = ["not carried from the workspace (graded as in the pristine snapshot): "
             + ("; ".join(not_carried) or "nothing"),
             f"pytest exit code: {report.exit_code}; wall {report.wall_s:.2f}s; "
             f"trustworthy: {report.trustworthy}" + (f" ({report.problem})" if report.problem
                                                     else "")]
    lines += [f"collection error {where}: {msg}" for where, msg in report.collect_errors.items()]
    for nodeid in tests:
        result = report.results.get(nodeid)
        outcome = report.status(nodeid)
        msg = f" - {result.message}" if result is not None and result.message else ""
        lines.append(f"{outcome.upper():8} {nodeid}{msg}")
    return "\n".join(lines) + "\n"


def grade_run(task: Task, report: TestRunReport, *, not_carried: list[str],
              regression: RegressionPolicy = "zero",
              signals: dict[str, float] | None = None,
              weights: RewardWeights | None = None) -> Outcome:
    """The :class:`Outcome` of one grading run of ``task``'s FAIL_TO_PASS + PASS_TO_PASS."""
    f2p = {t: report.status(t) for t in task.FAIL_TO_PASS}
    p2p = {t: report.status(t) for t in task.PASS_TO_PASS}
    fixed = sum(1 for s in f2p.values() if s == "passed")
    fraction = fixed / len(f2p) if f2p else 0.0
    broke = any(s != "passed" for s in p2p.values())
    grade = 0.0 if not report.trustworthy else fraction
    if broke and regression == "zero":
        grade = 0.0
    signals = dict(signals or {})
    signals["f2p_fraction"] = fraction if report.trustworthy else 0.0
    signals["reward"] = composite_reward(grade, signals, weights or RewardWeights())
    return Outcome(
        grade=grade,
        resolved=report.trustworthy and fraction == 1.0 and not broke,
        fail_to_pass=dict(f2p),
        pass_to_pass=dict(p2p),
        regression=broke,
        exit_code=report.exit_code,
        log=grading_log(report, not_carried, [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]),
        signals=signals,
    )
