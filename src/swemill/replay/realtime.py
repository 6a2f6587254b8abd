"""Realtime replay: every (state, teacher) pair is one API call, run concurrently.

``concurrency`` workers take the calls in order, so at most that many are in flight. Each
call goes through :func:`swemill.policies.budget.acall_with_budget`: its worst case is reserved
before it is sent and the real cost settled after, so ``--max-usd`` holds however many
calls overlap. A call the budget refuses while other calls hold reservations waits for them
to settle and tries again; one refused with nothing in flight is not sent and is recorded as
``status="budget"``. Transient errors (429, 5xx, dropped connections) are retried by the
policy's :class:`RetryPolicy`; whatever still fails is recorded on its reply with the
reason. One failed call never stops the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from typing import Any

from swemill.core.errors import BudgetExceeded, SwemillError
from swemill.core.progress import Progress
from swemill.core.records import Message, TextBlock, ToolResultBlock, ToolUseBlock
from swemill.core.tools import OTHER_PREFIX
from swemill.policies.budget import Budget, acall_with_budget
from swemill.policies.policy import Policy, one_line
from swemill.replay.replies import TeacherReply, reply_from_message
from swemill.replay.teachers import TeacherSpec
from swemill.traces.states import TraceState

__all__ = ["replay_realtime", "areplay_realtime", "areplay_work", "teacher_messages"]



def teacher_messages(state: TraceState) -> list[Message]:
    """What a teacher sees: the state's history, which ends before the original's answer.

    Calls outside the algebra (``other:TodoWrite``...) cannot travel as tool calls: providers
    accept only tool names like ``[A-Za-z0-9_-]+`` and a tool result must answer a call. They
    become text, with their results, so the teacher still sees what happened."""
    other: set[str] = set()
    out = []
    for m in state.messages:
        blocks: list[Any] = []
        for b in m.content:
            if isinstance(b, ToolUseBlock) and b.call.is_other:
                other.add(b.call.id)
                name = b.call.name.removeprefix(OTHER_PREFIX)
                blocks.append(TextBlock(text=f"[used {name}: {json.dumps(b.call.args)[:2000]}]"))
            elif isinstance(b, ToolResultBlock) and b.call_id in other:
                blocks.append(TextBlock(text=f"[result: {b.content[:4000]}]"))
            else:
                blocks.append(b)
        out.append(m if blocks == m.content else m.model_copy(update={"content": blocks}))
    return out


class _Settled:
    """Wakes calls the budget refused while other calls still held reservations: once one
    of those settles (usually far below its worst case) a refused call may fit after all."""

    def __init__(self) -> None:
        self.cond = asyncio.Condition()
        self.generation = 0

    async def wait_after(self, seen: int, budget: Budget) -> None:
        async with self.cond:
            while self.generation == seen and budget.reserved_usd > 0:
                # The timeout is a safety net; settles notify.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.cond.wait(), timeout=1.0)

    async def notify(self) -> None:
        async with self.cond:
            self.generation += 1
            self.cond.notify_all()


async def _one(state: TraceState, teacher: TeacherSpec, policy: Policy, budget: Budget,
               tools: list[dict[str, Any]], settled: _Settled) -> TeacherReply:
    def failed(status: str, exc: Exception) -> TeacherReply:
        return TeacherReply(state_id=state.state_id, teacher=teacher.slug, spec=teacher.spec,
                            family=teacher.family, mode="realtime",
                            status=status, error=one_line(exc))  # type: ignore[arg-type]

    while True:
        seen = settled.generation
        try:
            reply = await acall_with_budget(policy, budget, teacher_messages(state), tools)
        except BudgetExceeded as exc:
            if budget.reserved_usd <= 0:  # nothing in flight can free money: final
                return failed("budget", exc)
        except SwemillError as exc:  # the per-item boundary: record and go on
            await settled.notify()
            return failed("error", exc)
        else:
            await settled.notify()
            break
        await settled.wait_after(seen, budget)
    return reply_from_message(state.state_id, teacher.slug, teacher.spec, teacher.family,
                              "realtime", reply.message, reply.usage, reply.format_errors)


async def areplay_realtime(
    states: Sequence[TraceState],
    teachers: Sequence[tuple[TeacherSpec, Policy]],
    budget: Budget,
    tools: list[dict[str, Any]],
    *,
    concurrency: int = 16,
    progress: Progress | None = None,
) -> list[TeacherReply]:
    """Ask every teacher about every state; replies come back in (state, teacher) order."""
    work = [(s, t, p) for s in states for t, p in teachers]
    return await areplay_work(work, budget, tools, concurrency=concurrency, progress=progress)


async def areplay_work(
    work: Sequence[tuple[TraceState, TeacherSpec, Policy]],
    budget: Budget,
    tools: list[dict[str, Any]],
    *,
    concurrency: int = 16,
    progress: Progress | None = None,
) -> list[TeacherReply]:
    """One call per (state, teacher, policy) item; ``concurrency`` workers take the items in
    order, so at most that many calls are in flight and memory does not grow with the number
    of items. Replies come back in the items' order."""
    if concurrency < 1:
        raise SwemillError(f"concurrency must be at least 1, got {concurrency}")
    settled = _Settled()
    total, done = len(work), 0
    items = iter(range(total))
    replies: list[TeacherReply | None] = [None] * total

    async def worker() -> None:
        nonlocal done
        for i in items:  # one shared iterator: each item is taken by exactly one worker
            s, t, p = work[i]
            replies[i] = await _one(s, t, p, budget, tools, settled)
            done += 1
            if progress is not None:
                progress("teacher calls", done, total)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, total))))
    return [r for r in replies if r is not None]


def replay_realtime(
    work: Sequence[tuple[TraceState, TeacherSpec, Policy]],
    budget: Budget,
    tools: list[dict[str, Any]],
    *,
    concurrency: int = 16,
    progress: Progress | None = None,
) -> list[TeacherReply]:
    """:func:`areplay_work` from synchronous code. Policies here use blocking SDK
    clients, so each call runs in a worker thread; the default executor is widened to
    ``concurrency`` threads so that the bound is the semaphore's, not the pool's."""
    from concurrent.futures import ThreadPoolExecutor

    async def main() -> list[TeacherReply]:
        loop = asyncio.get_running_loop()
        pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="replay")
        loop.set_default_executor(pool)
        return await areplay_work(work, budget, tools, concurrency=concurrency,
                                  progress=progress)

    return asyncio.run(main())
