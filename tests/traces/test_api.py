"""The traces stage's public API is pinned: changing it is a deliberate act."""

import swemill.traces
from swemill.core import toolmap, tools


def test_traces_all_is_pinned() -> None:
    assert sorted(swemill.traces.__all__) == [
        "IngestCounts", "IngestOptions", "IngestResult", "Quarantine", "TraceState", "ingest",
        "ingest_session_file", "iter_items", "load_quarantine", "load_states",
        "load_trajectories",
    ]
    for name in swemill.traces.__all__:
        assert hasattr(swemill.traces, name), name


def test_tool_algebra_all_is_pinned() -> None:
    assert sorted(tools.__all__) == [
        "OTHER_PREFIX", "TOOL_NAMES", "ToolCall", "WORKSPACE_ROOT", "anthropic_tools",
        "normalize_command", "normalize_path", "tool_schemas", "validate_call",
    ]
    assert sorted(toolmap.__all__) == [
        "from_bash_agent", "from_claude_code", "from_codex", "from_swe_agent_action",
        "from_swe_agent_tool_call", "other_call",
    ]
    for mod in (tools, toolmap):
        for name in mod.__all__:
            assert hasattr(mod, name), name
