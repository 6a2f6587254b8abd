"""Reading a finished Bedrock batch job back: ``.jsonl.out`` lines and ``manifest.json.out``.

Each output line is ``{"recordId", "modelInput", "modelOutput"}`` or, for a record that
failed, ``{"recordId", "modelInput", "error": {"errorCode", "errorMessage"}}``. Lines come in
any order and are joined to the records sent by ``recordId``.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

from swemill.core.records import Usage
from swemill.policies.policy import one_line
from swemill.replay import batch_format as bf
from swemill.replay.replies import TeacherReply, reply_from_message
from swemill.replay.teachers import TeacherSpec
from swemill.store import Store

if TYPE_CHECKING:
    from swemill.replay.bedrock_batch import JobInfo

__all__ = ["read_job_output", "parse_output_lines", "manifest_usage"]


def _reply_fail(t: TeacherSpec, state_id: str, error: str) -> TeacherReply:
    return TeacherReply(state_id=state_id, teacher=t.slug, spec=t.spec, family=t.family,
                        mode="bedrock-batch", status="batch_error", error=error)


def _line_reply(obj: dict[str, Any], t: TeacherSpec, fmt: str, discount: float
                ) -> TeacherReply:
    rid = str(obj["recordId"])
    err = obj.get("error")
    if err is not None or "modelOutput" not in obj:
        if isinstance(err, dict):
            detail = f"{err.get('errorCode', '?')}: {err.get('errorMessage', '')}"
        else:
            detail = str(err) if err is not None else "no modelOutput"
        return _reply_fail(t, rid, f"record failed: {one_line(detail)}")
    try:
        text, usage, _stop = bf.parse_output(fmt, obj["modelOutput"])
    except (ValueError, TypeError, AttributeError) as exc:
        return _reply_fail(t, rid, f"unreadable modelOutput: {one_line(exc)}")
    if t.price is not None:
        usage = usage.model_copy(update={"cost_usd": t.price.cost(usage) * discount})
    message, errors = bf.message_from_text(text, f"batch_{abs(hash(rid)) % 10**8}", usage)
    return reply_from_message(rid, t.slug, t.spec, t.family, "bedrock-batch", message, usage,
                              errors)


def parse_output_lines(text: str, sent: set[str], t: TeacherSpec, fmt: str, discount: float
                       ) -> tuple[dict[str, TeacherReply], Counter[str], list[str]]:
    """Replies by record id, counts, and the record ids that were never sent."""
    got: dict[str, TeacherReply] = {}
    counts: Counter[str] = Counter()
    strangers: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            counts["dropped_bad_output_line"] += 1
            continue
        if not isinstance(obj, dict) or "recordId" not in obj:
            counts["dropped_bad_output_line"] += 1
            continue
        rid = str(obj["recordId"])
        if rid not in sent:
            counts["dropped_unexpected_record"] += 1
            strangers.append(rid)
            continue
        if rid in got:
            counts["dropped_duplicate_record"] += 1
            continue
        got[rid] = _line_reply(obj, t, fmt, discount)
    return got, counts, strangers


def manifest_usage(store: Store, key: str) -> Usage | None:
    """Token totals from ``manifest.json.out`` (None when it is absent or unreadable)."""
    if not store.exists(key):
        return None
    try:
        data = json.loads(store.read_text(key))
        return Usage(input_tokens=int(data.get("inputTokenCount") or 0),
                     output_tokens=int(data.get("outputTokenCount") or 0))
    except (ValueError, TypeError, AttributeError):
        return None


def read_job_output(store: Store, info: JobInfo, t: TeacherSpec, fmt: str,
                    record_ids: list[str], discount: float
                    ) -> tuple[list[TeacherReply], Usage, Counter[str]]:
    """Every sent record's reply (an error reply when it has no line), the job's usage
    (``manifest.json.out`` first, else the sum over lines) and counts."""
    sent = set(record_ids)
    replies: dict[str, TeacherReply] = {}
    counts: Counter[str] = Counter()
    names = store.list_keys(info.output_prefix)
    outs = [n for n in names if n.endswith(".jsonl.out")]
    for name in outs:
        raw = store.get_bytes(f"{info.output_prefix}/{name}")
        got, c, strangers = parse_output_lines(raw.decode("utf-8", errors="replace"), sent, t,
                                               fmt, discount)
        counts.update(c)
        for rid, reply in got.items():
            replies.setdefault(rid, reply)
        if strangers:
            info.message = (info.message + f"; {len(strangers)} unexpected record(s), "
                            f"e.g. {strangers[0]!r}").lstrip("; ")
    missing = [rid for rid in record_ids if rid not in replies]
    for rid in missing:
        replies[rid] = _reply_fail(t, rid, f"no output line for this record (job {info.status})")
    counts["records_missing_output"] += len(missing)
    failed = [rid for rid in record_ids if replies[rid].status == "batch_error"]
    info.failed_records = failed
    counts["records_failed"] += len(failed)
    counts["records_ok"] += len(record_ids) - len(failed)
    usage = manifest_usage(store, f"{info.output_prefix}/manifest.json.out")
    if usage is None:
        counts["manifest_missing"] += 1
        usage = Usage()
        for r in replies.values():
            usage = usage + r.usage.model_copy(update={"cost_usd": 0.0})
    info.input_tokens, info.output_tokens = usage.input_tokens, usage.output_tokens
    return [replies[rid] for rid in record_ids], usage, counts
