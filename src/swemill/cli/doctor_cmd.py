"""``swemill doctor``: what is installed, what is missing, and the command that fixes it."""

from __future__ import annotations

import typer

from swemill.cli._common import emit_json
from swemill.cli.options import JsonOut


def register(app: typer.Typer) -> None:
    @app.command()
    def doctor(
        json_out: JsonOut = False,
    ) -> None:
        """Check the machine: sandbox, uv, git, Docker, cgroups, AWS credentials."""
        from rich.table import Table

        from swemill.cli._common import console
        from swemill.doctor import run_checks

        checks = run_checks()
        if json_out:
            emit_json(checks)
            return
        table = Table(title="swemill doctor")
        for col in ("check", "status", "detail", "fix"):
            table.add_column(col)
        for c in checks:
            mark = "[green]ok[/]" if c.ok else (
                "[yellow]optional[/]" if c.optional else "[red]missing[/]")
            table.add_row(c.name, mark, c.detail, c.fix or "")
        console.print(table)
