"""Bugs a model writes: the ``lm-modify`` and ``lm-rewrite`` strategies.

Both aim at the functions a passing test executes (the coverage map; every function without
one), in an order fixed by the seed, and ask a :class:`BugWriter` about one function per
call. ``lm-modify`` shows the function and its module and asks for a subtle, plausible change
of behaviour; ``lm-rewrite`` takes the body out (signature and docstring stay) and asks for
it back, so what comes back differs from the original where the model guessed otherwise. The
prompts are data (:mod:`swemill.synth.bug_prompts`); an answer becomes a candidate only if
:func:`~swemill.synth.bug_answer.read_answer` accepts it, else it is refused under a named
reason and becomes a dropped row of ``candidates/``. A rewrite whose every selected test
passes is dropped by validation as ``rewrite_passes_tests`` (no bug).

Calls run ``BugWriter.workers`` at a time, ahead of validation, each reserved against the
run's :class:`~swemill.policies.budget.Budget` and settled at its real cost. A reservation
refused while other calls are in flight (their worst cases hold the money) is tried again
when one settles, with fewer calls at once; refused with none in flight, the budget is spent:
no further call starts and the strategy ends with what it has. Every function asked about
counts against the strategy's ``max_candidates``.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from swemill.core.errors import BudgetExceeded, ConfigError, PolicyError
from swemill.core.records import Candidate, ChangedSymbol, Message, Usage
from swemill.policies.budget import Budget, call_with_budget
from swemill.policies.policy import TRUNCATED, Policy, PolicyReply, one_line
from swemill.synth.bug_answer import (
    AnswerRefused,
    FunctionSpan,
    function_spans,
    read_answer,
    stub_of,
)
from swemill.synth.bug_prompts import PROMPTS, BugPrompt, messages_for
from swemill.synth.patches import file_diff
from swemill.synth.strategy import (
    RepoView,
    SynthReport,
    candidate_id,
    python_sources,
    tests_by_symbol,
)

__all__ = ["BugWriter", "LmModifyStrategy", "LmRewriteStrategy"]

MAX_FAILED_IN_A_ROW = 5
"""Calls that fail one after another before the strategy stops asking (an endpoint down)."""


class BugWriter:
    """The model that writes bugs, the run's budget it spends from, and what it spent."""

    def __init__(self, policy: Policy, budget: Budget | None = None, workers: int = 8) -> None:
        self.policy = policy
        self.budget = budget or Budget(name="bug-writer")
        self.workers = max(1, workers)
        self.calls = 0
        self.cost_usd = 0.0
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        return str(getattr(self.policy, "model", self.policy.name))

    def ask(self, messages: list[Message]) -> PolicyReply:
        """One call under the budget (raises BudgetExceeded before calling, PolicyError)."""
        reply = call_with_budget(self.policy, self.budget, messages, [])
        with self._lock:
            self.calls += 1
            self.cost_usd += reply.usage.cost_usd
        return reply

    def summary(self) -> dict[str, Any]:
        return {"spec": self.policy.spec, "model": self.model, "calls": self.calls,
                "cost_usd": round(self.cost_usd, 9),
                "prompts": {p.strategy: p.version for p in PROMPTS.values()},
                "budget": self.budget.summary()}


@dataclass(slots=True)
class _Job:
    file: str
    span: FunctionSpan
    source: str
    shown: str
    """The function as the model sees it (the answer's diff applies to this)."""
    messages: list[Message]
    tests: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Outcome:
    job: _Job
    reply: PolicyReply | None = None
    error: str = ""
    over_budget: str = ""


class _LmStrategy:
    """What both strategies share; a subclass says what the model is shown."""

    name = ""
    prompt: BugPrompt
    no_bug_reason: str | None = None
    """Validation's ``no_fail_to_pass`` under this strategy's own name."""

    def __init__(self, writer: BugWriter | None = None, max_lines: int = 120,
                 max_context_chars: int = 16_000) -> None:
        if writer is None:
            raise ConfigError(f"strategy {self.name!r} needs a model: pass --bug-writer SPEC")
        self.writer = writer
        self.max_lines = max_lines
        self.max_context_chars = max_context_chars
        self.report = SynthReport(self.name)
        self._seen: set[str] = set()
        self._stop = False
        self._failed = 0

    def candidates(self, repo: RepoView) -> Iterator[Candidate]:
        self.report = SynthReport(self.name)
        jobs = self._jobs(repo)
        first = next(jobs, None)
        if first is None:
            self.report.nothing("no function that a passing test executes")
            return
        yield from self._run(repo, itertools.chain([first], jobs))

    def _run(self, repo: RepoView, jobs: Iterator[_Job]) -> Iterator[Candidate]:
        w, limit = self.writer, repo.max_candidates
        calls0, cost0 = w.calls, w.cost_usd
        ex = ThreadPoolExecutor(w.workers, thread_name_prefix=self.name)
        pending: deque[Future[_Outcome]] = deque()
        retry: deque[_Job] = deque()
        asked = self._failed = 0
        cap = w.workers
        self._stop = False
        try:
            while True:
                while not self._stop and len(pending) < cap:
                    if retry:
                        job: _Job | None = retry.popleft()
                    elif limit is None or asked < limit:
                        job, asked = next(jobs, None), asked + 1
                    else:
                        job = None
                    if job is None:
                        break
                    pending.append(ex.submit(self._ask, job))
                if not pending:
                    return
                out = pending.popleft().result()
                if out.over_budget and pending:  # calls in flight hold the money: fewer
                    retry.append(out.job)        # at once, this one again when one settles
                    cap = len(pending)
                    continue
                cap = min(w.workers, cap + 1)
                cand = self._settle(repo, out)
                if cand is not None:
                    self.report.yielded += 1
                    yield cand
        finally:  # calls in flight finish (they are paid for) and are counted too
            ex.shutdown(wait=True, cancel_futures=True)
            for fut in pending:
                if not fut.cancelled() and self._settle(repo, fut.result()) is not None:
                    self.report.skip("not_needed")  # a good answer validation did not need
            self.report.calls = w.calls - calls0
            self.report.cost_usd = w.cost_usd - cost0

    def _settle(self, repo: RepoView, out: _Outcome) -> Candidate | None:
        """The candidate an outcome makes, or None (refused and counted, or no call)."""
        if out.over_budget:
            self._stop = True
            self.report.skip("over_budget")
            self.report.reason = f"the --max-usd budget is spent ({out.over_budget})"
            return None
        self._failed = self._failed + 1 if out.error else 0
        if self._failed >= MAX_FAILED_IN_A_ROW and not self._stop:
            self._stop = True
            self.report.reason = f"{self._failed} calls failed in a row: {out.error}"
        return self._candidate(repo, out)

    def _ask(self, job: _Job) -> _Outcome:
        try:
            return _Outcome(job, self.writer.ask(job.messages))
        except BudgetExceeded as exc:
            return _Outcome(job, over_budget=one_line(exc, 200))
        except PolicyError as exc:
            return _Outcome(job, error=one_line(exc, 200))

    def _jobs(self, repo: RepoView) -> Iterator[_Job]:
        tested = tests_by_symbol(repo)
        targets: list[tuple[str, str, FunctionSpan, list[str]]] = []
        for rel in python_sources(repo.root):
            if tested is not None and rel not in tested:
                continue
            try:
                source = (repo.root / rel).read_bytes().decode("utf-8")
                spans = function_spans(rel, source)
            except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
                self.report.skip("unparseable_source", rel, str(exc)[:300], keep=True)
                continue
            for span in spans:
                tests = tested[rel].get(span.qualname, []) if tested is not None else []
                if tested is not None and not tests:
                    self.report.skip("untested_target")
                elif span.end - span.start > self.max_lines:
                    self.report.skip("too_long")
                else:
                    targets.append((rel, source, span, tests))
        random.Random(f"{self.name}:{repo.seed}").shuffle(targets)
        for rel, source, span, tests in targets:
            try:
                yield self._job(repo, rel, source, span, tests)
            except AnswerRefused as exc:  # nothing to ask about this function
                self.report.skip(exc.reason)

    def _job(self, repo: RepoView, rel: str, source: str, span: FunctionSpan,
             tests: list[str]) -> _Job:
        raise NotImplementedError

    def _messages(self, repo: RepoView, span: FunctionSpan, module: str, start: int,
                  end: int, shown: str) -> list[Message]:
        return messages_for(self.prompt, repo=repo.repo, file=span.file, qualname=span.qualname,
                            context=_excerpt(module, start, end, self.max_context_chars),
                            function=shown)

    def _candidate(self, repo: RepoView, out: _Outcome) -> Candidate | None:
        job = out.job
        where = f"{job.file}::{job.span.qualname}"
        try:
            new_source = self._answer(out)
        except AnswerRefused as exc:
            self.report.refuse(exc.reason, where, exc.detail)
            return None
        bug = file_diff(job.file, job.source, new_source)
        usage = out.reply.usage if out.reply is not None else Usage()
        provenance = {"bug_writer": self.writer.policy.spec, "model": self.writer.model,
                      "prompt": self.prompt.strategy, "prompt_version": self.prompt.version,
                      "cost_usd": usage.cost_usd, "input_tokens": usage.input_tokens,
                      "output_tokens": usage.output_tokens}
        return Candidate(
            candidate_id=candidate_id(self.name, job.file, job.span.qualname, bug),
            repo=repo.repo, strategy=self.name,  # type: ignore[arg-type]
            bug_patch=bug, golden_patch=file_diff(job.file, new_source, job.source),
            changed=[ChangedSymbol(file=job.file, qualname=job.span.qualname)], scope="body",
            fail_to_pass_hint=list(job.tests),
            metadata={"base_commit": repo.commit, "provenance": provenance,
                      **({"no_bug_reason": self.no_bug_reason} if self.no_bug_reason else {})})

    def _answer(self, out: _Outcome) -> str:
        """The new module text the answer makes, or AnswerRefused."""
        if out.error:
            raise AnswerRefused("call_failed", out.error)
        assert out.reply is not None
        if out.reply.stop_reason in TRUNCATED:
            raise AnswerRefused("answer_truncated", "the answer reached the token limit")
        job = out.job
        new_source = read_answer(out.reply.message.text, source=job.source, span=job.span,
                                 shown=job.shown)
        key = hashlib.sha256(f"{job.file}\0{new_source}".encode()).hexdigest()
        if key in self._seen:
            raise AnswerRefused("answer_duplicate", "the same edit as an earlier answer")
        self._seen.add(key)
        return new_source


class LmModifyStrategy(_LmStrategy):
    """A model changes one function's behaviour subtly (signature kept)."""

    name = "lm-modify"
    prompt = PROMPTS["lm-modify"]

    def _job(self, repo: RepoView, rel: str, source: str, span: FunctionSpan,
             tests: list[str]) -> _Job:
        lines = source.splitlines(keepends=True)
        shown = "".join(lines[span.start : span.end])
        return _Job(rel, span, source, shown,
                    self._messages(repo, span, source, span.start, span.end, shown), tests)


class LmRewriteStrategy(_LmStrategy):
    """A model re-implements one function from its signature, docstring and module."""

    name = "lm-rewrite"
    prompt = PROMPTS["lm-rewrite"]
    no_bug_reason = "rewrite_passes_tests"

    def _job(self, repo: RepoView, rel: str, source: str, span: FunctionSpan,
             tests: list[str]) -> _Job:
        lines = source.splitlines(keepends=True)
        stub = stub_of(source, span)
        module = "".join(lines[: span.start]) + stub + "".join(lines[span.end :])
        end = span.start + len(stub.splitlines())
        return _Job(rel, span, source, stub,
                    self._messages(repo, span, module, span.start, end, stub), tests)


def _excerpt(module: str, start: int, end: int, limit: int) -> str:
    """The module, or where it is long its head (imports, constants) and the lines around
    lines ``[start, end)``, with a marker where lines were left out."""
    if len(module) <= limit:
        return module
    lines = module.splitlines(keepends=True)
    head = 0
    while head < min(len(lines), 60) and not lines[head].startswith(("def ", "class ", "@",
                                                                      "async def ")):
        head += 1
    around = max(10, (limit // 2 - sum(map(len, lines[:head]))) // 160)
    lo, hi = max(head, start - around), min(len(lines), end + around)
    gap = "# ... (lines left out)\n"
    return "".join(lines[:head]) + (gap if lo > head else "") + "".join(lines[lo:hi]) \
        + (gap if hi < len(lines) else "")
