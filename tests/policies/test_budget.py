"""Reserve-then-settle budgets: the settled total never passes the limit, under any concurrency."""

from __future__ import annotations

import asyncio
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from swemill.core.errors import BudgetExceeded, PolicyError, SwemillError
from swemill.core.records import Message, TextBlock, Usage
from swemill.core.tools import tool_schemas
from swemill.policies.budget import Budget, acall_with_budget, call_with_budget
from swemill.policies.policy import PolicyReply, policy_from_spec
from swemill.policies.prices import Price
from swemill.policies.retry import RetryPolicy
from swemill_testkit.fake_server import FakeOpenAIServer, FakeReply, FakeToolCall

MESSAGES = [Message(role="user", content=[TextBlock(text="Fix the failing test.")])]


class CostlyPolicy:
    """A policy whose calls cost a random amount up to its declared worst case."""

    name = spec = "costly"
    family = "test"
    synthetic = True

    def __init__(self, worst: float, seed: int) -> None:
        self.worst = worst
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.costs: list[float] = []

    def worst_case_cost(self, messages: list[Message], tools: list[dict[str, Any]]) -> float:
        return self.worst

    def worst_case_tokens(self, messages: list[Message], tools: list[dict[str, Any]]) -> int:
        return 100

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyReply:
        with self.lock:
            cost = self.rng.uniform(0.0, self.worst)
            self.costs.append(cost)
        usage = Usage(input_tokens=60, output_tokens=40, cost_usd=cost)
        return PolicyReply(message=Message(role="assistant"), usage=usage, cost_source="provider")


def test_reserve_and_settle_book_the_real_cost() -> None:
    budget = Budget(max_usd=1.0)
    res = budget.reserve(0.4)
    assert budget.reserved_usd == pytest.approx(0.4) and budget.remaining_usd == pytest.approx(0.6)
    budget.settle(res, 0.1)
    assert budget.spent_usd == pytest.approx(0.1) and budget.reserved_usd == 0
    with pytest.raises(SwemillError, match="settled twice"):
        budget.settle(res, 0.1)


def test_a_reservation_that_does_not_fit_holds_nothing() -> None:
    budget = Budget(max_usd=1.0)
    budget.reserve(0.7)
    with pytest.raises(BudgetExceeded, match=r"would pass the \$1.00 limit") as info:
        budget.reserve(0.31)
    assert info.value.budget_name == "run"  # type: ignore[attr-defined]
    assert budget.reserved_usd == pytest.approx(0.7) and budget.refusals == 1
    budget.reserve(0.3)  # exactly to the limit is allowed


def test_child_budget_draws_from_its_parent() -> None:
    run = Budget(max_usd=1.0, name="run")
    a, b = run.child(max_usd=0.6, name="task-a"), run.child(max_usd=0.6, name="task-b")
    ra = a.reserve(0.5)
    with pytest.raises(BudgetExceeded, match="'task-a'"):
        a.reserve(0.2)  # the task's own limit
    with pytest.raises(BudgetExceeded, match="'run'") as info:
        b.reserve(0.55)  # fits task-b, not the run
    assert info.value.budget_name == "run"  # type: ignore[attr-defined]
    assert b.reserved_usd == 0  # the refused child holds nothing either
    a.settle(ra, 0.25)
    assert (a.spent_usd, run.spent_usd) == (pytest.approx(0.25), pytest.approx(0.25))
    assert run.reserved_usd == 0
    b.settle(b.reserve(0.55), 0.5)
    assert run.spent_usd == pytest.approx(0.75)


def test_token_limit() -> None:
    budget = Budget(max_tokens=1000)
    with budget.hold(0.0, 800) as res:
        budget.settle(res, 0.0, 300)
    with pytest.raises(BudgetExceeded, match="1000 token limit"):
        budget.reserve(0.0, 701)
    assert budget.spent_tokens == 300


def test_hold_releases_when_the_call_fails() -> None:
    budget = Budget(max_usd=1.0)
    with pytest.raises(RuntimeError), budget.hold(0.9):
        raise RuntimeError("provider went away")
    assert budget.reserved_usd == 0 and budget.spent_usd == 0


def test_an_overrun_is_booked_and_counted() -> None:
    budget = Budget(max_usd=1.0)
    budget.settle(budget.reserve(0.1), 0.15)
    assert budget.overrun_usd == pytest.approx(0.05) and budget.spent_usd == pytest.approx(0.15)


def test_a_policy_without_a_price_cannot_run_under_a_dollar_budget() -> None:
    policy = policy_from_spec("openai:local-model@http://127.0.0.1:9/v1")
    with pytest.raises(PolicyError, match="--price"):
        call_with_budget(policy, Budget(max_usd=1.0), MESSAGES, [])


@pytest.mark.parametrize("workers", [8, 16])
def test_many_threads_never_pass_the_limit(workers: int) -> None:
    budget = Budget(max_usd=1.00)
    policy = CostlyPolicy(worst=0.013, seed=workers)
    stopped = []

    def worker() -> None:
        while True:
            try:
                call_with_budget(policy, budget, MESSAGES, [])
            except BudgetExceeded:
                stopped.append(True)
                return

    with ThreadPoolExecutor(workers) as pool:
        for f in [pool.submit(worker) for _ in range(workers)]:
            f.result(timeout=60)
    assert len(stopped) == workers  # every worker stopped cleanly on the budget
    assert sum(policy.costs) <= 1.00
    assert budget.spent_usd == pytest.approx(sum(policy.costs))
    assert budget.reserved_usd == 0 and budget.calls == len(policy.costs) > 100
    assert budget.spent_usd > 0.5  # it did not stop absurdly early either


def test_asyncio_tasks_share_a_budget() -> None:
    budget = Budget(max_usd=0.5)
    policy = CostlyPolicy(worst=0.02, seed=1)

    async def worker() -> int:
        n = 0
        while True:
            try:
                await acall_with_budget(policy, budget, MESSAGES, [])
            except BudgetExceeded:
                return n
            n += 1

    async def main() -> list[int]:
        return list(await asyncio.gather(*(worker() for _ in range(16))))

    counts = asyncio.run(main())
    assert sum(counts) == len(policy.costs) and sum(policy.costs) <= 0.5
    assert budget.reserved_usd == 0


def test_eight_workers_against_a_costed_fake_server() -> None:
    """The rollout acceptance shape: real HTTP, costs reported by the server, $1.00 cap."""
    price = Price(input=20.0, output=800.0)  # $ per million tokens; steep, so $1 goes fast
    rng = random.Random(5)
    lock = threading.Lock()

    def script(request: dict[str, Any]) -> FakeReply:
        with lock:
            out = rng.randint(1, request["body"]["max_tokens"])
        return FakeReply(tool_calls=[FakeToolCall("submit", {})], completion_tokens=out)

    tools = tool_schemas()
    with FakeOpenAIServer(script, price_in=price.input, price_out=price.output) as srv:
        policy = policy_from_spec(f"openai:fake@{srv.base_url}", price=price, max_tokens=64,
                                  retry=RetryPolicy(base_s=0.01))
        budget = Budget(max_usd=1.00)
        replies: list[PolicyReply] = []

        def worker() -> None:
            while True:
                try:
                    reply = call_with_budget(policy, budget, MESSAGES, tools)
                except BudgetExceeded:
                    return
                with lock:
                    replies.append(reply)

        with ThreadPoolExecutor(8) as pool:
            for f in [pool.submit(worker) for _ in range(8)]:
                f.result(timeout=120)
    reported = [r.usage.cost_usd for r in replies]
    assert all(r.cost_source == "provider" for r in replies)
    assert sum(reported) <= 1.00 and budget.overrun_usd == 0
    assert len(replies) >= 10 and len(srv.requests) == len(replies)
    assert budget.spent_usd == pytest.approx(sum(reported))


def test_nonsense_amounts_are_refused() -> None:
    budget = Budget(max_usd=1.0)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(SwemillError, match="finite"):
            budget.reserve(bad)
    with pytest.raises(SwemillError, match="max_usd must be >= 0"):
        Budget(max_usd=-1)
    assert budget.reserved_usd == 0
