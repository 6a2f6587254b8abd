"""Realtime replay: every (state, teacher) pair is one API call, run concurrently.

At most ``concurrency`` calls are in flight. Each call goes through
:func:`swemill.agent.budget.acall_with_budget`: the call's worst case is reserved before it is
sent and the real cost settled after, so ``--max-usd`` holds however many calls overlap. A
call the budget refuses is not sent and is recorded as ``status="budget"``; transient errors
(429, 5xx, dropped connections) are retried by the policy's :class:`RetryPolicy`; whatever
still fails is recorded on its reply with the reason. One failed call never stops the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from swemill.agent.budget import Budget, acall_with_budget
from swemill.core.errors import BudgetExceeded, SwemillError
from swemill.core.records import Message
from swemill.policies.base import Policy, one_line
from swemill.replay.records import TeacherReply, reply_from_message
from swemill.replay.teachers import TeacherSpec
from swemill.traces.records import TraceState

__all__ = ["replay_realtime", "areplay_realtime", "areplay_work", "teacher_messages"]

Progress = Callable[[int, int], None]


def teacher_messages(state: TraceState) -> list[Message]:
    """What a teacher sees: the state's history, which ends before the original's answer."""
    return list(state.messages)


async def _one(state: TraceState, teacher: TeacherSpec, policy: Policy, budget: Budget,
               tools: list[dict[str, Any]], gate: asyncio.Semaphore) -> TeacherReply:
    def failed(status: str, exc: Exception) -> TeacherReply:
        return TeacherReply(state_id=state.state_id, teacher=teacher.slug, spec=teacher.spec,
                            family=teacher.family, mode="realtime",
                            status=status, error=one_line(exc))  # type: ignore[arg-type]

    async with gate:
        try:
            reply = await acall_with_budget(policy, budget, teacher_messages(state), tools)
        except BudgetExceeded as exc:
            return failed("budget", exc)
        except SwemillError as exc:  # the per-item boundary: record and go on
            return failed("error", exc)
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
    """One call per (state, teacher, policy) item, at most ``concurrency`` at once; replies
    come back in the items' order."""
    if concurrency < 1:
        raise SwemillError(f"concurrency must be at least 1, got {concurrency}")
    gate = asyncio.Semaphore(concurrency)
    jobs = [_one(s, t, p, budget, tools, gate) for s, t, p in work]
    total, done = len(jobs), 0
    replies: list[TeacherReply | None] = [None] * total

    async def run(i: int, job: Any) -> None:
        nonlocal done
        replies[i] = await job
        done += 1
        if progress is not None:
            progress(done, total)

    await asyncio.gather(*(run(i, j) for i, j in enumerate(jobs)))
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
