"""What a run of ``swemill tasks`` records per source and strategy in its manifest, and
reading a finished strategy back from its shards (``resume``)."""

from __future__ import annotations

import re

from swemill.core.errors import StoreError
from swemill.core.records import Golden, RunManifest, Task
from swemill.store import Store
from swemill.synth.combine import ValidatedBug
from swemill.validate.drops import CANDIDATES_STAGE
from swemill.validate.feed import FEED_STAGE, feed_digest
from swemill.validate.snapshot import digest
from swemill.validate.tasks_config import StrategyYield

__all__ = ["resumed", "shard_name", "sources_of"]

_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")


def shard_name(repo: str, name: str) -> str:
    return f"{_SLUG.sub('__', repo.strip('/'))}.{name}"[-120:].lstrip("._-") or name


def sources_of(manifest: RunManifest) -> dict[str, dict[str, dict[str, object]]]:
    """``source spec -> strategy -> {counts, tier}``: what each source of the run did."""
    return manifest.metadata.setdefault("tasks_sources", {})  # type: ignore[no-any-return]


def resumed(store: Store, spec: str, repo: str, run_id: str, name: str,
            manifest: RunManifest, bugs: list[ValidatedBug]
            ) -> tuple[StrategyYield, list[tuple[Task, Golden]]] | None:
    """What an earlier attempt recorded for strategy ``name``, read back from its shards;
    None when it must be redone (no record, a shard missing or corrupt, another feed)."""
    entry = sources_of(manifest).get(spec, {}).get(name)
    if entry is None:
        return None
    counts: dict[str, int] = entry["counts"]  # type: ignore[assignment]
    shard = shard_name(repo, name)
    if name == "combine" and entry.get("fed") != feed_digest(bugs):
        return None
    stages = ["golden", "tasks"] if counts.get("out", 0) else []
    stages += [FEED_STAGE] if entry.get("feed", 0) else []
    stages.append(CANDIDATES_STAGE)  # every strategy writes one (rows or not)
    if not all(store.is_intact(stage, run_id, shard) for stage in stages):
        return None
    pairs: list[tuple[Task, Golden]] = []
    if counts.get("out", 0):
        goldens = {g.instance_id: g for g in store.read_shard("golden", run_id, shard, Golden)}
        pairs = [(t, goldens[t.instance_id]) for t in store.read_shard("tasks", run_id, shard,
                                                                       Task)
                 if t.instance_id in goldens]
        if not all(_snapshot_intact(store, t) for t, _ in pairs):
            return None
    drops = {k.removeprefix("dropped_"): v for k, v in counts.items() if k.startswith("dropped_")}
    skipped = {k.removeprefix("skipped_"): v for k, v in counts.items()
               if k.startswith("skipped_")}
    fell = {k.removeprefix("statement_fallback_"): v for k, v in counts.items()
            if k.startswith("statement_fallback_")}
    return StrategyYield(counts.get("in", 0), len(pairs), counts.get("valid", len(pairs)),
                         drops, skipped, statement_fallbacks=fell), pairs


def _snapshot_intact(store: Store, task: Task) -> bool:
    try:
        return digest(store.get_bytes(task.snapshot)) == task.metadata.get("snapshot_sha256")
    except StoreError:
        return False
