"""The issue writer spends from the run's ``--max-usd`` like the bug writer: each statement
call is reserved at its worst case and settled at its real cost, one refused falls back to the
template under ``over_budget``, and a budget shared by both writers is never passed.

The model is the fake OpenAI-compatible server on loopback (real HTTP), answering bug-writing
and issue-writing prompts from ``swemill_testkit.fake_bugwriter``; the first replies of each
kind are held, so many calls of both kinds are in flight at once."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from swemill.policies import policy_from_spec
from swemill.policies.budget import Budget
from swemill.synth.lm_bugs import BugWriter, LmModifyStrategy
from swemill.synth.problem import FailingTest, PolicyProblemWriter, write_problem_statement
from swemill_testkit.fake_bugwriter import bug_writer_script, is_issue_request
from swemill_testkit.fake_server import FakeOpenAIServer, FakeReply

from .conftest import many_functions

HOLD_S = 2.0
HELD = {"bug": 12, "issue": 8}
MAX_USD = 0.40
STATEMENTS = 150


def _failures(k: int) -> list[FailingTest]:
    return [FailingTest(f"tests/test_lib.py::test_f{k}", f"assert {k} == {k + 1}")]


def test_bug_and_issue_writing_calls_never_pass_a_shared_max_usd(tmp_path: Path) -> None:
    repo = many_functions(tmp_path / "many", 120)
    answer = bug_writer_script(repo.root, ["edit"], issues=["clean"])
    lock = threading.Lock()
    started: dict[str, list[float]] = {"bug": [], "issue": []}

    def script(request: dict[str, Any]) -> FakeReply:
        kind = "issue" if is_issue_request(request["body"]) else "bug"
        with lock:  # the first calls of each kind are held: both kinds in flight together
            started[kind].append(time.monotonic())
            hold = len(started[kind]) <= HELD[kind]
        reply = answer(request)
        reply.delay_s = HOLD_S if hold else 0.01
        return reply

    budget = Budget(MAX_USD, name="tasks")
    # the server bills $10 per million tokens in and out; each call reserves its worst case
    with FakeOpenAIServer(script, price_in=10.0, price_out=10.0) as srv:
        spec = f"openai:fake-writer@{srv.base_url}"
        bugs = BugWriter(policy_from_spec(spec, price="10,10", max_tokens=256), budget, 12)
        issues = PolicyProblemWriter(policy_from_spec(spec, price="10,10", max_tokens=256),
                                     budget=budget)
        strategy = LmModifyStrategy(writer=bugs, max_context_chars=2000)
        with ThreadPoolExecutor(8) as ex:  # statements asked for while the bugs are written
            futures = [ex.submit(issues.statement, _failures(k), "o/many")
                       for k in range(STATEMENTS)]
            cands = list(strategy.candidates(repo))
            said = [f.result() for f in futures]
        n_requests = len(srv.requests)
    # never past the ceiling, nothing left reserved, no reply billed above its reservation
    assert 0.3 < budget.spent_usd <= MAX_USD, budget.summary()
    assert budget.reserved_usd == 0 and budget.overrun_usd == 0
    # every call the server billed is in one writer's books, and the books add up
    assert n_requests == bugs.calls + issues.calls == budget.calls
    assert abs(bugs.cost_usd + issues.cost_usd - budget.spent_usd) < 1e-6
    # both ran out: the strategy stopped on a refusal, statements fell back to the template
    assert strategy.report.skipped["over_budget"] >= 1 and cands
    assert issues.fallbacks["over_budget"] >= 1 and set(issues.fallbacks) == {"over_budget"}
    assert issues.calls + issues.fallbacks["over_budget"] == STATEMENTS
    for k, s in enumerate(said):
        if s.fallback is None:
            assert s.by == spec and "tests/test_lib.py::test_f" in s.text
        else:
            assert (s.by, s.fallback) == ("template", "over_budget")
            assert s.text == write_problem_statement(_failures(k), "o/many")
    # the held replies overlapped: many calls of both kinds were in flight at one moment (12
    # of the 20 held: on a loaded 2-core machine their starts spread, 15 were seen)
    held = [(kind, t) for kind, ts in started.items() for t in ts[:HELD[kind]]]
    busiest = max((sum(1 for _, s in held if 0 <= s - t < HOLD_S),
                   {k for k, s in held if 0 <= s - t < HOLD_S}) for _, t in held)
    assert busiest[0] >= 12 and busiest[1] == {"bug", "issue"}, busiest
