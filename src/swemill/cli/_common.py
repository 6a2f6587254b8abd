"""Shared CLI plumbing: one-line errors, JSON output, the console."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape

console = Console(stderr=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print one clear error line and exit non-zero."""
    first = message.strip().splitlines()[0] if message.strip() else "unknown error"
    console.print(f"[bold red]error:[/] {escape(first)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def keep_kinds(spec: str) -> frozenset[str]:
    """``--scrub-keep`` parsed, or one error line naming what may be kept."""
    from swemill.corpus.redact import parse_keep

    try:
        return parse_keep(spec)
    except ValueError as exc:
        fail(f"--scrub-keep: {exc}")


def to_jsonable(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if isinstance(obj, dict):
        return {k: to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    return obj


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(to_jsonable(obj), indent=2, sort_keys=True, default=str) + "\n")
