"""Bedrock batch replay on the local S3 server, with botocore's Stubber (which checks every
call against the Bedrock service model) and a fake batch runner writing real-format output."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from swemill.core.errors import ConfigError
from swemill.core.tools import tool_schemas
from swemill.policies.budget import Budget
from swemill.replay.batch_plan import BatchQuotas
from swemill.replay.bedrock_batch import BatchConfig, job_name, run_batch
from swemill.replay.teachers import parse_teacher
from swemill.store import Store
from swemill.store.layout import replay_input_key
from swemill_testkit.fake_batch import FakeBatchService, RecordError

from .conftest import state

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto")
from botocore.stub import Stubber  # noqa: E402

from swemill_testkit.store import LocalS3, local_s3  # noqa: E402

ROLE = "arn:aws:iam::123456789012:role/bedrock-batch"
CLAUDE = "bedrock-batch:us.anthropic.claude-3-5-haiku-20241022-v1:0"
ARN = "arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/abc123def456"
QUOTAS = BatchQuotas(min_records_per_job=100, max_records_per_job=1000,
                     max_records_per_file=1000)


@pytest.fixture(scope="module")
def s3() -> Iterator[LocalS3]:
    with local_s3() as server:
        yield server


@pytest.fixture
def store(s3: LocalS3, request: pytest.FixtureRequest) -> Store:
    return Store.open(s3.root(request.node.name[:40]), storage_options=s3.storage_options)


def bedrock() -> Any:
    return boto3.client("bedrock", region_name="us-east-1", aws_access_key_id="AKIDEXAMPLE",
                        aws_secret_access_key="secret")


def echo(model_id: str, rid: str, model_input: dict[str, Any]) -> str | RecordError:
    """Each record's answer names its record, so a wrong join would show."""
    call = json.dumps({"name": "bash", "args": {"command": f"echo {rid}"}})
    return f"Looking.\n```tool\n{call}\n```"


def job(status: str, **extra: Any) -> dict[str, Any]:
    return {"jobArn": ARN, "jobName": "j", "modelId": "m", "roleArn": ROLE, "status": status,
            "submitTime": "2026-01-01T00:00:00Z",
            "inputDataConfig": {"s3InputDataConfig": {"s3Uri": "s3://b/in.jsonl"}},
            "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": "s3://b/out/"}}, **extra}


def test_partially_completed_job_keeps_good_records_and_lists_failed(
        store: Store, s3: LocalS3) -> None:
    states = [state(f"sess::{i:04d}", action="cat f.txt") for i in range(120)]
    bad = {"sess::0007", "sess::0050", "sess::0119"}

    def script(model_id: str, rid: str, model_input: dict[str, Any]) -> str | RecordError:
        return RecordError(400, "Input is too long") if rid in bad else echo(
            model_id, rid, model_input)

    teacher = parse_teacher(CLAUDE)
    client = bedrock()
    fake = FakeBatchService(s3.storage_options, script, respond=False).attach(client)
    in_key = replay_input_key("r1", "anthropic-q0-00000-of-00001")
    budget, sleeps = Budget(5.0), []
    with Stubber(client) as stub:
        stub.add_response("create_model_invocation_job", {"jobArn": ARN}, {
            "jobName": job_name("r1", teacher.slug, "00000-of-00001"),
            "roleArn": ROLE, "modelId": teacher.model, "timeoutDurationInHours": 24,
            "inputDataConfig": {"s3InputDataConfig": {"s3Uri": store.url_for(in_key),
                                                      "s3InputFormat": "JSONL"}},
            "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": store.url_for(
                "replay/run_id=r1/teacher=bedrock-batch-us.anthropic.claude-3-5-haiku-"
                "20241022-v1_0") + "/"}}})
        stub.add_response("get_model_invocation_job", job("InProgress"), {"jobIdentifier": ARN})
        stub.add_response("get_model_invocation_job", job("PartiallyCompleted"),
                          {"jobIdentifier": ARN})
        out = run_batch(store, "r1", states, [teacher], budget, tool_schemas(),
                        BatchConfig(role_arn=ROLE, quotas=QUOTAS), client, sleep=sleeps.append)
        stub.assert_no_pending_responses()
    assert sleeps == [30.0, 60.0]  # polled with backoff
    (info,) = out.jobs
    assert info.status == "PartiallyCompleted" and info.arn == ARN
    assert sorted(info.failed_records) == sorted(bad)
    good = [r for r in out.replies if r.status == "ok"]
    assert len(good) == 117 and len(out.replies) == 120
    assert all(r.actions[0].args == {"command": f"echo {r.state_id}"} for r in good)
    failed = [r for r in out.replies if r.status == "batch_error"]
    assert {r.state_id for r in failed} == bad
    assert all("400: Input is too long" in r.error for r in failed)
    # One shared JSONL, recordId = state id, an Anthropic Messages body with the tools in text.
    lines = [json.loads(x) for x in store.read_text(in_key).splitlines()]
    assert [x["recordId"] for x in lines] == [s.state_id for s in states]
    body = lines[0]["modelInput"]
    assert body["anthropic_version"] == "bedrock-2023-05-31" and "```tool" in body["system"]
    assert body["messages"][-1]["role"] == "user"
    # Tokens from manifest.json.out, billed at the batch price, settled in the budget.
    manifest = json.loads(store.read_text(f"{info.output_prefix}/manifest.json.out"))
    assert (info.input_tokens, info.output_tokens) == (
        manifest["inputTokenCount"], manifest["outputTokenCount"])
    expected = teacher.price.cost(_usage(manifest)) * 0.5  # type: ignore[union-attr]
    assert info.cost_usd == pytest.approx(expected) and budget.spent_usd == pytest.approx(
        expected)
    assert budget.reserved_usd == 0 and len(fake.created) == 1


def _usage(manifest: dict[str, Any]) -> Any:
    from swemill.core.records import Usage

    return Usage(input_tokens=manifest["inputTokenCount"],
                 output_tokens=manifest["outputTokenCount"])


def test_every_family_gets_its_body_and_output_is_joined_by_record_id(
        store: Store, s3: LocalS3) -> None:
    states = [state(f"sess::{i:04d}") for i in range(150)]
    specs = [CLAUDE, "bedrock-batch:meta.llama3-3-70b-instruct-v1:0",
             "bedrock-batch:amazon.nova-pro-v1:0", "bedrock-batch:qwen.qwen3-coder-30b-a3b-v1:0"]
    client = bedrock()
    fake = FakeBatchService(s3.storage_options, echo, strangers=["ghost::0001"],
                            drop={"sess::0003"}, seed=7).attach(client)
    out = run_batch(store, "r2", states, [parse_teacher(s) for s in specs], Budget(50.0),
                    tool_schemas(), BatchConfig(role_arn=ROLE, quotas=QUOTAS), client,
                    sleep=lambda s: None)
    assert [j.status for j in out.jobs] == ["Completed"] * 4
    ok = [r for r in out.replies if r.status == "ok"]
    assert len(ok) == 4 * 149
    assert all(r.actions[0].args == {"command": f"echo {r.state_id}"} for r in ok)
    missing = [r for r in out.replies if r.status == "batch_error"]
    assert {r.state_id for r in missing} == {"sess::0003"} and len(missing) == 4
    assert all("no output line" in r.error for r in missing)
    assert out.counts["dropped_unexpected_record"] == 4
    assert all("unexpected record" in j.message for j in out.jobs)
    bodies = {p["modelId"]: p for p in fake.created}
    assert bodies["qwen.qwen3-coder-30b-a3b-v1:0"]["modelInvocationType"] == "Converse"
    assert all("modelInvocationType" not in p for m, p in bodies.items() if "qwen" not in m)
    first = {m: _first_input(store, p) for m, p in bodies.items()}
    assert first["meta.llama3-3-70b-instruct-v1:0"]["prompt"].startswith("<|begin_of_text|>")
    assert first["amazon.nova-pro-v1:0"]["schemaVersion"] == "messages-v1"
    assert first["qwen.qwen3-coder-30b-a3b-v1:0"]["inferenceConfig"] == {"maxTokens": 1024}


def _first_input(store: Store, params: dict[str, Any]) -> dict[str, Any]:
    uri = params["inputDataConfig"]["s3InputDataConfig"]["s3Uri"]
    key = uri.removeprefix(store.url.rstrip("/") + "/")
    return json.loads(store.read_text(key).splitlines()[0])["modelInput"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("status", ["Failed", "Expired"])
def test_failed_or_expired_jobs_mark_their_records(store: Store, s3: LocalS3,
                                                   status: str) -> None:
    states = [state(f"sess::{i:04d}") for i in range(100)]
    client = bedrock()
    dropped = {f"sess::{i:04d}" for i in range(40, 100)}  # an expired job got 40 done
    FakeBatchService(s3.storage_options, echo, final_status=status, drop=dropped,
                     failure_message="job ran out of time" if status == "Expired" else
                     "role cannot read the input bucket").attach(client)
    budget = Budget(10.0)
    out = run_batch(store, "r3", states, [parse_teacher(CLAUDE)], budget, tool_schemas(),
                    BatchConfig(role_arn=ROLE, quotas=QUOTAS), client, sleep=lambda s: None)
    (info,) = out.jobs
    assert info.status == status
    failed = [r for r in out.replies if r.status == "batch_error"]
    if status == "Failed":
        assert len(failed) == 100 and info.cost_usd == 0 and budget.spent_usd == 0
        assert all("role cannot read the input bucket" in r.error for r in failed)
    else:
        assert len(failed) == 60 and len(info.failed_records) == 60
        assert all("Expired" in r.error for r in failed)
        assert 0 < budget.spent_usd == pytest.approx(info.cost_usd)
    assert budget.reserved_usd == 0


def test_budget_refusal_submits_no_job(store: Store) -> None:
    client = bedrock()
    with Stubber(client) as stub:  # no responses queued: any call would fail the test
        out = run_batch(store, "r4", [state(f"s::{i:04d}") for i in range(100)],
                        [parse_teacher(CLAUDE)], Budget(0.0001), tool_schemas(),
                        BatchConfig(role_arn=ROLE, quotas=QUOTAS), client, sleep=lambda s: None)
        stub.assert_no_pending_responses()
    assert {r.status for r in out.replies} == {"budget"} and out.jobs[0].status == "NotSubmitted"


def test_batch_needs_an_s3_store_and_a_role(store: Store, tmp_path: Any) -> None:
    args = ([state()], [parse_teacher(CLAUDE)], Budget(), tool_schemas())
    with pytest.raises(ConfigError, match="needs an s3:// store"):
        run_batch(Store.open(str(tmp_path)), "r5", *args, BatchConfig(role_arn=ROLE), bedrock())
    with pytest.raises(ConfigError, match="SWEMILL_BEDROCK_ROLE_ARN"):
        run_batch(store, "r5", *args, BatchConfig(role_arn=""), bedrock())


def test_job_names_fit_the_service_pattern() -> None:
    import re

    pattern = boto3.client("bedrock", region_name="us-east-1").meta.service_model \
        .operation_model("CreateModelInvocationJob").input_shape.members["jobName"] \
        .metadata["pattern"]
    for run, slug in [("r1", "bedrock-batch-us.anthropic.claude-3-5-haiku-20241022-v1_0"),
                      ("20260102T030405Z-1a2b3c", "x" * 200), ("a_b", "m:1")]:
        name = job_name(run, slug, "00003-of-00016")
        assert len(name) <= 63 and re.fullmatch(pattern, name), name
    assert job_name("r", "a" * 100, "0") != job_name("r", "a" * 99 + "b", "0")
