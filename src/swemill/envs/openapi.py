"""The server's OpenAPI 3.1 document, written from the same pydantic records it speaks."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.json_schema import models_json_schema

from swemill.envs.schema import (
    Observation,
    OpenRequest,
    SessionState,
    StepRequest,
    StepResult,
    TaskCard,
)

__all__ = ["openapi_schema"]


class OpenResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")
    session_id: str
    observation: Observation


class TaskList(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tasks: list[TaskCard]


class ErrorBody(BaseModel):
    error: str


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(name: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(name)}}}


def _errors(*codes: int) -> dict[str, Any]:
    text = {401: "Missing or wrong bearer token", 404: "No such session or task",
            409: "The episode is over, or the session cannot take the call",
            422: "The body does not match the schema",
            429: "All sessions are in use; retry after the Retry-After seconds"}
    return {str(c): _json("ErrorBody", text[c]) for c in codes}


def openapi_schema() -> dict[str, Any]:
    models: list[type[BaseModel]] = [OpenRequest, StepRequest, OpenResponse, StepResult,
                                     SessionState, TaskList, ErrorBody]
    _, defs = models_json_schema([(m, "serialization") for m in models],
                                 ref_template="#/components/schemas/{model}")
    sid = [{"name": "session_id", "in": "path", "required": True, "schema": {"type": "string"}}]

    def body(name: str) -> dict[str, Any]:
        return {"required": True, "content": {"application/json": {"schema": _ref(name)}}}

    paths = {
        "/sessions": {"post": {
            "summary": "Open a session of a task and reset it", "requestBody": body("OpenRequest"),
            "responses": {"201": _json("OpenResponse", "The session and its first observation"),
                          **_errors(401, 404, 422, 429)}}},
        "/sessions/{session_id}/step": {"post": {
            "summary": "Carry out one tool call", "parameters": sid,
            "requestBody": body("StepRequest"),
            "responses": {"200": _json("StepResult", "Observation, reward, done, info"),
                          **_errors(401, 404, 409, 422)}}},
        "/sessions/{session_id}": {
            "get": {"summary": "The session's state", "parameters": sid,
                    "responses": {"200": _json("SessionState", "State"), **_errors(401, 404)}},
            "delete": {"summary": "Close the session", "parameters": sid,
                       "responses": {"200": _json("SessionState", "Its last state"),
                                     **_errors(401, 404)}}},
        "/tasks": {"get": {"summary": "The policy-visible task list",
                           "responses": {"200": _json("TaskList", "Tasks"), **_errors(401)}}},
        "/health": {"get": {"summary": "Liveness and load (no token needed)",
                            "responses": {"200": {"description": "ok"}}}},
    }
    return {"openapi": "3.1.0",
            "info": {"title": "swemill environment server", "version": "1"},
            "paths": paths,
            "components": {"schemas": defs.get("$defs", {}),
                           "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
            "security": [{"bearer": []}]}
