"""Bedrock batch replay: shared JSONL shards in S3, one job per teacher and shard, results
joined back by ``recordId``.

1. Each state becomes one record ``{"recordId": state_id, "modelInput": body}`` in its
   teachers' body format (:mod:`swemill.replay.batch_format`); teachers of one format and
   quotas share the shard files under ``replay/run_id=<id>/input/``.
2. Shards follow :func:`swemill.replay.batch_plan.plan_shards`; records that cannot be
   batched (below the job floor, too large) are handed back for realtime replay.
3. Per teacher and shard the worst case is reserved in the run's budget at the batch price,
   then ``CreateModelInvocationJob`` writes to ``replay/run_id=<id>/teacher=<slug>/``.
   At most ``max_concurrent_jobs`` jobs per teacher are in flight.
4. ``GetModelInvocationJob`` is polled with exponential backoff until the job ends. For
   ``Completed`` and ``PartiallyCompleted`` the ``.jsonl.out`` lines are joined to the sent
   records by ``recordId`` (their order is not guaranteed): an ``error`` line keeps its
   message on that record's reply, a record with no line is an error too, and a line whose
   ``recordId`` was never sent is dropped and counted. Token totals for the bill come from
   ``manifest.json.out``. A ``Stopped`` or ``Expired`` job's partial output is read the same
   way; ``Failed`` jobs (and those without output) mark all their records failed.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from swemill.core.errors import BudgetExceeded, ConfigError
from swemill.core.records import Usage
from swemill.policies.budget import Budget, Reservation
from swemill.policies.policy import BYTES_PER_TOKEN, one_line
from swemill.policies.prices import require_price
from swemill.replay import batch_format as bf
from swemill.replay.batch_plan import BatchQuotas, Shard, plan_shards
from swemill.replay.replies import TeacherReply
from swemill.replay.teachers import TeacherSpec
from swemill.store import Store, shard_name
from swemill.store.layout import replay_input_key, replay_output_key
from swemill.traces.states import TraceState

__all__ = ["BatchConfig", "BatchOutcome", "JobInfo", "run_batch", "TERMINAL", "job_name"]

TERMINAL = {"Completed", "PartiallyCompleted", "Failed", "Stopped", "Expired"}
_READABLE = {"Completed", "PartiallyCompleted"}


@dataclass(slots=True)
class BatchConfig:
    role_arn: str
    quotas: BatchQuotas = field(default_factory=BatchQuotas)
    max_tokens: int = 1024
    discount: float = 0.5
    """Batch price as a share of the on-demand price (Bedrock bills batch at half)."""
    timeout_hours: int = 24
    poll_initial_s: float = 30.0
    poll_max_s: float = 600.0
    poll_timeout_s: float = 8 * 24 * 3600.0


@dataclass(slots=True)
class JobInfo:
    teacher: str
    shard: str
    input_uri: str
    records: int
    arn: str = ""
    output_prefix: str = ""
    """Store key of the folder Bedrock writes this job's outputs under (``<job id>/``)."""
    status: str = "NotSubmitted"
    message: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    failed_records: list[str] = field(default_factory=list)


@dataclass(slots=True)
class BatchOutcome:
    replies: list[TeacherReply] = field(default_factory=list)
    realtime: dict[str, list[str]] = field(default_factory=dict)
    """Teacher slug -> state ids handed back for realtime replay."""
    jobs: list[JobInfo] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)


def job_name(run_id: str, slug: str, shard: str) -> str:
    """A job name Bedrock accepts (letters, digits, '-', at most 63 characters)."""
    raw = f"swemill-{run_id}-{slug}-{shard}"
    clean = "".join(c if c.isalnum() else "-" for c in raw)
    while "--" in clean:
        clean = clean.replace("--", "-")
    if len(clean) > 63:
        import hashlib

        clean = clean[:54].rstrip("-") + "-" + hashlib.sha256(raw.encode()).hexdigest()[:8]
    return clean


@dataclass(slots=True)
class _Job:
    info: JobInfo
    teacher: TeacherSpec
    fmt: str
    record_ids: list[str]
    reservation: Reservation | None


def _render(states: Sequence[TraceState], fmt: str, tools: list[dict[str, Any]],
            max_tokens: int) -> list[str]:
    return [json.dumps({"recordId": s.state_id,
                        "modelInput": bf.render_body(fmt, list(s.messages), tools, max_tokens)},
                       ensure_ascii=False) for s in states]


def _worst_usd(t: TeacherSpec, lines: list[str], cfg: BatchConfig, budget: Budget) -> float:
    if not budget.limits_usd:
        return 0.0
    price = require_price(t.model, t.price)
    prompt = sum(int(len(line.encode()) / BYTES_PER_TOKEN) for line in lines)
    return cfg.discount * (prompt * price.input + len(lines) * cfg.max_tokens * price.output) / 1e6


def run_batch(store: Store, run_id: str, states: Sequence[TraceState],
              teachers: Sequence[TeacherSpec], budget: Budget, tools: list[dict[str, Any]],
              cfg: BatchConfig, client: Any, *,
              quotas_for: Callable[[TeacherSpec], BatchQuotas] | None = None,
              sleep: Callable[[float], None] = time.sleep) -> BatchOutcome:
    """Replay ``states`` with every batch teacher; see the module docstring."""
    if not store.url.startswith("s3://"):
        raise ConfigError(f"bedrock-batch replay needs an s3:// store (--out s3://...), "
                          f"not {store.url}")
    if not cfg.role_arn:
        raise ConfigError("bedrock-batch replay needs an IAM role for Bedrock: pass "
                          "--role-arn or set SWEMILL_BEDROCK_ROLE_ARN")
    out = BatchOutcome()
    groups: dict[tuple[str, BatchQuotas], list[TeacherSpec]] = {}
    for t in teachers:
        q = quotas_for(t) if quotas_for else cfg.quotas
        groups.setdefault((bf.format_for(t.family), q), []).append(t)
    jobs: list[_Job] = []
    for g, ((fmt, quotas), members) in enumerate(sorted(groups.items(), key=lambda x: x[0][0])):
        jobs += _stage_group(store, run_id, states, fmt, quotas, members, budget, tools, cfg,
                             out, f"{fmt}-q{g}")
    _drive(jobs, cfg, client, store, run_id, budget, out, sleep)
    return out


def _stage_group(store: Store, run_id: str, states: Sequence[TraceState], fmt: str,
                 quotas: BatchQuotas, members: list[TeacherSpec], budget: Budget,
                 tools: list[dict[str, Any]], cfg: BatchConfig, out: BatchOutcome,
                 name: str) -> list[_Job]:
    lines = _render(states, fmt, tools, cfg.max_tokens)
    plan = plan_shards([len(x.encode()) + 1 for x in lines], quotas)
    for t in members:
        out.realtime.setdefault(t.slug, []).extend(states[i].state_id for i in plan.realtime)
    for reason, n in plan.reasons.items():
        out.counts[f"realtime_{reason}"] += n * len(members)
    jobs = []
    for shard in plan.shards:
        sname = shard_name(shard.index, len(plan.shards))
        key = replay_input_key(run_id, f"{name}-{sname}")
        chunk = lines[shard.start:shard.stop]
        store.write_text(key, "".join(x + "\n" for x in chunk))
        ids = [s.state_id for s in states[shard.start:shard.stop]]
        for t in members:
            jobs.append(_reserve(t, fmt, shard, sname, store.url_for(key), ids, chunk, budget,
                                 cfg, out))
    return jobs


def _reserve(t: TeacherSpec, fmt: str, shard: Shard, sname: str, uri: str, ids: list[str],
             chunk: list[str], budget: Budget, cfg: BatchConfig, out: BatchOutcome) -> _Job:
    info = JobInfo(t.slug, sname, uri, shard.records)
    try:
        res = budget.reserve(_worst_usd(t, chunk, cfg, budget))
    except BudgetExceeded as exc:
        info.status, info.message = "NotSubmitted", one_line(exc)
        out.counts["budget_refused_records"] += len(ids)
        out.replies += [_failed(t, sid, "budget", info.message) for sid in ids]
        out.jobs.append(info)
        return _Job(info, t, fmt, [], None)
    return _Job(info, t, fmt, ids, res)


def _failed(t: TeacherSpec, state_id: str, status: str, error: str) -> TeacherReply:
    return TeacherReply(state_id=state_id, teacher=t.slug, spec=t.spec, family=t.family,
                        mode="bedrock-batch", status=status, error=error)  # type: ignore[arg-type]


def _submit(job: _Job, cfg: BatchConfig, client: Any, store: Store, run_id: str) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    teacher_prefix = replay_output_key(run_id, job.teacher.slug, "x").rpartition("/")[0]
    out_uri = store.url_for(teacher_prefix)
    req: dict[str, Any] = {
        "jobName": job_name(run_id, job.teacher.slug, job.info.shard), "roleArn": cfg.role_arn,
        "modelId": job.teacher.model, "timeoutDurationInHours": cfg.timeout_hours,
        "inputDataConfig": {"s3InputDataConfig": {"s3Uri": job.info.input_uri,
                                                  "s3InputFormat": "JSONL"}},
        "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": out_uri + "/"}},
    }
    if bf.invocation_type(job.fmt) == "Converse":
        req["modelInvocationType"] = "Converse"
    try:
        job.info.arn = client.create_model_invocation_job(**req)["jobArn"]
        job.info.status = "Submitted"
        job.info.output_prefix = f"{teacher_prefix}/{job.info.arn.rpartition('/')[2]}"
    except ClientError as exc:
        err = exc.response.get("Error", {})
        job.info.status = "SubmitFailed"
        job.info.message = f"{err.get('Code', '?')}: {one_line(err.get('Message', exc))}"
    except BotoCoreError as exc:
        job.info.status, job.info.message = "SubmitFailed", one_line(exc)


def _drive(jobs: list[_Job], cfg: BatchConfig, client: Any, store: Store, run_id: str,
           budget: Budget, out: BatchOutcome, sleep: Callable[[float], None]) -> None:
    pending = [j for j in jobs if j.reservation is not None]
    active: list[_Job] = []
    delay, waited = cfg.poll_initial_s, 0.0
    limit = cfg.quotas.max_concurrent_jobs
    while pending or active:
        for t in {j.teacher.slug for j in pending}:
            room = limit - sum(1 for a in active if a.teacher.slug == t)
            for j in [p for p in pending if p.teacher.slug == t][:max(0, room)]:
                pending.remove(j)
                _submit(j, cfg, client, store, run_id)
                if j.info.status == "SubmitFailed":
                    _finish(j, store, budget, out, cfg)
                else:
                    active.append(j)
        if not active:
            continue
        if waited >= cfg.poll_timeout_s:
            for j in active:
                j.info.message = f"still {j.info.status} after {waited:.0f} s of polling"
                _finish(j, store, budget, out, cfg)
            active = []
            continue
        sleep(delay)
        waited += delay
        delay = min(cfg.poll_max_s, delay * 2)
        for j in list(active):
            _poll(j, client)
            if j.info.status in TERMINAL:
                active.remove(j)
                _finish(j, store, budget, out, cfg)


def _poll(job: _Job, client: Any) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        got = client.get_model_invocation_job(jobIdentifier=job.info.arn)
    except (ClientError, BotoCoreError) as exc:  # a failed poll is retried at the next round
        job.info.message = f"poll failed: {one_line(exc)}"
        return
    job.info.status = got["status"]
    job.info.message = got.get("message", "") or ""


def _finish(job: _Job, store: Store, budget: Budget, out: BatchOutcome,
            cfg: BatchConfig) -> None:
    from swemill.replay.batch_results import read_job_output

    info, t = job.info, job.teacher
    out.jobs.append(info)
    usage = Usage()
    partial = info.status in ("Expired", "Stopped") and bool(
        info.output_prefix and store.list_keys(info.output_prefix))
    if info.status in _READABLE or partial:
        replies, usage, counts = read_job_output(store, info, t, job.fmt, job.record_ids,
                                                 cfg.discount)
        out.replies += replies
        out.counts.update(counts)
    else:
        why = f"batch job {info.status}: {info.message}".rstrip(": ")
        out.replies += [_failed(t, sid, "batch_error", why) for sid in job.record_ids]
        out.counts[f"records_job_{info.status.lower()}"] += len(job.record_ids)
        info.failed_records = list(job.record_ids)
    price = t.price
    info.cost_usd = 0.0 if price is None else price.cost(usage) * cfg.discount
    if job.reservation is not None:
        budget.settle(job.reservation, info.cost_usd, usage.input_tokens + usage.output_tokens)
