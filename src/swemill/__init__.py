"""swemill: repositories and agent sessions in, validated tasks and training data out."""

from swemill.core.errors import SwemillError
from swemill.core.records import (
    Candidate,
    GateVerdict,
    Golden,
    Message,
    PreferencePair,
    RunManifest,
    Task,
    Trajectory,
)
from swemill.core.tools import ToolCall

__version__ = "0.1.0"

__all__ = [
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
