"""Reading the traces stage back: states with their history put back in."""

from __future__ import annotations

from swemill.core.errors import StoreError
from swemill.core.records import Trajectory
from swemill.core.segments import join_segments
from swemill.store import Store
from swemill.traces.states import Quarantine, TraceState

__all__ = ["load_states", "load_trajectories", "load_quarantine"]


def load_trajectories(store: Store, run_id: str) -> list[Trajectory]:
    """The run's trajectories, a long session's segment rows joined into one."""
    return join_segments(store.read_records("trajectories", run_id, Trajectory))


def load_quarantine(store: Store, run_id: str) -> list[Quarantine]:
    try:
        return store.read_records("quarantine", run_id, Quarantine)
    except StoreError:
        if store.list_keys(f"quarantine/run_id={run_id}"):
            raise
        return []  # nothing was quarantined: the run wrote no quarantine shard


def load_states(store: Store, run_id: str, *, with_messages: bool = True) -> list[TraceState]:
    """Every state of a run; with ``with_messages`` each gets ``messages`` back from its
    trajectory (``messages[context_start:prefix_len]``)."""
    states: list[TraceState] = store.read_records("traces", run_id, TraceState)
    if not with_messages:
        return states
    trajectories = {t.trajectory_id: t for t in load_trajectories(store, run_id)}
    for state in states:
        traj = trajectories.get(state.trajectory_id)
        if traj is None:
            raise StoreError(f"run {run_id}: state {state.state_id} names a missing trajectory")
        state.messages = traj.messages[state.context_start : state.prefix_len]
    return states
