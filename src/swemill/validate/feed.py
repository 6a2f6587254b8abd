"""The bugs a strategy hands to ``combine``, written as a shard of their own (``golden/feed``).

``combine`` merges bugs the earlier strategies validated, and the first strategy validates a
few more than it writes as tasks so that combine has material. Combine reads those bugs back
from this shard, never from memory: a fresh run and a resumed one (which never saw the
earlier strategies' candidates) feed combine exactly the same bugs. The shard sits under
``golden/`` because a bug patch reveals the fix; policies never see it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import pyarrow as pa

from swemill.core.records import ChangedSymbol
from swemill.store import Store
from swemill.synth.combine import ValidatedBug

__all__ = ["FEED_STAGE", "write_feed", "read_feed", "feed_digest"]

FEED_STAGE = "golden/feed"

_SCHEMA = pa.schema([
    ("instance_id", pa.string()), ("bug_patch", pa.string()), ("base_commit", pa.string()),
    ("fail_to_pass", pa.list_(pa.string())), ("pass_to_pass", pa.list_(pa.string())),
    ("changed", pa.string()),  # JSON list of {file, qualname}
])


def write_feed(store: Store, run_id: str, shard: str, bugs: Sequence[ValidatedBug]) -> None:
    rows = [{"instance_id": b.instance_id, "bug_patch": b.bug_patch,
             "base_commit": b.base_commit, "fail_to_pass": list(b.fail_to_pass),
             "pass_to_pass": list(b.pass_to_pass),
             "changed": json.dumps([s.model_dump(mode="json") for s in b.changed])}
            for b in sorted(bugs, key=lambda b: b.instance_id)]
    store.write_records(FEED_STAGE, run_id, shard, rows, schema=_SCHEMA)


def read_feed(store: Store, run_id: str, shard: str) -> list[ValidatedBug]:
    """The bugs of one strategy's feed shard (checked against its marker)."""
    return [ValidatedBug(r["instance_id"], r["bug_patch"], r["base_commit"],
                         tuple(r["fail_to_pass"]), tuple(r["pass_to_pass"]),
                         tuple(ChangedSymbol(**s) for s in json.loads(r["changed"])))
            for r in store.read_shard(FEED_STAGE, run_id, shard)]


def feed_digest(bugs: Sequence[ValidatedBug]) -> str:
    """What combine was fed, as one short hash: a resume redoes combine when it changed."""
    ids = "\n".join(sorted(b.instance_id for b in bugs))
    return hashlib.sha256(ids.encode()).hexdigest()[:16]
