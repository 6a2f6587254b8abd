"""The ``candidates/`` table and the drop summary a user reads at the end of a run.

:func:`candidate_records` turns a strategy's checked candidates into rows of
``candidates/run_id=<id>/`` (one shard per source and strategy, beside its tasks);
:func:`summarize` reads such rows back and names the top drop reasons, each with an example
detail line (:mod:`swemill.validate.explain`), and, when one reason took over half of the
candidates, its likely cause and the fix.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from swemill.core.records import CandidateRecord, Drop
from swemill.store import Store
from swemill.validate.check import Checked
from swemill.validate.emit import instance_id_of
from swemill.validate.explain import MISSING_MODULE, one_line

__all__ = ["CANDIDATES_STAGE", "candidate_records", "refused_records", "DropSummary",
           "summarize", "run_summary"]

CANDIDATES_STAGE = "candidates"
Verdict = Literal["written", "valid", "dropped"]
_WARNING = re.compile(r"\b([A-Za-z_][\w.]*Warning)\b")


def candidate_records(checked: Sequence[Checked], written: Iterable[str], repo: str
                      ) -> list[CandidateRecord]:
    """The ``candidates/`` rows of one strategy's counted candidates, in candidate order;
    ``written``: the instance ids that became tasks."""
    done = set(written)
    rows = []
    for i, c in enumerate(checked):
        cand, v = c.candidate, c.verdict
        iid = instance_id_of(cand.repo or repo, cand.candidate_id)
        verdict: Verdict = ("written" if iid in done else "valid") if v.accepted else "dropped"
        first = cand.changed[0] if cand.changed else None
        rows.append(CandidateRecord(
            candidate_id=cand.candidate_id, instance_id=iid, repo=cand.repo or repo,
            strategy=cand.strategy, position=i, file=first.file if first else "",
            symbol=first.qualname if first else "",
            targets=[f"{s.file}::{s.qualname}" for s in cand.changed], scope=cand.scope,
            base_commit=c.base_commit, verdict=verdict, reason=v.reason,
            detail=one_line(v.detail), selected_tests=c.selected,
            fail_to_pass=len(v.fail_to_pass), pass_to_pass=len(v.pass_to_pass),
            wall_s=round(c.wall_s, 3), env_key=c.env_key))
    return rows


def refused_records(refused: Sequence[Drop], strategy: str, repo: str, commit: str,
                    start: int) -> list[CandidateRecord]:
    """Dropped rows for the candidates a strategy made and refused before validation (a
    model's invalid answer, :attr:`SynthReport.refused`): ``item_id`` is ``file::symbol``,
    the position follows the validated ones."""
    rows = []
    for i, d in enumerate(refused):
        file, _, symbol = d.item_id.rpartition("::")
        cid = f"{strategy}-refused-{start + i}"
        rows.append(CandidateRecord(
            candidate_id=cid, instance_id=instance_id_of(repo, cid), repo=repo,
            strategy=strategy, position=start + i, file=file, symbol=symbol,  # type: ignore[arg-type]
            targets=[d.item_id] if file else [], base_commit=commit, verdict="dropped",
            reason=d.reason, detail=one_line(d.detail)))
    return rows


@dataclass(slots=True)
class DropSummary:
    """Top drop reasons of a set of candidates, and advice when one reason dominates."""

    candidates: int = 0
    dropped: int = 0
    top: list[tuple[str, int, str]] = field(default_factory=list)
    """``(reason, count, an example detail)``, most frequent first."""
    advice: str | None = None
    """Likely cause and fix, when one reason took over half of the candidates."""

    def lines(self, limit: int = 3) -> list[str]:
        """What a command prints after its table."""
        if not self.candidates:
            return ["no candidate was validated"]
        if not self.dropped:
            return [f"no drops among {self.candidates} candidate(s)"]
        head = ", ".join(f"{r} {n}" for r, n, _ in self.top[:limit])
        out = [f"top drop reasons ({self.dropped} of {self.candidates} candidates dropped): "
               f"{head}"]
        shown = self.top[1:limit] if self.advice else self.top[:limit]  # advice quotes it
        out += [f"  {r}: {d}" for r, _, d in shown if d]
        if self.advice:
            out.append(self.advice)
        return out

    def to_dict(self) -> dict[str, object]:
        return {"candidates": self.candidates, "dropped": self.dropped,
                "top": [{"reason": r, "count": n, "example": d} for r, n, d in self.top],
                "advice": self.advice}


def summarize(rows: Iterable[CandidateRecord]) -> DropSummary:
    """The drop summary of ``rows`` (a run's, a source's or a strategy's candidates)."""
    rows = list(rows)
    dropped = [r for r in rows if r.verdict == "dropped"]
    counts = Counter(r.reason for r in dropped)
    top = []
    for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        details = Counter(r.detail for r in dropped if r.reason == reason and r.detail)
        top.append((reason, n, details.most_common(1)[0][0] if details else ""))
    summary = DropSummary(len(rows), len(dropped), top)
    if top and 2 * top[0][1] > len(rows):
        reason = top[0][0]
        summary.advice = _advice(reason, [r for r in dropped if r.reason == reason], len(rows))
    return summary


def run_summary(store: Store, run_id: str) -> DropSummary | None:
    """The drop summary of every candidate of ``run_id`` in ``store``; None when the run has
    no ``candidates/`` table (no tasks stage yet, or a run made before it existed)."""
    if not store.complete_shards(CANDIDATES_STAGE, run_id):
        return None
    return summarize(store.read_records(CANDIDATES_STAGE, run_id, CandidateRecord))


def _advice(reason: str, rows: list[CandidateRecord], total: int) -> str:
    n = len(rows)
    details = Counter(r.detail for r in rows if r.detail)
    common = details.most_common(1)[0][0] if details else ""
    lead = f"{n} of {total} candidates"
    if reason == "import_failed":
        missing = Counter(m.group(1) for r in rows if (m := MISSING_MODULE.search(r.detail)))
        if missing:
            name, _ = missing.most_common(1)[0]
            where = next(r.detail.split(":", 1)[0] for r in rows if f"'{name}'" in r.detail)
            return (f"{lead} failed to import: {where} needs `{name.split('.')[0]}`, which "
                    "the environment lacks; if it is a test dependency, add it to an install "
                    "recipe (packages) and pass it with --recipe")
        return (f"{lead} failed to import ({common or 'a test module did not collect'}); "
                "a test module that fails at the baseline too needs a dependency or setting "
                "the environment lacks: fix it with an install recipe (--recipe)")
    if reason == "crashed":
        return f"{lead} crashed: {common}; {_crash_fix(common)}"
    return f"{lead} were dropped as {reason}: {_FIXES.get(reason, common or 'see candidates/')}" \
        + (f" (e.g. {common})" if common and reason in _FIXES else "")


def _crash_fix(detail: str) -> str:
    if "pytest exit 4" in detail:
        if warning := _WARNING.search(detail):
            return ("the test configuration turns a warning into an error (filterwarnings = "
                    f"error); add `-W ignore::{warning.group(1)}` to the recipe's pytest_args "
                    "(--recipe)")
        return ("pytest refused its command line or the project's configuration (a missing "
                "plugin for an option in addopts?); give pytest_args in a recipe (--recipe)")
    if "pytest exit 5" in detail:
        return ("the suite collected no tests on the broken trees: test paths or the "
                "configuration differ from the baseline's (check testpaths and --recipe)")
    if "pytest exit 3" in detail:
        return "pytest failed internally: a plugin or conftest hook raised (see the detail)"
    if "SIGKILL" in detail:
        return "the sandbox's memory limit killed the tests: raise TasksConfig.memory_mb"
    return "the code under test ends the test process (os._exit, a signal, a C extension)"


_FIXES = {
    "timeout": "the tests hang or run far slower than at the baseline; a busy machine "
               "stretches runs too (fewer --workers)",
    "baseline_failed": "the tests do not run at the candidates' own commits; older commits "
                       "need dependencies the head's environment lacks (pin them in a recipe, "
                       "--recipe) or leave pr-mirror out (--strategies procedural)",
    "base_patch_failed": "the candidates' base states do not apply to the source's tree",
    "patch_failed": "the bug patches no longer apply to the source's tree",
    "no_fail_to_pass": "no test noticed the bug: the suite misses most mutations of the "
                       "functions it covers; more candidates (--max-tasks) or other strategies "
                       "may find some",
    "no_pass_to_pass": "every passing test failed on the broken trees: the suite is small or "
                       "its tests share one fixture the bugs break",
    "not_solvable": "the fixed trees did not pass every test again twice: flaky or "
                    "order-dependent tests",
    "flaky_at_head": "their FAIL_TO_PASS tests did not pass on the unbroken tree (another "
                     "candidate's golden run, or the audit): flaky tests (timing, processes) "
                     "the baseline's runs happened to pass",
    "untrusted_log": "pytest's report and its exit code disagreed: a plugin or conftest "
                     "changes the exit status",
    "golden_failed": "the fixing patches did not apply to the broken trees",
    "runner_plugin": "the bugs are in modules the suite loads as pytest plugins "
                     "(pytest_plugins, addopts -p): the grader never takes a change to those",
    "rewrite_passes_tests": "the model's rewrites behave like the originals as far as the "
                            "tests see: they are correct, not bugs (lm-modify makes changes on "
                            "purpose)",
    "answer_bad_diff": "the bug writer's diffs do not match the function it was shown; a "
                       "model that answers with whole functions does better",
    "answer_outside_function": "the bug writer changes more than the one function (imports, "
                               "helpers): a stronger model, or another prompt version",
    "answer_no_op": "the bug writer answers with the function unchanged",
    "answer_truncated": "the answers reach the token limit (TasksConfig.bug_writer_max_tokens)",
    "call_failed": "the bug writer's endpoint refuses or fails the calls: check the spec, "
                   "the key and the URL",
}
