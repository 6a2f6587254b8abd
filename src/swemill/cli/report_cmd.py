"""``swemill report`` (not built yet)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this area's commands to the app. Nothing is registered until it is built."""
