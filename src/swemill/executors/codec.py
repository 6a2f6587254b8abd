"""Work items and results as JSON, for backends that cross a process image (AWS Batch).

A pydantic model travels with its class path (``{"$model": "pkg.mod:Class", "data": ...}``)
so the child rebuilds the same type; anything else must be plain JSON. Functions travel as
``"pkg.mod:qualname"`` and must be importable by that name in the worker image.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from swemill.core.errors import ConfigError

__all__ = ["encode", "decode", "fn_ref", "resolve_fn"]


def _resolve(ref: str) -> Any:
    module, _, qual = ref.partition(":")
    if not module or not qual:
        raise ConfigError(f"{ref!r} is not a 'module:name' reference")
    try:
        obj: Any = importlib.import_module(module)
        for part in qual.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import {ref}: {exc}") from exc
    return obj


def fn_ref(fn: Callable[..., Any]) -> str:
    """The importable name of ``fn``; lambdas and nested functions have none."""
    ref = f"{getattr(fn, '__module__', '')}:{getattr(fn, '__qualname__', '')}"
    if "<" in ref or _safe_resolve(ref) is not fn:
        raise ConfigError(
            f"{fn!r} cannot run on another machine: use a module-level function "
            "(importable as module:name)"
        )
    return ref


def _safe_resolve(ref: str) -> Any:
    try:
        return _resolve(ref)
    except ConfigError:
        return None


def resolve_fn(ref: str) -> Callable[[Any], Any]:
    fn = _resolve(ref)
    if not callable(fn):
        raise ConfigError(f"{ref} is not callable")
    return fn  # type: ignore[no-any-return]


def encode(obj: Any) -> dict[str, Any]:
    if isinstance(obj, BaseModel):
        cls = type(obj)
        return {"$model": f"{cls.__module__}:{cls.__qualname__}",
                "data": obj.model_dump(mode="json")}
    try:
        json.dumps(obj, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"a {type(obj).__name__} cannot be a remote work item or result: use a pydantic "
            f"model or plain JSON ({exc})"
        ) from exc
    return {"data": obj}


def decode(wire: Any) -> Any:
    if not isinstance(wire, dict) or "data" not in wire:
        raise ConfigError("not an encoded value (an object with 'data' is expected)")
    if "$model" not in wire:
        return wire["data"]
    cls = _resolve(str(wire["$model"]))
    if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
        raise ConfigError(f"{wire['$model']} is not a pydantic model")
    return cls.model_validate(wire["data"])
