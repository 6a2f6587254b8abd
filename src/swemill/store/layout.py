"""The store layout: every key swemill writes, built in one place.

Stage first, then a Hive partition per run (``<stage>/run_id=<id>/...``) so that any
Parquet reader (pyarrow, datasets, Spark, Athena) sees ``run_id`` as a column. ``golden/``
sits apart from ``tasks/`` so that policy-visible prefixes can be granted without it.
Keys here are relative to the store root and always use ``/``.
"""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime

from swemill.core.errors import StoreError

__all__ = [
    "STAGES",
    "new_run_id",
    "check_run_id",
    "check_shard",
    "shard_name",
    "run_prefix",
    "part_key",
    "marker_key",
    "markers_prefix",
    "manifest_key",
    "gate_verdicts_key",
    "env_prefix",
    "replay_input_key",
    "replay_output_key",
    "report_key",
    "snapshot_key",
    "DEDUP_INDEX",
]

# Stages written as Parquet shards; ``corpus/*`` and ``index/dedup`` are stages too.
STAGES = (
    "tasks",
    "golden",
    "golden/feed",
    "candidates",
    "trajectories",
    "difficulty",
    "traces",
    "corpus/sft",
    "corpus/dpo",
    "corpus/holdout",
    "corpus/wm",
    "quarantine",
    "index/dedup",
)
DEDUP_INDEX = "index/dedup"

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_SHARD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_STAGE = re.compile(r"^[a-z][a-z0-9_]*(/[a-z][a-z0-9_]*)*$")
_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")


def new_run_id() -> str:
    """A run id that sorts by creation time: ``20260102T030405Z-1a2b3c``."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not _RUN_ID.match(run_id):
        raise StoreError(f"invalid run id {run_id!r}: use letters, digits, '_', '.', '-'")
    return run_id


def check_shard(shard: str) -> str:
    if not isinstance(shard, str) or not _SHARD.match(shard):
        raise StoreError(f"invalid shard name {shard!r}: use letters, digits, '_', '.', '-'")
    return shard


def check_stage(stage: str) -> str:
    if not _STAGE.match(stage):
        raise StoreError(f"invalid stage {stage!r}: lower-case words separated by '/'")
    return stage


def shard_name(index: int, total: int) -> str:
    """``shard_name(3, 16) == "00003-of-00016"``; sorts in shard order, k of n everywhere."""
    if not 0 <= index < total:
        raise StoreError(f"shard index {index} is outside 0..{total - 1}")
    return f"{index:05d}-of-{total:05d}"


def run_prefix(stage: str, run_id: str) -> str:
    return f"{check_stage(stage)}/run_id={check_run_id(run_id)}"


def part_key(stage: str, run_id: str, shard: str) -> str:
    return f"{run_prefix(stage, run_id)}/part-{check_shard(shard)}.parquet"


def markers_prefix(stage: str, run_id: str) -> str:
    # A leading underscore keeps pyarrow.dataset and `datasets` from reading markers as data.
    return f"{run_prefix(stage, run_id)}/_completions"


def marker_key(stage: str, run_id: str, shard: str) -> str:
    return f"{markers_prefix(stage, run_id)}/{check_shard(shard)}.json"


def manifest_key(run_id: str) -> str:
    return f"manifests/run_id={check_run_id(run_id)}.json"


def gate_verdicts_key(run_id: str) -> str:
    return f"gate/run_id={check_run_id(run_id)}/verdicts.jsonl"


def _slug(text: str) -> str:
    return _SLUG.sub("__", text.strip("/")) or "_"


def env_prefix(repo: str, commit: str) -> str:
    """``envs/<repo>@<commit>`` with ``/`` in the repo name turned into ``__``."""
    if not repo or not commit:
        raise StoreError("an environment key needs both a repository and a commit")
    return f"envs/{_slug(repo)}@{_slug(commit)}"


def replay_input_key(run_id: str, name: str) -> str:
    return f"replay/run_id={check_run_id(run_id)}/input/{_slug(name)}.jsonl"


def replay_output_key(run_id: str, teacher: str, name: str) -> str:
    return f"replay/run_id={check_run_id(run_id)}/teacher={_slug(teacher)}/{_slug(name)}.jsonl.out"


def report_key(run_id: str, name: str = "index.html") -> str:
    return f"reports/run_id={check_run_id(run_id)}/{_slug(name)}"


def snapshot_key(run_id: str, instance_id: str) -> str:
    """The scrubbed broken tree a task's sandbox starts from (``pack_tree`` bytes, ``.tar.gz``).

    Policy-visible, like ``tasks/``: a snapshot holds the broken state only, never the fix.
    """
    return f"snapshots/run_id={check_run_id(run_id)}/{_slug(instance_id)}.tar.gz"
