"""The sample's validated tasks, built once per session by tests/agent's fixture."""

from tests.agent.conftest import SampleTasks, sample_tasks  # noqa: F401 - the shared fixture

__all__ = ["SampleTasks"]
