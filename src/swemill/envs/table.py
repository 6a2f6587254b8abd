"""The server's open sessions: a bounded table with idle reaping (no HTTP in here)."""

from __future__ import annotations

import threading

from swemill.core.errors import SessionError
from swemill.envs.env_pool import EnvPool
from swemill.envs.schema import Observation
from swemill.envs.session import Session

__all__ = ["SessionTable", "TableFull"]


class TableFull(SessionError):
    """Every session slot is taken; ``retry_after_s`` says when one may free up."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class SessionTable:
    """At most ``max_sessions`` sessions; one idle longer than ``idle_timeout_s`` is closed."""

    def __init__(self, pool: EnvPool, *, max_sessions: int, max_steps: int,
                 idle_timeout_s: float) -> None:
        self.pool, self.max_sessions = pool, max_sessions
        self.max_steps, self.idle_timeout_s = max_steps, idle_timeout_s
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self.reaped = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def open(self, task_id: str, max_steps: int | None = None) -> tuple[Session, Observation]:
        """Reserve a slot, then reset a new session in it (the slot is freed on failure)."""
        steps = min(max_steps or self.max_steps, self.max_steps)
        session = Session(self.pool, task_id, max_steps=steps)
        with self._lock:
            if len(self._sessions) >= self.max_sessions:
                raise TableFull(f"all {self.max_sessions} sessions are in use", self._retry_after())
            self._sessions[session.session_id] = session
        try:
            return session, session.reset()
        except BaseException:
            self.close(session.session_id)
            raise

    def _retry_after(self) -> int:
        """Seconds until the most idle session would be reaped (at least 1)."""
        idle = max((s.idle_s() for s in self._sessions.values()), default=0.0)
        return max(1, int(self.idle_timeout_s - idle) + 1)

    def get(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionError(f"no session {session_id!r} (closed, reaped after "
                               f"{self.idle_timeout_s:g}s idle, or never opened)")
        return session

    def close(self, session_id: str) -> Session | None:
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is not None:
            session.close()
        return session

    def reap(self) -> int:
        """Close every session idle past the timeout; returns how many."""
        with self._lock:
            stale = [k for k, s in self._sessions.items() if s.idle_s() > self.idle_timeout_s]
        closed = sum(self.close(k) is not None for k in stale)
        self.reaped += closed
        return closed

    def close_all(self) -> None:
        for key in list(self._sessions):
            self.close(key)
