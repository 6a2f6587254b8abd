"""The generated state machine: structure, the stage order, and its control flow executed by
moto's Step Functions interpreter.

The interpreter runs Choice, Map, Pass and Fail states; its ``batch:submitJob.sync`` fails
on any input in moto 5.2 (``States.Runtime: 'JobName'``, even for a one-state machine), and
EMR Serverless has no emulation, so every Task runs as a Pass stand-in
(:func:`control_flow_only`) and the test checks the path the execution takes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest

from swemill.aws.stepfunctions import (
    FAN_OUT,
    SHAPES,
    control_flow_only,
    stage_shapes,
    state_machine,
    validate_asl,
)
from swemill.core.errors import ConfigError
from swemill.pipeline.stages import STAGES, Stage
from swemill_testkit.store import LocalS3

from .conftest import boto, moto_config


def test_structure_and_stage_order() -> None:
    asl = state_machine()
    assert validate_asl(asl) == []
    states = asl["States"]
    # The main path follows STAGES, with replay (optional) between rollouts and corpus.
    path, name = [], "gate"
    while name != "manifest":
        path.append(name)
        state = states[name]
        name = state["Default"] if state["Type"] == "Choice" else state["Next"]
    assert [p for p in path if p in SHAPES] == [s.name for s in STAGES]
    assert path[path.index("rollouts") + 1] == "Replay?"
    assert states["tasks"]["Resource"] == "arn:aws:states:::batch:submitJob.sync"
    assert states["corpus"]["Resource"] == "arn:aws:states:::emr-serverless:startJobRun.sync"
    assert states["ingest"]["Resource"] == "arn:aws:states:::glue:startJobRun.sync"
    assert states["replay"]["Type"] == "Map" and states["replay"]["ItemsPath"] == "$.teachers"
    fan_in = states["FanIn"]["Parameters"]["ContainerOverrides"]["Command.$"]
    assert "'--pairs-only'" in fan_in and states["FanIn"]["Next"] == "corpus"
    assert all(s.get("Catch") for s in states.values() if s["Type"] == "Task")
    # tasks and rollouts fan out from inside their job, to the queue every stage job is told
    for name in ("gate", "tasks", "rollouts"):
        overrides = states[name]["Parameters"]["ContainerOverrides"]
        fans = "'--executor', 'aws-batch'" in overrides["Command.$"]
        assert fans == (name in FAN_OUT)
        assert {e["Name"]: e["Value.$"] for e in overrides["Environment"]} == {
            "SWEMILL_BATCH_JOB_QUEUE": "$.batch.job_queue",
            "SWEMILL_BATCH_JOB_DEFINITION": "$.batch.job_definition"}


def test_validator_finds_broken_machines() -> None:
    asl = state_machine()
    asl["States"]["env"]["Next"] = "nowhere"
    problems = validate_asl(asl)
    assert "env: goes to unknown state 'nowhere'" in problems
    assert "tasks: unreachable" in problems
    del asl["States"]["report"]["Next"]
    assert "report: needs exactly one of Next and End" in validate_asl(asl)


def test_unknown_stage_shape_is_an_error() -> None:
    odd = STAGES + (Stage("probe", "x:y", reads=(), writes=(), doc="d"),)
    with pytest.raises(ConfigError, match="no AWS shape for stage"):
        stage_shapes(odd)


def test_cli_prints_the_definition() -> None:
    out = subprocess.run([sys.executable, "-m", "swemill", "aws", "state-machine"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == state_machine()


def _execute(sfn: Any, arn: str, payload: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    run = sfn.start_execution(stateMachineArn=arn, name=f"e-{time.monotonic_ns()}",
                              input=json.dumps(payload))
    deadline = time.monotonic() + 60
    while (status := sfn.describe_execution(executionArn=run["executionArn"])["status"]) \
            == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.2)
    events = sfn.get_execution_history(executionArn=run["executionArn"])["events"]
    return status, events


def _entered(events: list[dict[str, Any]]) -> list[str]:
    return [e["stateEnteredEventDetails"]["name"] for e in events
            if "stateEnteredEventDetails" in e]


@pytest.mark.slow
def test_control_flow_runs_in_moto(s3: LocalS3) -> None:
    moto_config(s3, {"stepfunctions": {"execute_state_machine": True}})
    iam, sfn = boto(s3, "iam"), boto(s3, "stepfunctions")
    role = iam.create_role(RoleName="sfn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    asl = control_flow_only(state_machine())
    assert validate_asl(asl) == []
    arn = sfn.create_state_machine(name="swemill", definition=json.dumps(asl),
                                   roleArn=role)["stateMachineArn"]
    base = {"root": "s3://b/p", "bucket": "b", "prefix": "p/", "run_id": "r1",
            "source": "sample", "batch": {"job_queue": "q", "job_definition": "w"}}
    status, events = _execute(sfn, arn, base)
    assert status == "SUCCEEDED", _details(events)
    assert _entered(events) == ["IngestTraces?", "gate", "env", "tasks", "rollouts", "Replay?",
                                "corpus", "report", "manifest"]
    with_all = {**base, "traces_input": "s3://b/logs/", "traces_run": "t1",
                "glue": {"ingest_job": "g"}, "teachers": ["bedrock-batch:a", "bedrock-batch:b",
                                                          "bedrock-batch:c"]}
    status, events = _execute(sfn, arn, with_all)
    assert status == "SUCCEEDED", _details(events)
    entered = _entered(events)
    assert entered[:3] == ["IngestTraces?", "ingest", "gate"]
    assert entered.count("ReplayTeacher") == 3 and entered.count("TeacherDone") == 3
    assert entered.index("FanIn") > max(i for i, n in enumerate(entered) if n == "TeacherDone")
    assert entered[-3:] == ["corpus", "report", "manifest"]
    out = json.loads(next(e for e in events if e["type"] == "ExecutionSucceeded")[
        "executionSucceededEventDetails"]["output"])
    assert [r["teacher"] for r in out["results"]["replay"]] == with_all["teachers"]


def test_a_failing_state_ends_in_failed(s3: LocalS3) -> None:
    moto_config(s3, {"stepfunctions": {"execute_state_machine": True}})
    iam, sfn = boto(s3, "iam"), boto(s3, "stepfunctions")
    role = iam.create_role(RoleName="sfn-fail", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    asl = control_flow_only(state_machine())
    # The real tasks state: its job queue does not exist here, so submitting fails.
    asl["States"]["tasks"] = state_machine()["States"]["tasks"]
    arn = sfn.create_state_machine(name="swemill-fail", definition=json.dumps(asl),
                                   roleArn=role)["stateMachineArn"]
    status, events = _execute(sfn, arn, {"run_id": "r1", "root": "s3://b/p", "source": "s",
                                         "batch": {"job_queue": "none", "job_definition": "d"}})
    assert status == "FAILED"
    entered = _entered(events)
    assert entered[-2:] == ["tasks", "Failed"] and "rollouts" not in entered


def _details(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k.endswith("Details")} for e in events[-4:]]
