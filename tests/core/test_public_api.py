"""The public API is pinned: changing it is a deliberate act."""

import swemill


def test_all_is_pinned() -> None:
    assert sorted(swemill.__all__) == [
        "Candidate",
        "GateVerdict",
        "Golden",
        "Message",
        "PreferencePair",
        "RunManifest",
        "SwemillError",
        "Task",
        "ToolCall",
        "Trajectory",
        "__version__",
    ]
    for name in swemill.__all__:
        assert hasattr(swemill, name), name


def test_task_and_golden_share_no_fields_but_id() -> None:
    task_fields = set(swemill.Task.model_fields)
    golden_fields = set(swemill.Golden.model_fields)
    assert task_fields & golden_fields == {"instance_id"}
