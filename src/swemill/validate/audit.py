"""``--audit K``: check accepted tasks the slow, obvious way.

Each audited task's snapshot is unpacked into a fresh sandbox and the *whole* suite is run
cold (``testing.run_tests``: a new interpreter, swemill's own reporter), first on the broken
tree, then with the golden patch applied. Every FAIL_TO_PASS test must fail and then pass,
every PASS_TO_PASS test must pass both times. This is what makes the validator's shortcuts
(selected tests, inherited PASS_TO_PASS, the warm server) checkable.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field

from swemill.core.errors import ValidationError
from swemill.core.records import Baseline, Golden, Task
from swemill.repo.envbuild import RepoEnv
from swemill.sandbox import open_sandbox
from swemill.sandbox.leftovers import scratch_dir
from swemill.store import Store
from swemill.testing.runner import run_tests
from swemill.testing.timeouts import adaptive_timeout
from swemill.validate.snapshot import unpack_tree
from swemill.validate.worker import git_in

__all__ = ["AuditFinding", "audit_task", "audit_tasks"]

_FAIL = ("failed", "error")


@dataclass(slots=True)
class AuditFinding:
    instance_id: str
    false_f2p: list[str] = field(default_factory=list)
    """Claimed FAIL_TO_PASS but passing on the broken tree, or not passing once fixed."""
    false_p2p: list[str] = field(default_factory=list)
    """Claimed PASS_TO_PASS but not passing on the broken or the fixed tree."""
    problem: str = ""

    @property
    def ok(self) -> bool:
        return not (self.false_f2p or self.false_p2p or self.problem)


def audit_task(store: Store, task: Task, golden: Golden, env: RepoEnv, baseline: Baseline, *,
               backend: str = "auto") -> AuditFinding:
    """Full suite, cold, on the stored snapshot; then again with the golden patch."""
    finding = AuditFinding(task.instance_id)
    tmp = scratch_dir("audit")
    timeout = 2 * adaptive_timeout(baseline, None)
    try:
        ws = unpack_tree(store.get_bytes(task.snapshot), tmp / "ws")
        with open_sandbox(ws, backend=backend, binds=env.binds()) as sb:
            broken = run_tests(sb, env, None, timeout=timeout)
            proc = git_in(ws, "apply", "--whitespace=nowarn", "-", stdin=golden.golden_patch)
            if proc.returncode != 0:
                finding.problem = f"golden patch does not apply: {proc.stderr.strip()[:200]}"
                return finding
            fixed = run_tests(sb, env, None, timeout=timeout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for name, run in (("broken", broken), ("fixed", fixed)):
        if not run.trustworthy:
            finding.problem = f"{name} run cannot be trusted: {run.problem}"
            return finding
    finding.false_f2p = sorted(
        t for t in task.FAIL_TO_PASS
        if broken.status(t) not in _FAIL or fixed.status(t) != "passed")
    finding.false_p2p = sorted(
        t for t in task.PASS_TO_PASS
        if broken.status(t) != "passed" or fixed.status(t) != "passed")
    return finding


def audit_tasks(store: Store, pairs: list[tuple[Task, Golden]], env: RepoEnv,
                baseline: Baseline, *, backend: str = "auto") -> list[AuditFinding]:
    """Audit every pair; raise ValidationError naming the first disagreement."""
    findings = [audit_task(store, t, g, env, baseline, backend=backend) for t, g in pairs]
    bad = [f for f in findings if not f.ok]
    if bad:
        f = bad[0]
        what = f.problem or (f"false FAIL_TO_PASS {f.false_f2p[:3]}" if f.false_f2p
                             else f"false PASS_TO_PASS {f.false_p2p[:3]}")
        raise ValidationError(f"audit failed on {len(bad)} of {len(findings)} task(s); "
                              f"{f.instance_id}: {what}")
    return findings
