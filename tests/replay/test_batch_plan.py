"""Batch planning: shards within the quotas, the job floor, Service Quotas, batch or realtime."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from swemill.core.errors import ConfigError
from swemill.replay.batch_plan import (
    BatchQuotas,
    batch_vs_realtime,
    plan_shards,
    quotas_from_service,
)

boto3 = pytest.importorskip("boto3")
from botocore.stub import Stubber  # noqa: E402


def covers(plan_shards_list: list, n: int) -> bool:  # type: ignore[type-arg]
    spans = [(s.start, s.stop) for s in plan_shards_list]
    return spans[0][0] == 0 and spans[-1][1] == n and all(
        a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_250k_states_shard_to_the_configured_record_quota() -> None:
    rng = random.Random(0)
    sizes = [rng.randint(2_000, 30_000) for _ in range(250_000)]
    quotas = BatchQuotas(max_records_per_job=20_000, max_records_per_file=25_000)
    plan = plan_shards(sizes, quotas)
    assert len(plan.shards) == 13 and plan.realtime == []
    assert all(s.records <= 20_000 for s in plan.shards)
    assert [s.records for s in plan.shards[:12]] == [20_000] * 12
    assert plan.shards[-1].records == 10_000
    assert covers(plan.shards, 250_000)
    assert all(s.bytes == sum(sizes[s.start:s.stop]) for s in plan.shards)


def test_byte_quotas_split_before_the_record_quota() -> None:
    sizes = [1_000] * 10_000
    quotas = BatchQuotas(max_file_bytes=1_000_000, max_job_bytes=2_000_000,
                         min_records_per_job=10)
    plan = plan_shards(sizes, quotas)
    assert [s.records for s in plan.shards] == [1_000] * 10
    assert all(s.bytes <= 1_000_000 for s in plan.shards)


def test_a_short_last_shard_borrows_up_to_the_floor() -> None:
    quotas = BatchQuotas(max_records_per_job=1_000, max_records_per_file=1_000,
                         min_records_per_job=100)
    plan = plan_shards([10] * 2_030, quotas)
    assert [s.records for s in plan.shards] == [1_000, 930, 100]
    assert covers(plan.shards, 2_030) and plan.realtime == []


def test_twenty_states_are_below_the_floor_and_go_realtime() -> None:
    plan = plan_shards([5_000] * 20, BatchQuotas())
    assert plan.shards == [] and plan.realtime == list(range(20))
    assert plan.reasons == {"below_min_records": 20}
    decision = batch_vs_realtime(20, BatchQuotas())
    assert decision.mode == "realtime" and "below the batch floor of 100" in decision.reason


def test_records_larger_than_a_file_go_realtime() -> None:
    quotas = BatchQuotas(max_file_bytes=10_000, min_records_per_job=2)
    plan = plan_shards([100, 50_000, 100, 100], quotas)
    # The large record goes realtime and splits the run; the single record before it is
    # then below the floor of 2 and goes realtime as well.
    assert plan.realtime == [0, 1]
    assert plan.reasons == {"record_too_large": 1, "below_min_records": 1}
    assert [(s.start, s.stop) for s in plan.shards] == [(2, 4)]


def test_batch_vs_realtime_weighs_size_budget_and_urgency() -> None:
    q = BatchQuotas()
    assert batch_vs_realtime(5_000, q).mode == "bedrock-batch"
    assert batch_vs_realtime(500, q).mode == "realtime"
    assert batch_vs_realtime(500, q, urgency="low").mode == "bedrock-batch"
    assert batch_vs_realtime(50_000, q, urgency="high").mode == "realtime"
    only_batch = batch_vs_realtime(500, q, realtime_usd=12.0, batch_usd=6.0, max_usd=10.0)
    assert only_batch.mode == "bedrock-batch" and "budget" in only_batch.reason


def test_impossible_quotas_are_refused() -> None:
    with pytest.raises(ConfigError, match="minimum records per job is above"):
        BatchQuotas(max_records_per_job=50, min_records_per_job=100)
    with pytest.raises(ConfigError, match="must be positive"):
        BatchQuotas(max_file_bytes=0)


def _quota(name: str, value: float) -> dict:  # type: ignore[type-arg]
    return {"ServiceCode": "bedrock", "QuotaName": name, "QuotaCode": f"L-{len(name):08d}",
            "Value": value, "Unit": "None", "Adjustable": True, "GlobalQuota": False}


def test_quotas_are_read_from_service_quotas_for_the_model() -> None:
    client = boto3.client("service-quotas", region_name="us-east-1",
                          aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret")
    fallback = BatchQuotas()
    with Stubber(client) as stub:
        stub.add_response("list_service_quotas", {"Quotas": [
            _quota("Records per batch inference job for Claude 3 Haiku", 30_000),
            _quota("Records per batch inference job for Claude 3.5 Haiku", 45_000),
            _quota("Records per input file per batch inference job for Claude 3.5 Haiku", 40_000),
            _quota("Minimum number of records per batch inference job for Claude 3.5 Haiku", 50),
        ], "NextToken": "page2"}, {"ServiceCode": "bedrock"})
        stub.add_response("list_service_quotas", {"Quotas": [
            _quota("Batch inference input file size (in GB) for Claude 3.5 Haiku", 2),
            _quota("Batch inference job size (in GB) for Llama 3.3 70B Instruct", 7),
        ]}, {"ServiceCode": "bedrock", "NextToken": "page2"})
        q = quotas_from_service(client, "us.anthropic.claude-3-5-haiku-20241022-v1:0", fallback)
        stub.assert_no_pending_responses()
    assert q.source == "service-quotas"
    assert (q.max_records_per_job, q.max_records_per_file, q.min_records_per_job) == (
        45_000, 40_000, 50)
    assert q.max_file_bytes == 2 * 1024**3 and q.max_job_bytes == fallback.max_job_bytes


def test_quotas_fall_back_to_configuration_without_permission() -> None:
    client = boto3.client("service-quotas", region_name="us-east-1",
                          aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret")
    configured = replace(BatchQuotas(), max_records_per_job=1234, max_records_per_file=1234)
    with Stubber(client) as stub:
        stub.add_client_error("list_service_quotas", "AccessDeniedException", "not allowed")
        assert quotas_from_service(client, "amazon.nova-pro-v1:0", configured) is configured
