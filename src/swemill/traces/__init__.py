"""swemill.traces: agent session logs and trajectory files in, states and trajectories out.

``ingest(paths, store)`` reads Claude Code session JSONL (files or ``~/.claude/projects``
folders), mini-swe-agent ``.traj.json`` and SWE-agent ``.traj`` files and writes one
:class:`TraceState` per assistant turn (``traces/``), one ``Trajectory`` per session
(``trajectories/``) and what could not be read (``quarantine/``). ``iter_items`` is the same
stream without a store; ``load_states`` reads a run back with each state's history.
"""

from swemill.traces.claude_code import IngestOptions, ingest_session_file
from swemill.traces.ingest import IngestResult, ingest, iter_items
from swemill.traces.load import load_quarantine, load_states, load_trajectories
from swemill.traces.states import IngestCounts, Quarantine, TraceState

__all__ = [
    "IngestCounts",
    "IngestOptions",
    "IngestResult",
    "Quarantine",
    "TraceState",
    "ingest",
    "ingest_session_file",
    "iter_items",
    "load_quarantine",
    "load_states",
    "load_trajectories",
]
