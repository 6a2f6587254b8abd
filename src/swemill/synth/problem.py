"""Problem statements written from the failing tests alone.

The default writer sees only test ids and what the failures report (assertion text, the
exception line). It never sees the bug patch, the golden patch or the changed code, so it
cannot leak them; it also drops traceback lines that point into the source (``file.py:NN``,
pytest's ``>`` source excerpts), since where the bug lives is the policy's job to find. A
``NameError`` / ``UnboundLocalError`` names the very variable an edit removed or moved, so
its line is reworded ("a name is not defined in <function>") without the name.

A model can write the statement instead through :class:`PolicyProblemWriter`, which hands it
the same evidence and nothing more, and spends from the run's budget. Either writer returns a
:class:`Statement`: the text, who wrote it, and why the template stood in for the model.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from swemill.core.errors import BudgetExceeded, PolicyError
from swemill.core.records import Message, TestResult, TextBlock
from swemill.policies.budget import Budget, call_with_budget
from swemill.policies.policy import TRUNCATED, Policy

__all__ = [
    "FALLBACK_REASONS",
    "FailingTest",
    "PolicyProblemWriter",
    "ProblemWriter",
    "Statement",
    "TemplateProblemWriter",
    "evidence",
    "write_problem_statement",
]


@dataclass(frozen=True, slots=True)
class FailingTest:
    """A failing test as the writer sees it: its node id and its failure text."""

    nodeid: str
    message: str = ""


Failure = FailingTest | TestResult | str

_LOCATION = re.compile(r"\.pyx?:\d+|^\s*File \"|^\s*>|^_{3,}|^\s*(def|class) ")
_DIFF = re.compile(r"^(diff --git |@@ |\+\+\+ |--- |index [0-9a-f]+\.\.)")
_NAME_ERRORS = re.compile(r"\b(NameError|UnboundLocalError)\b")
_REWORDED = {"NameError": "NameError: a name is not defined",
             "UnboundLocalError": "UnboundLocalError: a local variable is read before it is "
                                  "assigned"}

_OPENINGS = (
    "Some behaviour of {repo} is broken: {n} test{s} that should pass now fail{v}.",
    "{n} test{s} in {repo} fail{v}, though the behaviour they check is meant to work.",
    "A regression in {repo} makes {n} test{s} fail.",
)


def _as_failure(item: Failure) -> FailingTest:
    if isinstance(item, FailingTest):
        return item
    if isinstance(item, TestResult):
        return FailingTest(item.nodeid, item.message)
    return FailingTest(str(item))


def _unnamed(line: str, where: str) -> str:
    """``line`` without the variable a ``NameError`` / ``UnboundLocalError`` names."""
    m = _NAME_ERRORS.search(line)
    if not m:
        return line
    return _REWORDED[m.group(1)] + (f" in {where}" if where else "")


def evidence(message: str, max_lines: int = 8, width: int = 200, where: str = "") -> list[str]:
    """The lines of a failure text worth showing: what failed, not where in the source.

    A full pytest report keeps only its ``E`` lines; a short crash message (what swemill's
    reporter records) keeps every line but those pointing into files or quoting a diff.
    A name error's line loses its name (``where``: the function it is said to be in).
    """
    lines = message.splitlines()
    picked = [ln[1:].strip() for ln in lines if ln.startswith("E ") or ln == "E"]
    if not picked:
        picked = [ln.strip() for ln in lines if not _LOCATION.search(ln)]
    out = [_unnamed(ln, where)[:width] for ln in picked
           if ln and not _LOCATION.search(ln) and not _DIFF.match(ln)]
    return list(dict.fromkeys(out))[:max_lines]


def write_problem_statement(
    failures: Sequence[Failure], repo: str, *, max_tests: int = 8, max_lines: int = 8,
    where: str = "",
) -> str:
    """A deterministic issue-style text from failing test ids and their failure messages.
    ``where``: the function a name error is said to be in (none named when empty)."""
    tests = sorted({f.nodeid: f for f in map(_as_failure, failures)}.values(),
                   key=lambda f: f.nodeid)
    if not tests:
        return f"Something in {repo} is broken. Find the fault and fix it."
    n = len(tests)
    pick = int(hashlib.sha256("\n".join(t.nodeid for t in tests).encode()).hexdigest(), 16)
    opening = _OPENINGS[pick % len(_OPENINGS)].format(
        repo=repo, n=n, s="" if n == 1 else "s", v="s" if n == 1 else ""
    )
    parts = [opening, "", "Failing tests:"]
    parts += [f"- {t.nodeid}" for t in tests[:max_tests]]
    if n > max_tests:
        parts.append(f"- ... and {n - max_tests} more")
    shown = [(t, evidence(t.message, max_lines, where=where)) for t in tests[:max_tests]]
    if any(ev for _, ev in shown):
        parts += ["", "What the failures report:"]
        for t, ev in shown:
            if ev:
                parts += ["", f"{t.nodeid}:", *(f"    {ln}" for ln in ev)]
    parts += [
        "",
        "Fix the library code so that these tests pass. Do not change the tests; "
        "behaviour that other tests check must stay as it is.",
    ]
    return "\n".join(parts) + "\n"


class ProblemWriter(Protocol):
    """Writes the statement a policy sees, from the failing tests only."""

    def write(self, failures: Sequence[Failure], repo: str, where: str = "") -> str: ...


class TemplateProblemWriter:
    """The default: :func:`write_problem_statement`."""

    def write(self, failures: Sequence[Failure], repo: str, where: str = "") -> str:
        return write_problem_statement(failures, repo, where=where)

    def statement(self, failures: Sequence[Failure], repo: str, where: str = "") -> Statement:
        return Statement(self.write(failures, repo, where))


_SYSTEM = (
    "You write GitHub issues. Describe the observed misbehaviour as a user would, from the "
    "failing tests and their messages below. Do not guess at the fix, do not quote code, do "
    "not invent file names. Plain prose, under 200 words."
)

FALLBACK_REASONS = ("over_budget", "call_failed", "empty", "truncated", "leak")
"""Why a model's statement was replaced by the template: the ``--max-usd`` budget could not
hold the call, the call failed, the answer was empty or cut at the token limit (here), or the
text gave the edit away (decided where the task is written, :mod:`swemill.synth.leaks`)."""


@dataclass(frozen=True, slots=True)
class Statement:
    """A statement and who wrote it: ``by`` is ``template`` or the model's spec; ``fallback``
    says why the template stands in for a model's text (:data:`FALLBACK_REASONS`)."""

    text: str
    by: str = "template"
    fallback: str | None = None


class PolicyProblemWriter:
    """A model (any :class:`~swemill.policies.policy.Policy`) writes the statement.

    It is shown the template's text, i.e. the same evidence and nothing more. Each call is
    reserved against ``budget`` (the run's ``--max-usd``, shared with the bug writer) at its
    worst case and settled at its real cost, like every model call of a run.

    Falls back to the template when the budget cannot hold the call, the call fails, or the
    model answers nothing or is cut at the token limit; ``fallbacks`` counts how often, per
    reason. What it answers is checked where the task is written, with the patches at hand
    (:mod:`swemill.synth.leaks`: a quoted changed line, a name only the edit contains, a
    diff), and replaced by the template there if it leaks.
    """

    def __init__(self, policy: Policy, fallback: ProblemWriter | None = None,
                 budget: Budget | None = None) -> None:
        self.policy = policy
        self.fallback = fallback or TemplateProblemWriter()
        self.budget = budget or Budget(name="issue-writer")
        self.fallbacks: Counter[str] = Counter()
        self.calls = 0
        self.cost_usd = 0.0
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        return str(getattr(self.policy, "model", self.policy.name))

    def prompt(self, failures: Sequence[Failure], repo: str, where: str = "") -> list[Message]:
        facts = write_problem_statement(failures, repo, where=where)
        return [
            Message(role="system", content=[TextBlock(text=_SYSTEM)]),
            Message(role="user", content=[TextBlock(text=facts)]),
        ]

    def statement(self, failures: Sequence[Failure], repo: str, where: str = "") -> Statement:
        """The model's statement, or the template's with the reason it took over."""
        try:
            reply = call_with_budget(self.policy, self.budget, self.prompt(failures, repo, where),
                                     [])
        except BudgetExceeded:  # no call was made
            return self._fell_back("over_budget", failures, repo, where)
        except PolicyError:
            with self._lock:
                self.calls += 1
            return self._fell_back("call_failed", failures, repo, where)
        with self._lock:
            self.calls += 1
            self.cost_usd += reply.usage.cost_usd
        text = reply.message.text.strip()
        if not text:
            return self._fell_back("empty", failures, repo, where)
        if reply.stop_reason in TRUNCATED:
            return self._fell_back("truncated", failures, repo, where)
        return Statement(text + "\n", by=self.policy.spec)

    def write(self, failures: Sequence[Failure], repo: str, where: str = "") -> str:
        return self.statement(failures, repo, where).text

    def _fell_back(self, reason: str, failures: Sequence[Failure], repo: str,
                   where: str) -> Statement:
        with self._lock:
            self.fallbacks[reason] += 1
        return Statement(self.fallback.write(failures, repo, where), fallback=reason)

    def summary(self) -> dict[str, Any]:
        """What the manifest records of this writer (``metadata.issue_writer``)."""
        return {"spec": self.policy.spec, "model": self.model, "calls": self.calls,
                "cost_usd": round(self.cost_usd, 9), "budget": self.budget.summary()}
