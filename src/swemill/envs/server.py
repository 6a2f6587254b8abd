"""``swemill serve``: the environment API over HTTP (Starlette; run by uvicorn).

Routes (JSON bodies; shapes follow OpenEnv's reset / step / state where they fit):

- ``POST /sessions`` ``{"task_id", "max_steps"?}`` -> 201 ``{"session_id", "observation"}``
  (a reset); 429 with ``Retry-After`` when ``max_sessions`` are open;
- ``POST /sessions/{id}/step`` ``{"action": {"name", "arguments", "id"?}}`` ->
  ``{"observation", "reward", "done", "info"}``; 409 once the episode is over;
- ``GET /sessions/{id}`` -> the session's state; ``DELETE /sessions/{id}`` closes it;
- ``GET /tasks`` -> the policy-visible task list; ``GET /health``; ``GET /openapi.json``.

Session work (forks, commands, grading) is blocking and runs in the thread pool. A session
idle past ``idle_timeout_s`` is closed by a reaper. With a token, every route but
``/health`` wants ``Authorization: Bearer <token>``; :func:`check_bind` refuses to bind
beyond loopback without one.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from swemill.core.errors import ConfigError, SessionError, SwemillError
from swemill.envs.env_pool import EnvPool
from swemill.envs.openapi import openapi_schema
from swemill.envs.schema import OpenRequest, StepRequest
from swemill.envs.session import Session
from swemill.envs.table import SessionTable, TableFull

__all__ = ["ServeConfig", "OpenRequest", "StepRequest", "create_app", "check_bind"]


@dataclass(frozen=True, slots=True)
class ServeConfig:
    host: str = "127.0.0.1"
    port: int = 8765
    max_sessions: int = 32
    """Open sessions at once; one more gets 429 with Retry-After."""
    max_steps: int = 50
    """Steps per episode (a request may ask for fewer); the last one is graded."""
    idle_timeout_s: float = 600.0
    """A session without a call for this long is closed."""
    token: str | None = None
    """Bearer token every request must carry (required off loopback)."""
    reap_every_s: float = 5.0


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(config: ServeConfig) -> None:
    if not is_loopback(config.host) and not config.token:
        raise ConfigError(f"binding {config.host} (beyond loopback) needs a bearer token: "
                          "pass --token or set SWEMILL_SERVE_TOKEN")


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def _body(request: Request, model: type[BaseModel]) -> Any:
    try:
        return model.model_validate_json(await request.body())
    except PydanticValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(map(str, err["loc"])) or "body"
        raise _HttpError(422, f"{where}: {err['msg']}") from None


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


Handler = Callable[[Request], Awaitable[Response]]


def create_app(pool: EnvPool, config: ServeConfig) -> Starlette:
    """The ASGI app over ``pool``; sessions are closed (and the pool with them) at shutdown."""
    check_bind(config)
    table = SessionTable(pool, max_sessions=config.max_sessions, max_steps=config.max_steps,
                         idle_timeout_s=config.idle_timeout_s)
    schema = openapi_schema()

    def guarded(handler: Handler, *, public: bool = False) -> Handler:
        async def run(request: Request) -> Response:
            if config.token and not public:
                given = request.headers.get("authorization", "")
                if not hmac.compare_digest(given.encode(), f"Bearer {config.token}".encode()):
                    return _error(401, "missing or wrong bearer token",
                                  {"WWW-Authenticate": "Bearer"})
            try:
                return await handler(request)
            except _HttpError as exc:
                return _error(exc.status, str(exc))
            except TableFull as exc:
                return _error(429, str(exc), {"Retry-After": str(exc.retry_after_s)})
            except SessionError as exc:
                return _error(409, str(exc))
            except SwemillError as exc:
                return _error(500, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return run

    async def open_session(request: Request) -> Response:
        body: OpenRequest = await _body(request, OpenRequest)
        if body.task_id not in pool.tasks:
            raise _HttpError(404, f"unknown task {body.task_id!r}")
        session, obs = await run_in_threadpool(table.open, body.task_id, body.max_steps)
        return JSONResponse({"session_id": session.session_id,
                             "observation": obs.model_dump(mode="json")}, status_code=201)

    def session_of(request: Request) -> Session:
        try:
            return table.get(request.path_params["session_id"])
        except SessionError as exc:
            raise _HttpError(404, str(exc)) from None

    async def step(request: Request) -> Response:
        session = session_of(request)
        body: StepRequest = await _body(request, StepRequest)
        result = await run_in_threadpool(session.step, body.action)
        return JSONResponse(result.model_dump(mode="json"))

    async def state(request: Request) -> Response:
        return JSONResponse(session_of(request).state().model_dump(mode="json"))

    async def close(request: Request) -> Response:
        closed = await run_in_threadpool(table.close, request.path_params["session_id"])
        if closed is None:
            raise _HttpError(404, f"no session {request.path_params['session_id']!r}")
        return JSONResponse(closed.state().model_dump(mode="json"))

    async def tasks(_request: Request) -> Response:
        return JSONResponse({"tasks": [c.model_dump(mode="json") for c in pool.cards()]})

    async def health(_request: Request) -> Response:
        return JSONResponse({"status": "ok", "sessions": len(table),
                             "max_sessions": config.max_sessions, "tasks": len(pool.tasks)})

    async def openapi(_request: Request) -> Response:
        return JSONResponse(schema)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async def reaper() -> None:
            while True:
                await asyncio.sleep(config.reap_every_s)
                await run_in_threadpool(table.reap)

        task = asyncio.create_task(reaper())
        try:
            yield
        finally:
            task.cancel()
            await run_in_threadpool(table.close_all)
            await run_in_threadpool(pool.close)

    routes = [
        Route("/sessions", guarded(open_session), methods=["POST"]),
        Route("/sessions/{session_id}/step", guarded(step), methods=["POST"]),
        Route("/sessions/{session_id}", guarded(state), methods=["GET"]),
        Route("/sessions/{session_id}", guarded(close), methods=["DELETE"]),
        Route("/tasks", guarded(tasks), methods=["GET"]),
        Route("/health", guarded(health, public=True), methods=["GET"]),
        Route("/openapi.json", guarded(openapi), methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.table = table
    return app
