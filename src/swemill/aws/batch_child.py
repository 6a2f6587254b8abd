"""The AWS Batch child: take one manifest line, do its work, write one result object.

Run as ``swemill aws batch-child`` in the worker image. Inputs come from the environment the
submitter set (``SWEMILL_BATCH_ROOT``, ``SWEMILL_BATCH_START``) and the one Batch sets
(``AWS_BATCH_JOB_ARRAY_INDEX``, ``AWS_BATCH_JOB_ATTEMPT``). Exit codes: 0 the item is
finished (its result may be a recorded failure of the work), 1 a transient failure with
attempts left (Batch retries), 2 bad input (a missing, malformed or vanished manifest, an
index beyond it): recorded, and not retried, because the same input fails the same way.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from swemill.core.errors import ConfigError, StoreError, SwemillError
from swemill.core.records import utcnow
from swemill.executors.aws_batch import BAD_INPUT_EXIT, JOB_KEY, manifest_key, result_key
from swemill.executors.codec import decode, encode, resolve_fn
from swemill.executors.executor import ItemResult, describe, run_one
from swemill.store import Store

__all__ = ["BatchChildError", "ChildOutcome", "child_position", "run_child", "process_age"]


class BatchChildError(SwemillError):
    """The child cannot do its item: the manifest or the index is wrong (not retried)."""


@dataclass(frozen=True, slots=True)
class ChildOutcome:
    index: int
    status: Literal["done", "failed", "retry", "skipped", "bad_input"]
    exit_code: int
    error: str | None = None


def process_age() -> float:
    """Seconds since this process was created (Linux ``/proc``), 0.0 where unknown."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rpartition(")")[2].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))


def _int_env(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError as exc:
        raise BatchChildError(f"{name}={raw!r} is not a whole number") from exc
    if value < 0:
        raise BatchChildError(f"{name}={raw!r} is negative")
    return value


def child_position(env: Mapping[str, str]) -> tuple[int, int]:
    """``(chunk start, line in the chunk's manifest)`` from the environment."""
    pos = _int_env(env, "AWS_BATCH_JOB_ARRAY_INDEX")
    if pos is None:
        pos = _int_env(env, "SWEMILL_BATCH_INDEX")
    if pos is None:
        raise BatchChildError(
            "AWS_BATCH_JOB_ARRAY_INDEX is not set: run the child as an AWS Batch array job "
            "(or set it by hand to run one line)"
        )
    return _int_env(env, "SWEMILL_BATCH_START") or 0, pos


def _manifest_line(job: Store, start: int, pos: int) -> dict[str, Any]:
    key = manifest_key(start)
    try:
        text = job.read_text(key)
    except StoreError as exc:
        raise BatchChildError(f"the manifest is gone or unreadable: {exc}") from exc
    lines = text.splitlines()
    if pos >= len(lines):
        raise BatchChildError(f"index {pos} is beyond the manifest {job.url_for(key)} "
                              f"({len(lines)} lines)")
    if not lines[pos].strip():
        raise BatchChildError(f"manifest line {pos} of {job.url_for(key)} is missing (blank)")
    try:
        line = json.loads(lines[pos])
    except json.JSONDecodeError as exc:
        raise BatchChildError(f"manifest line {pos} is not JSON ({exc})") from exc
    if not isinstance(line, dict) or not {"index", "fn", "item"} <= line.keys():
        raise BatchChildError(f"manifest line {pos} lacks index/fn/item: malformed manifest")
    if line["index"] != start + pos:
        raise BatchChildError(
            f"manifest line {pos} holds item {line['index']}, not {start + pos}: "
            "a line is missing or out of order"
        )
    return line


def _max_attempts(job: Store) -> int:
    try:
        return int(job.read_json(JOB_KEY).get("attempts", 1))
    except (StoreError, AttributeError, TypeError, ValueError):
        return 1  # without job.json, assume no retry is coming


def _write(job: Store, res: ItemResult[Any], final: bool, timings: dict[str, float],
           env: Mapping[str, str]) -> ItemResult[Any]:
    value: Any = None
    if res.ok:
        try:
            value = encode(res.value)
        except ConfigError as exc:
            res = ItemResult(res.index, False, None, describe(exc), False, res.attempts,
                             res.seconds)
    job.write_json(result_key(res.index), {
        "index": res.index, "ok": res.ok, "value": value, "error": res.error,
        "transient": res.transient, "final": final, "attempts": res.attempts,
        "seconds": res.seconds, "timings": timings, "written_at": utcnow(),
        "batch_job_id": env.get("AWS_BATCH_JOB_ID", ""),
    })
    return res


def run_child(job: Store, env: Mapping[str, str] | None = None) -> ChildOutcome:
    """Do the item this child's environment names; see the module docstring."""
    env = os.environ if env is None else env
    t0 = time.perf_counter()
    timings = {"process_to_start_s": round(process_age(), 4)}
    start, pos = child_position(env)
    index = start + pos
    attempt = _int_env(env, "AWS_BATCH_JOB_ATTEMPT") or 1
    key = result_key(index)
    if job.exists(key) and job.read_json(key).get("final"):
        return ChildOutcome(index, "skipped", 0)
    try:
        line = _manifest_line(job, start, pos)
        fn, item = resolve_fn(str(line["fn"])), decode(line["item"])
    except (BatchChildError, ConfigError) as exc:
        failed: ItemResult[Any] = ItemResult(index, False, None, describe(exc), False, attempt)
        _write(job, failed, True, timings, env)
        return ChildOutcome(index, "bad_input", BAD_INPUT_EXIT, failed.error)
    timings["start_to_env_ready_s"] = round(time.perf_counter() - t0, 4)
    res = run_one(fn, item, index, attempt)
    timings["env_ready_to_done_s"] = round(res.seconds, 4)
    timings["total_s"] = round(time.perf_counter() - t0 + timings["process_to_start_s"], 4)
    final = res.ok or not res.transient or attempt >= _max_attempts(job)
    res = _write(job, res, final, timings, env)
    if res.ok:
        return ChildOutcome(index, "done", 0)
    return ChildOutcome(index, "failed" if final else "retry", 0 if final else 1, res.error)
