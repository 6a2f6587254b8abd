"""Writing the replay stage: replies, pairs and (on request) teacher trajectories.

A rerun of replay on the same run replaces its own shards (``replay/replies/`` and the
``replay-*`` shards of ``pairs/`` and ``trajectories/``) and leaves every other shard alone.
"""

from __future__ import annotations

from typing import Any

from swemill.core.records import PreferencePair, Trajectory
from swemill.replay.records import REPLIES_STAGE, TeacherReply
from swemill.store import Store
from swemill.traces.records import TraceState

__all__ = ["write_outputs"]

_ROWS_PER_SHARD = 5000


def _chunks(rows: list[Any]) -> list[list[Any]]:
    return [rows[i:i + _ROWS_PER_SHARD] for i in range(0, len(rows), _ROWS_PER_SHARD)]


def write_outputs(store: Store, run_id: str, replies: list[TeacherReply],
                  pairs: list[PreferencePair], states: list[TraceState],
                  emit_trajectories: bool) -> None:
    from swemill.corpus.stage import PAIRS_STAGE

    # A rerun replaces the previous replay's shards; other stages' shards are not touched.
    _clear(store, REPLIES_STAGE, run_id, "")
    _clear(store, PAIRS_STAGE, run_id, "replay-")
    _clear(store, "trajectories", run_id, "replay-")
    for k, chunk in enumerate(_chunks(replies)):
        store.write_records(REPLIES_STAGE, run_id, f"{k:05d}", chunk)
    for k, chunk in enumerate(_chunks(pairs)):
        store.write_records(PAIRS_STAGE, run_id, f"replay-{k:05d}", chunk)
    if emit_trajectories:
        trajs = _teacher_trajectories(states, replies)
        for k, chunk in enumerate(_chunks(trajs)):
            store.write_records("trajectories", run_id, f"replay-{k:05d}", chunk)


def _clear(store: Store, stage: str, run_id: str, prefix: str) -> None:
    from swemill.store.layout import marker_key, part_key

    for shard in store.complete_shards(stage, run_id):
        if shard.startswith(prefix):
            store.delete(marker_key(stage, run_id, shard))  # unfinished first, then gone
            store.delete(part_key(stage, run_id, shard))


def _teacher_trajectories(states: list[TraceState], replies: list[TeacherReply]
                          ) -> list[Trajectory]:
    """One-step continuations: the state's history plus a teacher's action. They are kept
    out of SFT (``admission="preference"``): an action that was never executed is no
    demonstration."""
    by_id = {s.state_id: s for s in states}
    out = []
    for r in replies:
        state = by_id.get(r.state_id)
        if state is None or not r.usable or r.message is None:
            continue
        out.append(Trajectory(
            trajectory_id=f"{r.state_id}::{r.teacher}", source="replay", policy=r.spec,
            messages=[*state.messages, r.message], usage=r.usage, admission="preference",
            parent_id=state.trajectory_id, branch_point=state.prefix_len,
            metadata={"state_id": r.state_id, "family": r.family, "mode": r.mode}))
    return out
