"""The build as a Step Functions state machine (ASL JSON), generated from ``STAGES``.

One AWS primitive per stage shape, in the order the local driver runs the stages:

- optional *ingest* (``$.traces_input`` given): the Glue 5.0 job over trace logs
  (:mod:`swemill.spark.traces_job`), ``glue:startJobRun.sync``;
- every stage of :data:`swemill.pipeline.stages.STAGES` that runs on a container (gate,
  env, tasks, rollouts, report): an AWS Batch job, ``batch:submitJob.sync``, running
  ``swemill aws run-stage NAME`` (the same stage function the local driver calls). The
  tasks and rollouts stages fan out from inside their job through the ``aws-batch``
  executor (array jobs over an S3 manifest, on the same queue and job definition, which
  every stage job gets in its environment): the validator streams candidates until the
  task quota is met, so the number of children is not known when the state starts;
- optional *replay* (``$.teachers`` given), after the rollouts: a Map over the teachers,
  one Batch job each running ``swemill replay --mode bedrock-batch`` for that teacher
  (Bedrock batch inference, half the on-demand price), then the fan-in: a Batch job
  running ``swemill replay --pairs-only`` (pairs from every teacher's stored replies);
- *corpus*: the EMR Serverless job (:mod:`swemill.spark.corpus_job`),
  ``emr-serverless:startJobRun.sync``;
- *manifest*: the execution's record (job ids of every state) written next to the run's
  report with ``aws-sdk:s3:putObject``.

Every task state retries throttling and catches any failure into one ``Failed`` state.
"""

from __future__ import annotations

from typing import Any

from swemill.core.errors import ConfigError
from swemill.executors.aws_batch import DEFINITION_ENV, QUEUE_ENV
from swemill.pipeline.stages import STAGES, Stage

__all__ = ["state_machine", "stage_shapes", "SHAPES", "FAN_OUT", "validate_asl",
           "control_flow_only"]

SHAPES = {"gate": "batch", "env": "batch", "tasks": "batch", "rollouts": "batch",
          "corpus": "emr-serverless", "report": "batch"}
"""The AWS primitive of every stage in ``STAGES``; a stage missing here is an error."""

_RETRY = [{"ErrorEquals": ["States.Timeout", "ThrottlingException", "Batch.AWSBatchException"],
           "IntervalSeconds": 10, "MaxAttempts": 3, "BackoffRate": 2.0}]
_CATCH = [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Failed"}]


def stage_shapes(stages: tuple[Stage, ...] = STAGES) -> list[tuple[str, str]]:
    missing = [s.name for s in stages if s.name not in SHAPES]
    if missing:
        raise ConfigError(f"no AWS shape for stage(s) {', '.join(missing)}: add them to SHAPES")
    return [(s.name, SHAPES[s.name]) for s in stages]


def _batch(name: str, command: list[Any], nxt: str) -> dict[str, Any]:
    return {
        "Type": "Task", "Resource": "arn:aws:states:::batch:submitJob.sync",
        "Parameters": {
            "JobName": f"swemill-{name}", "JobQueue.$": "$.batch.job_queue",
            "JobDefinition.$": "$.batch.job_definition",
            "ContainerOverrides": {
                "Command.$": _format_array(command),
                # what --executor aws-batch inside the job submits its array jobs to
                "Environment": [{"Name": QUEUE_ENV, "Value.$": "$.batch.job_queue"},
                                {"Name": DEFINITION_ENV, "Value.$": "$.batch.job_definition"}]},
        },
        "ResultSelector": {"JobId.$": "$.JobId", "Status.$": "$.Status"},
        "ResultPath": f"$.results.{name}", "Retry": _RETRY, "Catch": _CATCH, "Next": nxt,
    }


def _format_array(parts: list[Any]) -> str:
    """``States.Array(...)`` of literals and ``$.paths`` (a command built from the input)."""
    out = [p if str(p).startswith("$.") else "'" + str(p).replace("'", "\\'") + "'"
           for p in parts]
    return f"States.Array({', '.join(out)})"


FAN_OUT = frozenset({"tasks", "rollouts"})
"""Stages whose job spreads its items over Batch array jobs (``--executor aws-batch``)."""


def _stage_command(name: str) -> list[Any]:
    command = ["swemill", "aws", "run-stage", name, "--out", "$.root", "--run-id", "$.run_id",
               "--source", "$.source"]
    return command + (["--executor", "aws-batch"] if name in FAN_OUT else [])


def _emr(nxt: str) -> dict[str, Any]:
    return {
        "Type": "Task", "Resource": "arn:aws:states:::emr-serverless:startJobRun.sync",
        "Parameters": {
            "ApplicationId.$": "$.emr.application_id",
            "ExecutionRoleArn.$": "$.emr.execution_role_arn",
            "Name": "swemill-corpus",
            "JobDriver": {"SparkSubmit": {
                "EntryPoint.$": "$.emr.corpus_entry_point",
                "EntryPointArguments.$": "States.Array('--out', $.root, '--run-id', $.run_id)",
                "SparkSubmitParameters.$": "$.emr.spark_submit_parameters",
            }},
        },
        "ResultSelector": {"JobRunId.$": "$.JobRunId"},
        "ResultPath": "$.results.corpus", "Retry": _RETRY, "Catch": _CATCH, "Next": nxt,
    }


def _glue(nxt: str) -> dict[str, Any]:
    return {
        "Type": "Task", "Resource": "arn:aws:states:::glue:startJobRun.sync",
        "Parameters": {"JobName.$": "$.glue.ingest_job", "Arguments": {
            "--out.$": "$.root", "--run-id.$": "$.traces_run", "--input.$": "$.traces_input"}},
        "ResultSelector": {"JobRunId.$": "$.Id"},
        "ResultPath": "$.results.ingest", "Retry": _RETRY, "Catch": _CATCH, "Next": nxt,
    }


def _replay(nxt: str) -> dict[str, Any]:
    command = ["swemill", "replay", "--traces", "$.traces_run", "--teachers", "$.teacher",
               "--mode", "bedrock-batch", "--min-families", "1", "--out", "$.root"]
    inner = _batch("replay", command, "TeacherDone")
    inner.pop("Catch")  # a failed teacher fails the Map; its error goes to the outer Catch
    inner["ResultPath"] = "$.result"
    inner["Parameters"]["JobQueue.$"] = "$.batch.job_queue"
    return {
        "Type": "Map", "ItemsPath": "$.teachers", "MaxConcurrency": 8,
        "ItemSelector": {"teacher.$": "$$.Map.Item.Value", "root.$": "$.root",
                         "traces_run.$": "$.traces_run", "batch.$": "$.batch"},
        "ItemProcessor": {
            "ProcessorConfig": {"Mode": "INLINE"}, "StartAt": "ReplayTeacher",
            "States": {"ReplayTeacher": inner, "TeacherDone": {
                "Type": "Pass", "Parameters": {"teacher.$": "$.teacher",
                                               "job.$": "$.result.JobId"}, "End": True}},
        },
        "ResultPath": "$.results.replay", "Catch": _CATCH, "Next": nxt,
    }


def _manifest() -> dict[str, Any]:
    return {
        "Type": "Task", "Resource": "arn:aws:states:::aws-sdk:s3:putObject",
        "Parameters": {
            "Bucket.$": "$.bucket",
            "Key.$": "States.Format('{}reports/run_id={}/stepfunctions.json', $.prefix, "
                     "$.run_id)",
            "Body.$": "States.JsonToString($.results)",
            "ContentType": "application/json",
        },
        "ResultPath": "$.results.manifest", "Retry": _RETRY, "Catch": _CATCH, "End": True,
    }


def state_machine(stages: tuple[Stage, ...] = STAGES) -> dict[str, Any]:
    """The ASL definition. Input: ``root``, ``bucket``, ``prefix`` (of ``root`` in the
    bucket, ending in ``/`` or empty), ``run_id``, ``source``, ``batch`` {job_queue,
    job_definition}, ``emr`` {application_id, execution_role_arn, corpus_entry_point,
    spark_submit_parameters};
    optional ``traces_input`` + ``traces_run`` + ``glue`` {ingest_job}, ``teachers``."""
    shapes = stage_shapes(stages)
    names = [n for n, _ in shapes]
    states: dict[str, Any] = {
        "IngestTraces?": {"Type": "Choice", "Choices": [
            {"Variable": "$.traces_input", "IsPresent": True, "Next": "ingest"}],
            "Default": names[0]},
        "ingest": _glue(names[0]),
    }
    for k, (name, shape) in enumerate(shapes):
        nxt = names[k + 1] if k + 1 < len(names) else "manifest"
        after = "Replay?" if name == "rollouts" else nxt
        if shape == "batch":
            states[name] = _batch(name, _stage_command(name), after)
        else:
            states[name] = _emr(after)
        if name == "rollouts":  # teacher replay joins the rollouts' pairs before the corpus
            states["Replay?"] = {"Type": "Choice", "Choices": [
                {"Variable": "$.teachers", "IsPresent": True, "Next": "replay"}], "Default": nxt}
            states["replay"] = _replay("FanIn")
            # Teachers that finished together may each have written pairs without the
            # other's replies: the fan-in extracts them again from every stored reply.
            states["FanIn"] = _batch("replay_pairs", [
                "swemill", "replay", "--traces", "$.traces_run", "--out", "$.root",
                "--pairs-only"], nxt)
    states["manifest"] = _manifest()
    states["Failed"] = {"Type": "Fail", "Error": "SwemillStageFailed",
                        "CausePath": "States.JsonToString($.error)"}
    return {"Comment": "swemill build: " + " -> ".join(names), "StartAt": "IngestTraces?",
            "States": states}


_TERMINAL = {"Succeed", "Fail"}


def _targets(state: dict[str, Any]) -> list[str]:
    out = [state["Next"]] if "Next" in state else []
    out += [c["Next"] for c in state.get("Choices", ())]
    out += [state["Default"]] if "Default" in state else []
    out += [c["Next"] for c in state.get("Catch", ())]
    return out


def validate_asl(asl: dict[str, Any], where: str = "") -> list[str]:
    """Structural problems of an ASL definition (empty when it is sound): unknown targets,
    states with neither Next nor End, unreachable states; Map processors checked too."""
    problems: list[str] = []
    states: dict[str, Any] = asl.get("States", {})
    if asl.get("StartAt") not in states:
        problems.append(f"{where}StartAt {asl.get('StartAt')!r} is not a state")
    for name, state in states.items():
        kind = state.get("Type")
        if kind not in {"Task", "Pass", "Choice", "Map", "Parallel", "Wait", *_TERMINAL}:
            problems.append(f"{where}{name}: unknown Type {kind!r}")
        ends = state.get("End") is True
        if kind not in _TERMINAL and kind != "Choice" and ends == ("Next" in state):
            problems.append(f"{where}{name}: needs exactly one of Next and End")
        problems += [f"{where}{name}: goes to unknown state {t!r}"
                     for t in _targets(state) if t not in states]
        if kind == "Task" and not str(state.get("Resource", "")).startswith("arn:aws:states:::"):
            problems.append(f"{where}{name}: Resource is not a service integration ARN")
        if kind == "Map":
            problems += validate_asl(state.get("ItemProcessor", {}), f"{where}{name}/")
    seen: set[str] = set()
    todo: list[Any] = [asl.get("StartAt")]
    while todo:
        name = todo.pop()
        if name in seen or name not in states:
            continue
        seen.add(name)
        todo += _targets(states[name])
    problems += [f"{where}{n}: unreachable" for n in states if n not in seen]
    return problems


def control_flow_only(asl: dict[str, Any], keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """The same machine with Task states whose services an emulator cannot run turned into
    Pass states (same Next/End, ResultPath and a stand-in result), for executing the control
    flow. ``keep`` lists resource prefixes to leave as tasks (e.g. ``batch:``)."""
    import copy

    out = copy.deepcopy(asl)
    for name, state in out["States"].items():
        if state.get("Type") == "Map":
            state["ItemProcessor"] = control_flow_only(state["ItemProcessor"], keep)
        resource = str(state.get("Resource", "")).removeprefix("arn:aws:states:::")
        if state.get("Type") == "Task" and not resource.startswith(keep):
            stand_in = {k: state[k] for k in ("Next", "End", "ResultPath") if k in state}
            # The fields the real task's ResultSelector would pick, so later paths resolve.
            fields = [k.removesuffix(".$") for k in state.get("ResultSelector", {})]
            result = {"stand_in_for": resource} | {f: f"stand-in:{name}" for f in fields}
            out["States"][name] = {"Type": "Pass", "Result": result,
                                   "Comment": f"control-flow stand-in for {name}", **stand_in}
    return out
