"""Writing the replay stage: replies, pairs and (on request) teacher trajectories.

Replies are sharded per teacher (``replay/replies/run_id=<id>/part-<teacher>-<k>``), so a
replay of some teachers replaces their shards only; pairs are extracted from every teacher's
stored replies and replace the ``replay-*`` shards of ``pairs/``. No other shard is touched.
"""

from __future__ import annotations

from typing import Any

from swemill.core.records import PreferencePair, Trajectory
from swemill.corpus.stage import PAIRS_STAGE
from swemill.replay.replies import REPLIES_STAGE, TeacherReply
from swemill.store import Store
from swemill.store.layout import marker_key, part_key
from swemill.traces.states import TraceState

__all__ = ["stored_replies", "write_replies", "write_pairs"]

_ROWS_PER_SHARD = 5000


def _chunks(rows: list[Any]) -> list[list[Any]]:
    return [rows[i:i + _ROWS_PER_SHARD] for i in range(0, len(rows), _ROWS_PER_SHARD)]


def stored_replies(store: Store, run_id: str, skip: set[str]) -> list[TeacherReply]:
    """Replies earlier replays of this run stored for teachers not in ``skip`` (a run may
    replay one teacher at a time, e.g. one batch job per teacher in a workflow)."""
    if not store.complete_shards(REPLIES_STAGE, run_id):
        return []
    rows: list[TeacherReply] = store.read_records(REPLIES_STAGE, run_id, TeacherReply)
    return [r for r in rows if r.teacher not in skip]


def write_replies(store: Store, run_id: str, replies: list[TeacherReply],
                  teachers: list[str], states: list[TraceState],
                  emit_trajectories: bool) -> None:
    """Each teacher's replies (and trajectories) in its own shards, replacing that teacher's
    shards from an earlier replay and leaving every other teacher's alone."""
    for slug in teachers:
        _clear(store, REPLIES_STAGE, run_id, f"{slug}-")
        _clear(store, "trajectories", run_id, f"replay-{slug}-")
        mine = [r for r in replies if r.teacher == slug]
        for k, chunk in enumerate(_chunks(mine)):
            store.write_records(REPLIES_STAGE, run_id, f"{slug}-{k:05d}", chunk)
        if emit_trajectories:
            trajs = _teacher_trajectories(states, mine)
            for k, chunk in enumerate(_chunks(trajs)):
                store.write_records("trajectories", run_id, f"replay-{slug}-{k:05d}", chunk)


def write_pairs(store: Store, run_id: str, pairs: list[PreferencePair]) -> None:
    """The run's replay pairs, replacing the previous replay's (other pairs stay)."""
    _clear(store, PAIRS_STAGE, run_id, "replay-")
    for k, chunk in enumerate(_chunks(pairs)):
        store.write_records(PAIRS_STAGE, run_id, f"replay-{k:05d}", chunk)


def _clear(store: Store, stage: str, run_id: str, prefix: str) -> None:
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
