"""run_replay end to end: mode decisions, the realtime fallback of small batch runs, batch and
realtime teachers in one run, and bad input that must stop before anything is called."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swemill.core.errors import ConfigError, PolicyError, StoreError
from swemill.core.records import PreferencePair
from swemill.corpus.stage import PAIRS_STAGE
from swemill.policies.retry import RetryPolicy
from swemill.replay.batch_plan import BatchQuotas
from swemill.replay.replies import REPLIES_STAGE, TeacherReply
from swemill.replay.run import ReplayClients, ReplayConfig, run_replay
from swemill.store import Store
from swemill_testkit.fake_batch import FakeBatchService
from swemill_testkit.fake_server import tool_reply

from .conftest import ingested, teachers

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto")
from botocore.stub import Stubber  # noqa: E402

from swemill_testkit.store import LocalS3, local_s3  # noqa: E402

CLAUDE = "bedrock-batch:us.anthropic.claude-3-5-haiku-20241022-v1:0"
ROLE = "arn:aws:iam::123456789012:role/bedrock-batch"
FAST = RetryPolicy(max_attempts=2, base_s=0.01, max_s=0.02)
LS = [tool_reply("bash", {"command": "ls"})]


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")


@pytest.fixture(scope="module")
def s3() -> Iterator[LocalS3]:
    with local_s3() as server:
        yield server


def client(kind: str) -> Any:
    return boto3.client(kind, region_name="us-east-1", aws_access_key_id="AKIDEXAMPLE",
                        aws_secret_access_key="secret")


def converse_reply() -> dict[str, Any]:
    return {"output": {"message": {"role": "assistant", "content": [
        {"toolUse": {"toolUseId": "tu1", "name": "bash", "input": {"command": "ls"}}}]}},
        "stopReason": "tool_use", "metrics": {"latencyMs": 5},
        "usage": {"inputTokens": 100, "outputTokens": 10, "totalTokens": 110}}


@pytest.mark.parametrize("mode", ["auto", "bedrock-batch"])
def test_a_run_of_20_states_falls_back_to_realtime(tmp_path: Path, s3: LocalS3, aws_env: None,
                                                   mode: str) -> None:
    root = s3.root(f"small-{mode}") if mode == "bedrock-batch" else None
    store, run = (ingested(tmp_path, turns=19) if root is None else _s3_ingest(tmp_path, s3, root))
    runtime, control = client("bedrock-runtime"), client("bedrock")
    with Stubber(runtime) as rt_stub, Stubber(control) as ctl_stub, \
            teachers([LS, LS, LS], repeat_last=True) as specs:
        for _ in range(20):
            rt_stub.add_response("converse", converse_reply())
        summary = run_replay(
            store, run,
            ReplayConfig(teachers=[CLAUDE, *specs[:2]], mode=mode,  # type: ignore[arg-type]
                         max_usd=1.0, role_arn=ROLE, service_quotas=False, retry=FAST,
                         concurrency=4),
            ReplayClients(bedrock=control, bedrock_runtime=runtime))
        rt_stub.assert_no_pending_responses()  # 20 Converse calls, one per state
        ctl_stub.assert_no_pending_responses()  # and no batch job
    slug = "bedrock-batch-us.anthropic.claude-3-5-haiku-20241022-v1_0"
    replies = [r for r in store.read_records(REPLIES_STAGE, run, TeacherReply)
               if r.teacher == slug]
    assert len(replies) == 20 and {(r.status, r.mode) for r in replies} == {("ok", "realtime")}
    if mode == "auto":
        assert summary.decisions[slug].startswith("realtime: 20 records are below the batch")
    else:
        assert summary.counts["batch_realtime_below_min_records"] == 20
    assert summary.job_ids == []


def _s3_ingest(tmp_path: Path, s3: LocalS3, root: str) -> tuple[Store, str]:
    from swemill.traces import ingest

    from .conftest import write_session

    store = Store.open(root, storage_options=s3.storage_options)
    session = write_session(tmp_path / "s" / "sess.jsonl", 19)
    return store, ingest([session], store, run_id="r1").run_id


def test_batch_and_realtime_teachers_in_one_run(tmp_path: Path, s3: LocalS3,
                                                aws_env: None) -> None:
    store = Store.open(s3.root("mixed"), storage_options=s3.storage_options)
    from swemill.traces import ingest

    from .conftest import write_session

    run = ingest([write_session(tmp_path / "s.jsonl", 59, errors={5})], store,
                 run_id="mixed").run_id
    control = client("bedrock")
    ingest_cost = store.read_manifest(run).cost_usd

    def answer(model_id: str, rid: str, model_input: dict[str, Any]) -> str:
        return 'ok\n```tool\n{"name": "bash", "args": {"command": "ls"}}\n```'

    fake = FakeBatchService(s3.storage_options, answer).attach(control)
    with teachers([LS, LS, LS], repeat_last=True) as specs:
        summary = run_replay(
            store, run,
            ReplayConfig(teachers=[CLAUDE, *specs[:2]], mode="bedrock-batch", max_usd=5.0,
                         role_arn=ROLE, service_quotas=False, retry=FAST, poll_initial_s=0.0,
                         quotas=BatchQuotas(max_records_per_job=30, max_records_per_file=30,
                                            min_records_per_job=20)),
            ReplayClients(bedrock=control, sleep=lambda s: None))
    assert len(fake.created) == 2 and len(summary.job_ids) == 2  # 60 records, 30 per job
    assert summary.counts["replies_ok"] == 180
    pairs = store.read_records(PAIRS_STAGE, run, PreferencePair)
    sources = {p.preference_source for p in pairs}
    assert sources == {"consensus", "error_signal"}
    manifest = store.read_manifest(run)
    assert manifest.job_ids == sorted(summary.job_ids)
    jobs = manifest.metadata["replay"]["jobs"]
    assert [j["status"] for j in jobs] == ["Completed", "Completed"]
    assert manifest.cost_usd == pytest.approx(ingest_cost + summary.cost_usd)
    assert 0 < summary.cost_usd <= 5.0


def test_bad_input_stops_before_any_call_or_write(tmp_path: Path) -> None:
    store, run = ingested(tmp_path, turns=2)
    with teachers([LS, LS, LS]) as specs:
        one_family = [s.replace("llama-3.3-70b", "qwen3-coder-b").replace(
            "mistral-large", "qwen3-coder-c") for s in specs]
        with pytest.raises(ConfigError, match="1 model family"):
            run_replay(store, run, ReplayConfig(teachers=one_family))
        with pytest.raises(ConfigError, match="unknown teacher provider"):
            run_replay(store, run, ReplayConfig(teachers=[*specs[:2], "vertex:gemini"]))
        with pytest.raises(PolicyError, match="missing credentials.*OPENAI_API_KEY"):
            run_replay(store, run, ReplayConfig(teachers=[*specs[:2], "openai:gpt-4o"]))
        with pytest.raises(PolicyError, match="AWS credentials"):
            run_replay(store, run, ReplayConfig(teachers=[*specs[:2], CLAUDE]))
        with pytest.raises(ConfigError, match="needs at least one bedrock-batch"):
            run_replay(store, run, ReplayConfig(teachers=specs, mode="bedrock-batch"))
        with pytest.raises(StoreError, match="no traces run nope"):
            run_replay(store, "nope", ReplayConfig(teachers=specs))
    assert not store.list_keys(f"pairs/run_id={run}")
    assert not store.list_keys(f"replay/replies/run_id={run}")
    assert "replay" not in store.read_manifest(run).counts


def test_a_crash_in_the_batch_phase_still_writes_what_was_received(
        tmp_path: Path, s3: LocalS3, aws_env: None) -> None:
    from .conftest import write_session

    store = Store.open(s3.root("crash"), storage_options=s3.storage_options)
    from swemill.traces import ingest

    run = ingest([write_session(tmp_path / "s.jsonl", 29)], store, run_id="crash").run_id
    control = client("bedrock")

    def crash(model_id: str, rid: str, model_input: dict[str, Any]) -> str:
        raise RuntimeError("the batch runner fell over")

    FakeBatchService(s3.storage_options, crash).attach(control)
    with teachers([LS, LS, LS], repeat_last=True) as specs, \
            pytest.raises(RuntimeError, match="fell over"):
        run_replay(store, run,
                   ReplayConfig(teachers=[CLAUDE, *specs[:2]], mode="bedrock-batch",
                                role_arn=ROLE, service_quotas=False, retry=FAST,
                                quotas=BatchQuotas(min_records_per_job=10)),
                   ReplayClients(bedrock=control, sleep=lambda s: None))
    replies = store.read_records(REPLIES_STAGE, run, TeacherReply)
    assert len(replies) == 2 * 30 and {r.status for r in replies} == {"ok"}
    meta = store.read_manifest(run).metadata["replay"]
    assert meta["error"] == "RuntimeError: the batch runner fell over"
    assert store.read_manifest(run).counts["replay"]["replies_ok"] == 60


def test_batch_settings_are_checked_before_any_call(tmp_path: Path, aws_env: None) -> None:
    store, run = ingested(tmp_path, turns=2)
    with teachers([LS, LS, LS]) as specs, pytest.raises(ConfigError, match="s3:// store"):
        run_replay(store, run, ReplayConfig(teachers=[CLAUDE, *specs[:2]], role_arn=ROLE,
                                            mode="bedrock-batch", service_quotas=False))
    assert not store.list_keys(f"replay/replies/run_id={run}")
