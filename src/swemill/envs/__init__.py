"""swemill tasks as live RL environments: ``open(task, store) -> Session``;
``Session.reset() -> Observation``; ``Session.step(call) -> StepResult`` (observation, reward,
done, info); ``Session.close()``. :mod:`swemill.envs.server` serves the same over HTTP."""

from swemill.envs.env_pool import EnvPool
from swemill.envs.schema import (
    Observation,
    SessionState,
    StepInfo,
    StepResult,
    TaskCard,
    ToolCallIn,
)
from swemill.envs.session import Session, as_call, open_session

open = open_session  # noqa: A001 - the environment API's verb: swemill.envs.open(task, store)

__all__ = ["open", "open_session", "Session", "EnvPool", "Observation", "StepResult", "StepInfo",
           "SessionState", "TaskCard", "ToolCallIn", "as_call"]
