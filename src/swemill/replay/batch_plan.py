"""Planning Bedrock batch work: per-model quotas, shards that fit them, batch or realtime.

Every shard is one input file and one job per teacher, so a shard must fit both the
per-file and the per-job quotas (records and bytes), and hold at least the minimum number
of records a job accepts. Quotas come from Service Quotas when the caller may read them
(:func:`quotas_from_service`), else from configuration (:class:`BatchQuotas` defaults are
Bedrock's documented defaults at the time of writing; accounts differ, so check yours).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from swemill.core.errors import ConfigError

__all__ = ["BatchQuotas", "Shard", "ShardPlan", "plan_shards", "quotas_from_service",
           "ModeDecision", "batch_vs_realtime", "Urgency"]

GB = 1024**3


@dataclass(frozen=True, slots=True)
class BatchQuotas:
    max_records_per_job: int = 50_000
    max_records_per_file: int = 50_000
    min_records_per_job: int = 100
    max_file_bytes: int = 1 * GB
    max_job_bytes: int = 5 * GB
    max_concurrent_jobs: int = 20
    """Submitted plus in-progress jobs per model; more shards wait for a free slot."""
    source: str = "configured"

    def __post_init__(self) -> None:
        if min(self.max_records_per_job, self.max_records_per_file, self.max_file_bytes,
               self.max_job_bytes, self.max_concurrent_jobs) < 1:
            raise ConfigError(f"batch quotas must be positive: {self}")
        if self.min_records_per_job > self.records_limit:
            raise ConfigError("the minimum records per job is above the maximum records per job")

    @property
    def records_limit(self) -> int:
        return min(self.max_records_per_job, self.max_records_per_file)

    @property
    def bytes_limit(self) -> int:
        return min(self.max_file_bytes, self.max_job_bytes)


@dataclass(frozen=True, slots=True)
class Shard:
    index: int
    start: int
    stop: int
    bytes: int

    @property
    def records(self) -> int:
        return self.stop - self.start


@dataclass(slots=True)
class ShardPlan:
    shards: list[Shard] = field(default_factory=list)
    realtime: list[int] = field(default_factory=list)
    """Indices of records that go realtime: too large for a file, or below the floor."""
    reasons: dict[str, int] = field(default_factory=dict)


def _greedy(sizes: Sequence[int], q: BatchQuotas, plan: ShardPlan) -> list[list[int]]:
    """Contiguous groups within the quotas; a record too large for any file ends its group
    and goes realtime, so that every group stays one contiguous span."""
    groups: list[list[int]] = []
    cur: list[int] = []
    cur_bytes = 0
    for i, size in enumerate(sizes):
        if size > q.bytes_limit:
            plan.realtime.append(i)
            plan.reasons["record_too_large"] = plan.reasons.get("record_too_large", 0) + 1
            if cur:
                groups.append(cur)
            cur, cur_bytes = [], 0
            continue
        if cur and (len(cur) >= q.records_limit or cur_bytes + size > q.bytes_limit):
            groups.append(cur)
            cur, cur_bytes = [], 0
        cur.append(i)
        cur_bytes += size
    if cur:
        groups.append(cur)
    return groups


def plan_shards(sizes: Sequence[int], quotas: BatchQuotas) -> ShardPlan:
    """Contiguous shards over records of the given JSONL line sizes (bytes, newline
    included). Pure and linear: 250,000 records plan in well under a second."""
    plan = ShardPlan()
    groups = _greedy(sizes, quotas, plan)
    floor = quotas.min_records_per_job
    if len(groups) >= 2 and len(groups[-1]) < floor and groups[-2][-1] + 1 == groups[-1][0]:
        groups[-2:] = _rebalance(groups[-2], groups[-1], sizes, quotas)
    kept = []
    for g in groups:
        if len(g) < floor:
            plan.realtime.extend(g)
            plan.reasons["below_min_records"] = plan.reasons.get("below_min_records", 0) + len(g)
        else:
            kept.append(g)
    for k, g in enumerate(kept):
        plan.shards.append(Shard(k, g[0], g[-1] + 1, sum(sizes[i] for i in g)))
    plan.realtime.sort()
    return plan


def _rebalance(prev: list[int], last: list[int], sizes: Sequence[int], q: BatchQuotas
               ) -> list[list[int]]:
    """Move records from the end of ``prev`` into ``last`` until both hold the floor."""
    need = q.min_records_per_job - len(last)
    if len(prev) - need < q.min_records_per_job:
        return [prev, last]
    moved = prev[-need:]
    new_last = moved + last
    if sum(sizes[i] for i in new_last) > q.bytes_limit:
        return [prev, last]
    return [prev[:-need], new_last]


# Service Quotas names, e.g. "Records per batch inference job for Claude 3 Haiku".
_QUOTA_FIELDS = [
    (re.compile(r"^minimum number of records per batch inference job for (.+)$"),
     "min_records_per_job", 1),
    (re.compile(r"^records per input file per batch inference job for (.+)$"),
     "max_records_per_file", 1),
    (re.compile(r"^records per batch inference job for (.+)$"), "max_records_per_job", 1),
    (re.compile(r"^batch inference input file size \(in gb\) for (.+)$"), "max_file_bytes", GB),
    (re.compile(r"^batch inference job size \(in gb\) for (.+)$"), "max_job_bytes", GB),
]
_NOISE = {"instruct", "chat", "latest", "amazon", "anthropic", "meta", "model"}


def _words(text: str) -> frozenset[str]:
    """Letters and numbers apart ("llama3" -> llama, 3), without noise words or dates."""
    return frozenset(w for w in re.findall(r"[a-z]+|\d+", text.lower())
                     if w not in _NOISE and not re.fullmatch(r"\d{6,8}", w))


def _model_words(model_id: str) -> frozenset[str]:
    m = re.sub(r"^(?:us|eu|apac|global)\.", "", model_id.lower())
    m = m.split(".", 1)[1] if "." in m.split("-")[0] else m  # vendor prefix
    return _words(re.sub(r"-v\d+(?::\d+)?$", "", m))


def _matches(model: frozenset[str], quota_model: str) -> bool:
    """A quota names the model when both say the same words ("Claude 3.5 Haiku" is
    ``anthropic.claude-3-5-haiku-20241022-v1:0``, and "Claude 3 Haiku" is not)."""
    return bool(model) and model == _words(quota_model)


def quotas_from_service(client: Any, model_id: str, fallback: BatchQuotas) -> BatchQuotas:
    """The model's batch quotas from Service Quotas (``ListServiceQuotas`` for ``bedrock``);
    ``fallback`` when they cannot be read (no permission, no match)."""
    from botocore.exceptions import BotoCoreError, ClientError

    tokens = _model_words(model_id)
    found: dict[str, int] = {}
    try:
        for page in client.get_paginator("list_service_quotas").paginate(ServiceCode="bedrock"):
            for quota in page.get("Quotas", []):
                name = str(quota.get("QuotaName", "")).lower()
                for pattern, attr, unit in _QUOTA_FIELDS:
                    m = pattern.match(name)
                    if m and _matches(tokens, m.group(1)) and attr not in found:
                        found[attr] = int(float(quota.get("Value", 0)) * unit)
                        break
    except (ClientError, BotoCoreError):
        return fallback
    if not found:
        return fallback
    return replace(fallback, source="service-quotas", **found)


Urgency = Literal["low", "normal", "high"]


@dataclass(frozen=True, slots=True)
class ModeDecision:
    mode: Literal["realtime", "bedrock-batch"]
    reason: str


def batch_vs_realtime(n_records: int, quotas: BatchQuotas, *, realtime_usd: float | None = None,
                      batch_usd: float | None = None, max_usd: float | None = None,
                      urgency: Urgency = "normal", min_batch_records: int = 1000
                      ) -> ModeDecision:
    """Batch or realtime for one teacher's records: size, budget and urgency.

    Below the job floor batch is impossible; with ``urgency="high"`` the answer is needed in
    minutes, not within a batch job's day; when only batch fits the budget, batch; else
    batch from ``min_batch_records`` up (its discount outweighs the wait), realtime below.
    """
    if n_records < quotas.min_records_per_job:
        return ModeDecision("realtime", f"{n_records} records are below the batch floor of "
                                        f"{quotas.min_records_per_job}")
    if urgency == "high":
        return ModeDecision("realtime", "urgent: batch jobs may take up to a day")
    known = max_usd is not None and realtime_usd is not None and batch_usd is not None
    if known and realtime_usd > max_usd >= batch_usd:  # type: ignore[operator]
        return ModeDecision("bedrock-batch", "only the batch price fits the budget")
    if urgency == "low" or n_records >= min_batch_records:
        return ModeDecision("bedrock-batch", f"{n_records} records: batch is cheaper")
    return ModeDecision("realtime", f"{n_records} records: too few to wait for a batch job")
