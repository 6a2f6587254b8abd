"""The audit: check accepted tasks the slow, obvious way.

Each audited task's snapshot is unpacked into a fresh sandbox and the *whole* suite is run
cold (``suite.run_tests``: a new interpreter, swemill's own reporter), first on the broken
tree, then with the golden patch applied. Every FAIL_TO_PASS test must fail and then pass,
every PASS_TO_PASS test must pass both times. Then the fixed tree's FAIL_TO_PASS and
PASS_TO_PASS run as a grading runs them (``isolated``: autoloading off, the guard and the
seal), and must be trusted and pass: validation runs are not guarded, so a suite the guard
cannot trust would otherwise give tasks no policy can be rewarded on. This is what makes
the validator's shortcuts (selected tests, the warm server, the workspace instead of the
scrubbed snapshot) checkable.

It is on by default (:func:`audit_size`): every task of a run that wrote fewer than 20, else
a seeded 10% sample (at least 2). One disagreement means a shortcut was wrong for this
repository, so the rest of the run's tasks are then audited too (:func:`run_audit`); the
validator removes every task that disagreed.
"""

from __future__ import annotations

import math
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field

from swemill.core.git import run_git
from swemill.core.progress import Progress
from swemill.core.records import Baseline, Golden, Task
from swemill.repo.envbuild import RepoEnv
from swemill.sandbox import open_sandbox
from swemill.sandbox.leftovers import scratch_dir
from swemill.store import Store
from swemill.suite.runner import run_tests
from swemill.suite.timeouts import adaptive_timeout, busy_factor
from swemill.synth.patches import patch_files
from swemill.validate.snapshot import unpack_tree

__all__ = ["AuditFinding", "audit_size", "audit_task", "run_audit", "AUDIT_ALL_BELOW"]

_FAIL = ("failed", "error")
_UNGRADED = "the grader's run of the fixed tree does not pass"
AUDIT_ALL_BELOW = 20
"""Runs that wrote fewer tasks than this have every task audited by default."""


@dataclass(slots=True)
class AuditFinding:
    instance_id: str
    false_f2p: list[str] = field(default_factory=list)
    """Claimed FAIL_TO_PASS but passing on the broken tree, or not passing once fixed."""
    false_p2p: list[str] = field(default_factory=list)
    """Claimed PASS_TO_PASS but not passing on the broken or the fixed tree."""
    problem: str = ""
    head_failed: list[str] = field(default_factory=list)
    """Tests of the lists that did not pass on the fixed tree where that tree is the head's
    (the baseline passed them there): flaky, whatever the task."""

    @property
    def ok(self) -> bool:
        return not (self.false_f2p or self.false_p2p or self.problem)

    @property
    def flaky_only(self) -> bool:
        """Every disagreement is a test that did not pass on the head tree: the run takes the
        test out of every list (``validator._unflake``) rather than this task alone."""
        held = set(self.head_failed)
        return bool(held) and set(self.false_f2p) <= held and set(self.false_p2p) <= held \
            and (not self.problem or self.problem.startswith(_UNGRADED))

    def describe(self) -> str:
        """One line: what disagreed (empty when nothing did)."""
        parts = [self.problem] if self.problem else []
        for name, tests in (("FAIL_TO_PASS", self.false_f2p), ("PASS_TO_PASS", self.false_p2p)):
            if tests:
                more = f" (+{len(tests) - 2} more)" if len(tests) > 2 else ""
                parts.append(f"false {name} {', '.join(tests[:2])}{more}")
        return "; ".join(parts)


def audit_size(n_tasks: int, requested: int | None) -> int:
    """How many of ``n_tasks`` to audit: ``requested`` when given (0: none), else every task
    below :data:`AUDIT_ALL_BELOW`, else 10% (at least 2)."""
    if requested is not None:
        return min(requested, n_tasks)
    if n_tasks < AUDIT_ALL_BELOW:
        return n_tasks
    return min(n_tasks, max(2, math.ceil(n_tasks / 10)))


def audit_timeout(baseline: Baseline, busy: float | None = None) -> float:
    """A cold whole-suite run's budget: twice the baseline's, times how busy the machine is
    (:func:`~swemill.suite.timeouts.busy_factor`, default now). At a load of 15 on 2 CPUs
    marshmallow 3.22.0's audit runs timed out and the audit removed both its written tasks
    as untrusted, with nothing wrong in their lists."""
    return 2 * adaptive_timeout(baseline, None) * (busy_factor() if busy is None else busy)


def audit_task(store: Store, task: Task, golden: Golden, env: RepoEnv, baseline: Baseline, *,
               backend: str = "auto") -> AuditFinding:
    """Full suite, cold, on the stored snapshot; then again with the golden patch."""
    finding = AuditFinding(task.instance_id)
    tmp = scratch_dir("audit")
    timeout = audit_timeout(baseline)
    try:
        ws = unpack_tree(store.get_bytes(task.snapshot), tmp / "ws")
        env.lay_generated(ws)
        with open_sandbox(ws, backend=backend, binds=env.binds()) as sb:
            # outcomes are all it reads: one line per failure (--tb=line), not pytest's
            # tracebacks (pyparsing 3.1.4, a tree failing 358 tests of its 8,000-line test
            # module: 235 s formatted, 22 s brief; a combine task's audit timed out on it)
            broken = run_tests(sb, env, None, timeout=timeout, brief=True)
            proc = run_git(["apply", "--whitespace=nowarn", "-"], ws, input=golden.golden_patch)
            if proc.returncode != 0:
                finding.problem = f"golden patch does not apply: {proc.stderr.strip()[:200]}"
                return finding
            fixed_tree = {rel: ((ws / rel).read_bytes() if (ws / rel).is_file() else None)
                          for rel in patch_files(golden.golden_patch)}
            fixed = run_tests(sb, env, None, timeout=timeout, brief=True)
            # the fixed tree as the grader runs it: a suite the grader's guard cannot trust,
            # or that its isolation changes, gives a task no policy could be rewarded on
            graded = run_tests(sb, env, [*task.FAIL_TO_PASS, *task.PASS_TO_PASS],
                               timeout=timeout, isolated=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for name, run in (("broken", broken), ("fixed", fixed), ("graded fixed", graded)):
        if not run.trustworthy:
            finding.problem = f"{name} run cannot be trusted: {run.problem}"
            return finding
    finding.false_f2p = sorted(
        t for t in task.FAIL_TO_PASS
        if broken.status(t) not in _FAIL or fixed.status(t) != "passed")
    finding.false_p2p = sorted(
        t for t in task.PASS_TO_PASS
        if broken.status(t) != "passed" or fixed.status(t) != "passed")
    ungraded = [t for t in (*task.FAIL_TO_PASS, *task.PASS_TO_PASS)
                if graded.status(t) != "passed"]
    if ungraded and finding.ok:  # the lists hold, but not as the grader runs them
        more = f" (+{len(ungraded) - 1} more)" if len(ungraded) > 1 else ""
        finding.problem = f"{_UNGRADED} {ungraded[0]}{more}"
    if _fixed_is_head(task, fixed_tree, env, baseline):
        finding.head_failed = sorted(
            t for t in (*task.FAIL_TO_PASS, *task.PASS_TO_PASS)
            if baseline.outcomes.get(t) == "passed"
            and (fixed.status(t) != "passed" or graded.status(t) != "passed"))
    return finding


def _fixed_is_head(task: Task, fixed: dict[str, bytes | None], env: RepoEnv,
                   baseline: Baseline) -> bool:
    """Whether the fixed tree is the head tree the baseline ran: the head commit, and every
    file the golden patch touches as the head has it (``fixed``: those files' bytes, None
    for a file the patch deleted)."""
    if task.base_commit != baseline.commit or not fixed:
        return False
    for rel, data in fixed.items():
        head = env.source_path / rel
        if (head.read_bytes() if head.is_file() else None) != data:
            return False
    return True


def run_audit(store: Store, pairs: list[tuple[Task, Golden]], k: int,
              env: RepoEnv | Callable[[Task], RepoEnv], baseline: Baseline, *, seed: int = 0,
              backend: str = "auto", say: Progress | None = None
              ) -> list[AuditFinding]:
    """Audit a seeded sample of ``k`` of ``pairs``; after a disagreement, all the others too.
    ``env``: the environment every task runs in, or the one each task ran in (a task at an
    older commit may have had its own). Returns one finding per audited task, in the order
    audited."""
    tell = say or (lambda _label, _done, _total: None)
    env_of = env if callable(env) else (lambda _task: env)
    ordered = sorted(pairs, key=lambda p: p[0].instance_id)
    chosen = random.Random(f"audit:{seed}").sample(ordered, min(k, len(ordered)))
    findings: list[AuditFinding] = []
    todo = list(chosen)
    while todo:
        task, golden = todo.pop(0)
        tell(f"auditing {task.instance_id}", len(findings), len(findings) + len(todo) + 1)
        findings.append(audit_task(store, task, golden, env_of(task), baseline,
                                   backend=backend))
        if not findings[-1].ok and len(chosen) < len(ordered):
            seen = {p[0].instance_id for p in chosen}
            todo += [p for p in ordered if p[0].instance_id not in seen]
            chosen = ordered
    return findings
