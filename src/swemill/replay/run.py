"""``swemill replay`` as one function: a traces run's states in, teacher replies and
preference pairs out, written where the corpus stage reads them for the same run id.

Order of work: check the pool and the credentials (nothing is called or written before),
load the states, start the Bedrock batch teachers in the background, call the realtime
teachers under the one budget, then the records batch handed back (below the job floor).
Write each teacher's replies (``replay/replies/``, and on request one-step trajectories),
extract pairs from every teacher's stored replies (a run may replay one teacher at a time;
``pairs_only`` only extracts), write ``pairs/``, and record counts, cost, teachers and job
ids in the run manifest.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from swemill.core.errors import ConfigError, StoreError
from swemill.core.progress import Progress
from swemill.core.records import PreferencePair
from swemill.core.tools import tool_schemas
from swemill.policies.budget import Budget
from swemill.policies.policy import estimate_tokens
from swemill.policies.retry import RetryPolicy
from swemill.replay.batch_plan import (
    BatchQuotas,
    ModeDecision,
    batch_vs_realtime,
    quotas_from_service,
)
from swemill.replay.bedrock_batch import BatchConfig, run_batch
from swemill.replay.extract import ExtractStats, PolicyJudge, extract_run
from swemill.replay.output import stored_replies, write_pairs, write_replies
from swemill.replay.realtime import replay_realtime
from swemill.replay.replies import TeacherReply
from swemill.replay.teachers import (
    TeacherPool,
    TeacherSpec,
    check_credentials,
    make_policy,
    parse_teacher,
    parse_teachers,
)
from swemill.store import Store
from swemill.traces.load import load_states
from swemill.traces.states import TraceState

__all__ = ["ReplayConfig", "ReplayClients", "ReplaySummary", "run_replay"]

Mode = Literal["realtime", "bedrock-batch", "auto"]


@dataclass(slots=True)
class ReplayConfig:
    teachers: list[str]
    max_usd: float | None = None
    mode: Mode = "auto"
    concurrency: int = 16
    max_tokens: int = 1024
    min_families: int = 3
    """Families the pool of this replay must span (1 when replaying one teacher at a time)."""
    consensus_families: int = 3
    """Families that must back a majority action for a consensus pair."""
    pairs_only: bool = False
    """Call nobody: extract pairs again from the replies already stored for the run."""
    student_family: str | None = None
    allow_student_family: bool = False
    limit: int | None = None
    urgency: Literal["low", "normal", "high"] = "normal"
    role_arn: str | None = None
    quotas: BatchQuotas = field(default_factory=BatchQuotas)
    service_quotas: bool = True
    judge: str | None = None
    emit_trajectories: bool = False
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    poll_initial_s: float = 30.0


@dataclass(slots=True)
class ReplayClients:
    """AWS clients to use instead of building them (tests pass stubbed or faked ones)."""

    bedrock: Any = None
    bedrock_runtime: Any = None
    service_quotas: Any = None
    sleep: Callable[[float], None] | None = None


@dataclass(slots=True)
class ReplaySummary:
    run_id: str
    counts: dict[str, int]
    cost_usd: float
    divergence_rate: float
    teachers: list[dict[str, Any]]
    decisions: dict[str, str]
    job_ids: list[str]
    failed_records: dict[str, list[str]]
    budget: dict[str, Any]


def _aws(kind: str, existing: Any) -> Any:
    if existing is not None:
        return existing
    import boto3

    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return boto3.client(kind, region_name=region)


def _decide(t: TeacherSpec, states: list[TraceState], cfg: ReplayConfig,
            tools: list[dict[str, Any]]) -> ModeDecision:
    if not t.batch or cfg.mode == "realtime":
        return ModeDecision("realtime", "realtime provider" if not t.batch else "--mode realtime")
    if cfg.mode == "bedrock-batch":
        return ModeDecision("bedrock-batch", "--mode bedrock-batch")
    rt = bt = None
    if t.price is not None:
        prompt = sum(estimate_tokens(s.messages, tools) for s in states)
        rt = (prompt * t.price.input + len(states) * cfg.max_tokens * t.price.output) / 1e6
        bt = rt * 0.5
    return batch_vs_realtime(len(states), cfg.quotas, realtime_usd=rt, batch_usd=bt,
                             max_usd=cfg.max_usd, urgency=cfg.urgency)


def _load(store: Store, run_id: str, limit: int | None) -> list[TraceState]:
    if not store.exists(f"manifests/run_id={run_id}.json") and not store.list_keys(
            f"traces/run_id={run_id}"):
        raise StoreError(f"no traces run {run_id} in {store.url}: run `swemill traces ingest`")
    states = load_states(store, run_id)
    if limit is not None:
        states = states[:limit]
    if not states:
        raise ConfigError(f"run {run_id} has no assistant turns to replay")
    return states


def run_replay(store: Store, run_id: str, cfg: ReplayConfig,
               clients: ReplayClients | None = None,
               progress: Progress | None = None) -> ReplaySummary:
    """The replay stage (see the module docstring). Bad settings raise before any call;
    a failure while calling still writes what was received, then raises."""
    clients = clients or ReplayClients()
    if cfg.pairs_only:
        pool = TeacherPool([], min_families=0)
    else:
        pool = TeacherPool(parse_teachers(cfg.teachers), cfg.student_family,
                           cfg.min_families, cfg.allow_student_family)
    if cfg.mode == "bedrock-batch" and not any(t.batch for t in pool.teachers):
        raise ConfigError("--mode bedrock-batch needs at least one bedrock-batch: teacher")
    judge_spec = _judge_spec(cfg)
    check_credentials(pool.teachers + ([judge_spec] if judge_spec else []))
    states = _load(store, run_id, cfg.limit)
    tools = tool_schemas()
    budget = Budget(cfg.max_usd, name="replay")
    decisions = {t.slug: _decide(t, states, cfg, tools) for t in pool.teachers}
    batch_teachers = [t for t in pool.teachers if decisions[t.slug].mode == "bedrock-batch"]
    if batch_teachers:
        _check_batch_ready(store, cfg)
    got = _Gathered()
    try:
        _call_all(store, run_id, states, pool, decisions, batch_teachers, budget, tools, cfg,
                  clients, progress, got)
    except BaseException as exc:  # recorded in the manifest, then raised as it was
        got.error = f"{type(exc).__name__}: {exc}"
        raise
    finally:  # whatever was received (and paid for) is written, even when a phase failed
        judge = PolicyJudge(make_policy(judge_spec, max_tokens=16, retry=cfg.retry),
                            name=judge_spec.spec, budget=budget) if (
            judge_spec and got.error is None) else None
        write_replies(store, run_id, got.replies, [t.slug for t in pool.teachers], states,
                      cfg.emit_trajectories)
        others = stored_replies(store, run_id, {t.slug for t in pool.teachers})
        got.counts["replies_of_other_teachers"] = len(others)
        every = got.replies + others
        pairs, stats = extract_run(states, every, min_families=cfg.consensus_families,
                                   judge=judge)
        write_pairs(store, run_id, pairs)
        summary = _record(store, run_id, pool, cfg, states, got, pairs, stats, budget,
                          decisions)
    return summary


def _judge_spec(cfg: ReplayConfig) -> TeacherSpec | None:
    """The judge is named like a teacher; under a dollar budget it needs a price too."""
    if not cfg.judge:
        return None
    spec = parse_teacher(cfg.judge)
    if cfg.max_usd is not None and spec.price is None:
        raise ConfigError(f"judge {spec.spec!r} has no known price and --max-usd is set: "
                          "add #price=IN/OUT")
    return spec


@dataclass(slots=True)
class _Gathered:
    replies: list[TeacherReply] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    jobs: list[Any] = field(default_factory=list)
    error: str | None = None


def _check_batch_ready(store: Store, cfg: ReplayConfig) -> None:
    if not store.url.startswith("s3://"):
        raise ConfigError(f"bedrock-batch replay needs an s3:// store (--out s3://...), "
                          f"not {store.url}; or pass --mode realtime")
    if not (cfg.role_arn or os.environ.get("SWEMILL_BEDROCK_ROLE_ARN")):
        raise ConfigError("bedrock-batch replay needs an IAM role for Bedrock: pass "
                          "--role-arn or set SWEMILL_BEDROCK_ROLE_ARN")


def _call_all(store: Store, run_id: str, states: list[TraceState], pool: TeacherPool,
              decisions: dict[str, ModeDecision], batch_teachers: list[TeacherSpec],
              budget: Budget, tools: list[dict[str, Any]], cfg: ReplayConfig,
              clients: ReplayClients, progress: Progress | None,
              got: _Gathered) -> None:
    """Batch jobs run in a background thread while the realtime teachers are called; the
    records batch hands back (below the job floor) are called realtime at the end."""
    from concurrent.futures import ThreadPoolExecutor

    def realtime(pairs: list[tuple[TeacherSpec, list[TraceState]]]) -> None:
        work = []
        for t, mine in pairs:
            if mine:
                client = clients.bedrock_runtime if t.provider.startswith("bedrock") else None
                policy = make_policy(t, max_tokens=cfg.max_tokens, retry=cfg.retry,
                                     client=client)
                work += [(s, t, policy) for s in mine]
        got.counts["realtime_calls"] += len(work)
        got.replies.extend(replay_realtime(work, budget, tools, concurrency=cfg.concurrency,
                                           progress=progress))

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="replay-batch") as pool_exec:
        batch = pool_exec.submit(_run_batch, store, run_id, states, batch_teachers, budget,
                                 tools, cfg, clients) if batch_teachers else None
        try:
            realtime([(t, states) for t in pool.teachers
                      if decisions[t.slug].mode == "realtime"])
        finally:
            outcome = batch.result() if batch is not None else None
    if outcome is not None:
        got.replies.extend(outcome.replies)
        got.counts.update({f"batch_{k}": v for k, v in outcome.counts.items()})
        got.jobs = outcome.jobs
        by_id = {s.state_id: s for s in states}
        realtime([(t, [by_id[i] for i in outcome.realtime.get(t.slug, [])])
                  for t in batch_teachers])


def _run_batch(store: Store, run_id: str, states: list[TraceState], teachers: list[TeacherSpec],
               budget: Budget, tools: list[dict[str, Any]], cfg: ReplayConfig,
               clients: ReplayClients) -> Any:
    import time


    role = cfg.role_arn or os.environ.get("SWEMILL_BEDROCK_ROLE_ARN", "")
    bcfg = BatchConfig(role_arn=role, quotas=cfg.quotas, max_tokens=cfg.max_tokens,
                       poll_initial_s=cfg.poll_initial_s)
    quotas_for = None
    if cfg.service_quotas:
        sq = _aws("service-quotas", clients.service_quotas)
        cache: dict[str, BatchQuotas] = {}

        def quotas_for(t: TeacherSpec) -> BatchQuotas:
            if t.model not in cache:
                cache[t.model] = quotas_from_service(sq, t.model, cfg.quotas)
            return cache[t.model]

    return run_batch(store, run_id, states, teachers, budget, tools, bcfg,
                     _aws("bedrock", clients.bedrock), quotas_for=quotas_for,
                     sleep=clients.sleep or time.sleep)


def _record(store: Store, run_id: str, pool: TeacherPool, cfg: ReplayConfig,
            states: list[TraceState], got: _Gathered, pairs: list[PreferencePair],
            stats: ExtractStats, budget: Budget,
            decisions: dict[str, ModeDecision]) -> ReplaySummary:
    replies, counts, jobs = got.replies, got.counts, got.jobs
    status = Counter(f"replies_{r.status}" for r in replies)
    all_counts = {"in": len(states), "out": len(pairs), "replies": len(replies),
                  **status, **stats.as_counts(), **counts}
    failed = {}
    for j in jobs:
        if j.failed_records:
            failed[f"{j.teacher}/{j.shard}"] = list(j.failed_records)
    summary = ReplaySummary(
        run_id=run_id, counts=dict(sorted(all_counts.items())), cost_usd=budget.spent_usd,
        divergence_rate=stats.divergence_rate, teachers=pool.describe()["teachers"],
        decisions={k: f"{d.mode}: {d.reason}" for k, d in decisions.items()},
        job_ids=[j.arn for j in jobs if j.arn], failed_records=failed,
        budget=budget.summary())
    manifest = store.read_manifest(run_id) if store.exists(
        f"manifests/run_id={run_id}.json") else None
    if manifest is not None:
        manifest.counts["replay"] = summary.counts
        manifest.cost_usd += summary.cost_usd
        manifest.teachers = sorted(set(manifest.teachers) | {t.spec for t in pool.teachers})
        manifest.job_ids = sorted(set(manifest.job_ids) | set(summary.job_ids))
        manifest.metadata["replay"] = {
            "pool": pool.describe(), "mode": cfg.mode, "decisions": summary.decisions,
            "divergence_rate": summary.divergence_rate, "budget": summary.budget,
            "error": got.error,
            "failed_records": {k: v[:100] for k, v in failed.items()},
            "jobs": [{"teacher": j.teacher, "shard": j.shard, "arn": j.arn, "status": j.status,
                      "message": j.message, "records": j.records, "cost_usd": j.cost_usd,
                      "input_tokens": j.input_tokens, "output_tokens": j.output_tokens}
                     for j in jobs]}
        store.write_manifest(manifest)
    return summary
