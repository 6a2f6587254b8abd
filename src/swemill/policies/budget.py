"""Dollar and token budgets that hold under concurrency: reserve the worst case, settle the real.

Before a model call, the caller reserves the call's worst-case cost (every allowed output token
at the output price, plus an over-estimate of the prompt at the input price). The reservation
fails with :class:`BudgetExceeded` if ``spent + outstanding reservations + this one`` would pass
the limit. After the call, :meth:`Budget.settle` releases the reservation and books the real
cost. Since each real cost is at most its reservation, the settled total never passes the
limit, however many workers share the budget. A real cost above its reservation (a provider
that bills more than its price) is still booked, counted in :attr:`Budget.overrun_usd`, and
makes later reservations fail sooner; it is the only way past the limit.

A child budget (per task) draws from its parent (per run): a reservation must fit both.
Amounts are kept as integer nano-dollars so that thousands of additions do not drift.
Every operation takes a lock for a few microseconds and never blocks on I/O, so the same
object serves threads and asyncio tasks alike.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from swemill.core.errors import BudgetExceeded, SwemillError

if TYPE_CHECKING:
    from swemill.core.records import Message
    from swemill.policies.policy import Policy, PolicyReply

__all__ = ["Budget", "Reservation", "call_with_budget", "acall_with_budget"]

_NANO = 1_000_000_000


def _finite(usd: float) -> float:
    if not math.isfinite(usd):
        raise SwemillError(f"budget amounts must be finite dollars, got {usd!r}")
    return max(0.0, usd)


def _up(usd: float) -> int:
    return math.ceil(_finite(usd) * _NANO)


def _near(usd: float) -> int:
    return round(_finite(usd) * _NANO)


@dataclass(slots=True, eq=False)
class Reservation:
    """Money and tokens held for one call, in a budget and all its ancestors."""

    budget: Budget
    nano: int
    tokens: int
    settled: bool = field(default=False)

    @property
    def usd(self) -> float:
        return self.nano / _NANO


class Budget:
    """``max_usd`` / ``max_tokens`` of None mean no limit of that kind."""

    def __init__(self, max_usd: float | None = None, max_tokens: int | None = None, *,
                 parent: Budget | None = None, name: str = "run") -> None:
        if max_usd is not None and max_usd < 0:
            raise SwemillError(f"budget {name!r}: max_usd must be >= 0, got {max_usd}")
        self.name = name
        self.max_usd = max_usd
        self.max_tokens = max_tokens
        self.parent = parent
        self._max_nano = None if max_usd is None else _near(max_usd)
        self._lock = threading.Lock()
        self._spent = 0
        self._reserved = 0
        self._spent_tokens = 0
        self._reserved_tokens = 0
        self._overrun = 0
        self.calls = 0
        self.refusals = 0

    def child(self, max_usd: float | None = None, max_tokens: int | None = None,
              name: str = "task") -> Budget:
        """A budget that also draws from this one (e.g. per task inside a run)."""
        return Budget(max_usd, max_tokens, parent=self, name=name)

    @property
    def limits_usd(self) -> bool:
        """True when this budget or an ancestor has a dollar limit (callers need a price)."""
        return self.max_usd is not None or (self.parent is not None and self.parent.limits_usd)

    @property
    def limits_tokens(self) -> bool:
        return self.max_tokens is not None or (
            self.parent is not None and self.parent.limits_tokens)

    @property
    def spent_usd(self) -> float:
        return self._spent / _NANO

    @property
    def reserved_usd(self) -> float:
        return self._reserved / _NANO

    @property
    def overrun_usd(self) -> float:
        return self._overrun / _NANO

    @property
    def spent_tokens(self) -> int:
        return self._spent_tokens

    @property
    def remaining_usd(self) -> float | None:
        if self._max_nano is None:
            return None
        return max(0, self._max_nano - self._spent - self._reserved) / _NANO

    def reserve(self, worst_case_usd: float, worst_case_tokens: int = 0) -> Reservation:
        """Hold the worst case of one call here and in every ancestor, or raise
        :class:`BudgetExceeded` and hold nothing."""
        nano, tokens = _up(worst_case_usd), max(0, int(worst_case_tokens))
        self._hold(nano, tokens)
        return Reservation(self, nano, tokens)

    def _hold(self, nano: int, tokens: int) -> None:
        with self._lock:
            self._check(nano, tokens)
            if self.parent is not None:
                self.parent._hold(nano, tokens)  # lock order is always child -> parent
            self._reserved += nano
            self._reserved_tokens += tokens

    def _check(self, nano: int, tokens: int) -> None:
        if self._max_nano is not None and self._spent + self._reserved + nano > self._max_nano:
            self.refusals += 1
            raise self._exceeded(
                f"budget {self.name!r}: ${self._spent / _NANO:.4f} spent + "
                f"${self._reserved / _NANO:.4f} reserved + ${nano / _NANO:.4f} for this call "
                f"would pass the ${self.max_usd:.2f} limit"
            )
        if self.max_tokens is not None and (
            self._spent_tokens + self._reserved_tokens + tokens > self.max_tokens
        ):
            self.refusals += 1
            raise self._exceeded(
                f"budget {self.name!r}: {self._spent_tokens} tokens spent + "
                f"{self._reserved_tokens} reserved + {tokens} for this call would pass "
                f"the {self.max_tokens} token limit"
            )

    def _exceeded(self, message: str) -> BudgetExceeded:
        exc = BudgetExceeded(message)
        exc.budget_name = self.name  # type: ignore[attr-defined]  # which level refused
        return exc

    def settle(self, reservation: Reservation, actual_usd: float, actual_tokens: int = 0) -> None:
        """Release ``reservation`` and book what the call really cost (0 if it failed)."""
        if reservation.budget is not self:
            raise SwemillError(f"reservation belongs to budget {reservation.budget.name!r}")
        with self._lock:
            if reservation.settled:
                raise SwemillError(f"reservation in budget {self.name!r} settled twice")
            reservation.settled = True
        self._book(reservation.nano, reservation.tokens, _near(actual_usd), max(0, actual_tokens))

    def _book(self, held: int, held_tokens: int, nano: int, tokens: int) -> None:
        with self._lock:
            self._reserved -= held
            self._reserved_tokens -= held_tokens
            self._spent += nano
            self._spent_tokens += tokens
            self._overrun += max(0, nano - held)
            self.calls += 1
        if self.parent is not None:
            self.parent._book(held, held_tokens, nano, tokens)

    @contextmanager
    def hold(self, worst_case_usd: float, worst_case_tokens: int = 0) -> Iterator[Reservation]:
        """Reserve for a block; whatever the block did not settle is released at exit."""
        res = self.reserve(worst_case_usd, worst_case_tokens)
        try:
            yield res
        finally:
            if not res.settled:
                self.settle(res, 0.0, 0)

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "max_usd": self.max_usd, "spent_usd": self.spent_usd,
                "reserved_usd": self.reserved_usd, "overrun_usd": self.overrun_usd,
                "max_tokens": self.max_tokens, "spent_tokens": self.spent_tokens,
                "calls": self.calls, "refusals": self.refusals}


def _worst(policy: Policy, budget: Budget, messages: list[Message],
           tools: list[dict[str, Any]]) -> tuple[float, int]:
    usd = policy.worst_case_cost(messages, tools) if budget.limits_usd else 0.0
    tokens = policy.worst_case_tokens(messages, tools) if budget.limits_tokens else 0
    return usd, tokens


def _tokens_of(reply: PolicyReply) -> int:
    u = reply.usage
    return u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens


def call_with_budget(policy: Policy, budget: Budget, messages: list[Message],
                     tools: list[dict[str, Any]]) -> PolicyReply:
    """One ``policy.act`` under ``budget``: reserve, call, settle. A failed call books 0
    (providers do not bill rejected or dropped requests); BudgetExceeded means no call."""
    usd, tokens = _worst(policy, budget, messages, tools)
    with budget.hold(usd, tokens) as res:
        reply = policy.act(messages, tools)
        budget.settle(res, reply.usage.cost_usd, _tokens_of(reply))
    return reply


async def acall_with_budget(policy: Policy, budget: Budget, messages: list[Message],
                            tools: list[dict[str, Any]]) -> PolicyReply:
    """:func:`call_with_budget` for asyncio; the policy's blocking ``act`` runs in a thread."""
    import asyncio

    usd, tokens = _worst(policy, budget, messages, tools)
    with budget.hold(usd, tokens) as res:
        aact = getattr(policy, "aact", None)
        if aact is not None:
            reply = await aact(messages, tools)
        else:
            reply = await asyncio.to_thread(policy.act, messages, tools)
        budget.settle(res, reply.usage.cost_usd, _tokens_of(reply))
    return reply
