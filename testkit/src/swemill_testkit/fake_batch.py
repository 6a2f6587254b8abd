"""A fake Bedrock batch service for tests and demos: real boto3 client, real S3 objects.

It hooks a ``bedrock`` boto3 client's events. When ``CreateModelInvocationJob`` succeeds it
"runs" the job: reads the input JSONL from S3 (the local S3 server in tests), answers each
record through a script, and writes what Bedrock writes — ``<output>/<job id>/<input
name>.out`` with one line per record (in shuffled order) and ``manifest.json.out`` with the
token totals. With ``respond=True`` it also answers the calls itself (job ARNs, statuses,
``InProgress`` first); otherwise botocore's Stubber answers and checks the calls, and the
fake only writes the outputs. The client validates every request against the service model
either way, and :meth:`FakeBatchService.respond` validates its own responses against it too.
"""

from __future__ import annotations

import json
import random
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from swemill.policies.policy import family_of
from swemill.replay import batch_format as bf

__all__ = ["FakeBatchService", "RecordError", "output_body"]


@dataclass(frozen=True, slots=True)
class RecordError:
    code: int = 400
    message: str = "bad request"


Script = Callable[[str, str, dict[str, Any]], "str | RecordError"]
"""(model id, record id, model input) -> the reply text, or a per-record error."""


def output_body(fmt: str, text: str, tokens_in: int, tokens_out: int) -> dict[str, Any]:
    """A ``modelOutput`` body in the model family's response format."""
    if fmt == "anthropic":
        return {"id": "msg_fake", "type": "message", "role": "assistant",
                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out}}
    if fmt == "meta":
        return {"generation": text, "prompt_token_count": tokens_in,
                "generation_token_count": tokens_out, "stop_reason": "stop"}
    if fmt == "mistral":
        return {"outputs": [{"text": text, "stop_reason": "stop"}]}
    return {"output": {"message": {"role": "assistant", "content": [{"text": text}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": tokens_in, "outputTokens": tokens_out,
                      "totalTokens": tokens_in + tokens_out}}


@dataclass(slots=True)
class _Job:
    arn: str
    params: dict[str, Any]
    final: str
    polls: int = 0


@dataclass(slots=True)
class FakeBatchService:
    storage_options: dict[str, Any]
    script: Script
    final_status: str = "Completed"
    """What every job ends as: Completed, PartiallyCompleted, Failed, Expired, Stopped."""
    failure_message: str = ""
    strangers: list[str] = field(default_factory=list)
    """Record ids to add to every output file though nobody sent them."""
    drop: set[str] = field(default_factory=set)
    """Record ids left out of the output (as a job that expired mid-way would)."""
    respond: bool = True
    seed: int = 0
    jobs: dict[str, _Job] = field(default_factory=dict)
    created: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, client: Any) -> FakeBatchService:
        ev = client.meta.events
        ev.register("before-parameter-build.bedrock.CreateModelInvocationJob", self._stash)
        ev.register("after-call.bedrock.CreateModelInvocationJob", self._run)
        if self.respond:
            ev.register("before-call.bedrock.CreateModelInvocationJob", self._create)
            ev.register("before-call.bedrock.GetModelInvocationJob", self._get)
        return self

    # -- events -----------------------------------------------------------------------------

    def _stash(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["swemill_fake_params"] = dict(params)

    def _create(self, model: Any, context: dict[str, Any], **_: Any) -> tuple[Any, dict]:
        arn = ("arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/"
               + secrets.token_hex(6))
        return self._ok(model, {"jobArn": arn})

    def _get(self, model: Any, params: dict[str, Any], **_: Any) -> tuple[Any, dict]:
        from urllib.parse import unquote

        ident = unquote(str(params.get("url_path", "")).rpartition("/model-invocation-job/")[2])
        job = next((j for a, j in self.jobs.items()
                    if ident and (a == ident or a.endswith("/" + ident))), None)
        if job is None:
            return self._error("ResourceNotFoundException", f"no job {ident}", 404)
        job.polls += 1
        status = "InProgress" if job.polls == 1 else job.final
        out = {"jobArn": job.arn, "jobName": job.params["jobName"],
               "modelId": job.params["modelId"], "roleArn": job.params["roleArn"],
               "status": status, "submitTime": "2026-01-01T00:00:00Z",
               "inputDataConfig": job.params["inputDataConfig"],
               "outputDataConfig": job.params["outputDataConfig"]}
        if status in ("Failed", "Expired", "Stopped") and self.failure_message:
            out["message"] = self.failure_message
        return self._ok(model, out)

    def _run(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if "jobArn" not in parsed:
            return  # the call failed; nothing to run
        params = context.get("swemill_fake_params") or {}
        with self._lock:
            self.jobs[parsed["jobArn"]] = _Job(parsed["jobArn"], params, self.final_status)
            self.created.append(params)
        if self.final_status in ("Completed", "PartiallyCompleted", "Expired"):
            self._write_outputs(parsed["jobArn"], params)

    # -- the job ------------------------------------------------------------------------------

    def _fs(self, uri: str) -> tuple[Any, str]:
        import fsspec

        return fsspec.core.url_to_fs(uri, **self.storage_options)  # type: ignore[no-any-return]

    def _write_outputs(self, arn: str, params: dict[str, Any]) -> None:
        in_uri = params["inputDataConfig"]["s3InputDataConfig"]["s3Uri"]
        out_uri = params["outputDataConfig"]["s3OutputDataConfig"]["s3Uri"].rstrip("/")
        fs, in_path = self._fs(in_uri)
        fmt = bf.format_for(family_of(params["modelId"]))
        lines, ok, failed, t_in, t_out = [], 0, 0, 0, 0
        for raw in fs.cat_file(in_path).decode().splitlines():
            rec = json.loads(raw)
            rid = rec["recordId"]
            if rid in self.drop:
                continue
            answer = self.script(params["modelId"], rid, rec["modelInput"])
            line: dict[str, Any] = {"recordId": rid, "modelInput": rec["modelInput"]}
            if isinstance(answer, RecordError):
                line["error"] = {"errorCode": answer.code, "errorMessage": answer.message}
                failed += 1
            else:
                n_in, n_out = len(raw) // 4, max(1, len(answer) // 4)
                line["modelOutput"] = output_body(fmt, answer, n_in, n_out)
                ok, t_in, t_out = ok + 1, t_in + n_in, t_out + n_out
            lines.append(line)
        for rid in self.strangers:
            lines.append({"recordId": rid, "modelInput": {},
                          "modelOutput": output_body(fmt, "stray", 1, 1)})
        random.Random(self.seed).shuffle(lines)  # output order is not guaranteed
        job_dir = f"{out_uri}/{arn.rpartition('/')[2]}"
        name = in_path.rpartition("/")[2]
        fs_out, out_path = self._fs(job_dir)
        fs_out.pipe_file(f"{out_path}/{name}.out",
                         "".join(json.dumps(x) + "\n" for x in lines).encode())
        manifest = {"totalRecordCount": ok + failed + len(self.drop),
                    "processedRecordCount": ok + failed, "successRecordCount": ok,
                    "errorRecordCount": failed, "inputTokenCount": t_in,
                    "outputTokenCount": t_out}
        fs_out.pipe_file(f"{out_path}/manifest.json.out", json.dumps(manifest).encode())

    # -- responses ------------------------------------------------------------------------------

    def _ok(self, model: Any, body: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        from botocore.awsrequest import AWSResponse
        from botocore.validate import validate_parameters

        if model.output_shape is not None:
            validate_parameters(_as_wire(body), model.output_shape)
        parsed = _parse_times(body)
        parsed["ResponseMetadata"] = {"HTTPStatusCode": 200}
        return AWSResponse("https://bedrock.fake", 200, {}, None), parsed

    def _error(self, code: str, message: str, status: int) -> tuple[Any, dict[str, Any]]:
        from botocore.awsrequest import AWSResponse

        parsed = {"Error": {"Code": code, "Message": message},
                  "ResponseMetadata": {"HTTPStatusCode": status}}
        return AWSResponse("https://bedrock.fake", status, {}, None), parsed


def _as_wire(body: dict[str, Any]) -> dict[str, Any]:
    return _parse_times(body)


def _parse_times(body: dict[str, Any]) -> dict[str, Any]:
    from datetime import datetime

    out = dict(body)
    for k in ("submitTime", "lastModifiedTime", "endTime"):
        if isinstance(out.get(k), str):
            out[k] = datetime.fromisoformat(out[k].replace("Z", "+00:00"))
    return out
