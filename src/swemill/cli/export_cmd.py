"""``swemill export trajectories --format atif|openai-messages`` and the Harbor task export
that ``swemill tasks export --format harbor`` runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from swemill.cli._common import console, emit_json, fail
from swemill.cli.options import JsonOut, Out

if TYPE_CHECKING:
    from swemill.store import Store


def harbor_export(store: Store, run: str, dest: Path | None) -> None:
    """Write ``run``'s tasks as Harbor task directories under ``dest``, warning of the fix."""
    from swemill.core.errors import SwemillError
    from swemill.exports.harbor import FIX_WARNING, export_harbor

    if dest is None:
        fail("--format harbor needs --dest DIR (one directory per task is written there)")
    if dest.exists() and any(dest.iterdir()):
        fail(f"--dest {dest} is not empty; choose a new directory")
    try:
        result = export_harbor(store, run, dest)
    except SwemillError as exc:
        fail(str(exc))
    console.print(f"[bold yellow]warning:[/] {FIX_WARNING}", highlight=False)
    console.print(f"wrote {result.tasks} Harbor tasks to {dest} ({result.recipes_found} with "
                  "their environment recipe from the cache)", highlight=False)


def register(app: typer.Typer) -> None:
    export = typer.Typer(help="Export a run's data to the formats other tools read.",
                         no_args_is_help=True)
    app.add_typer(export, name="export")

    @export.command("trajectories")
    def trajectories(
        run: Annotated[str, typer.Option("--run", help="The run whose trajectories to export.")],
        out: Out,
        fmt: Annotated[str, typer.Option(
            "--format", help="'atif' (Agent Trajectory Interchange Format, one JSON document "
            "per trajectory) or 'openai-messages' (JSONL rows: messages with tool_calls + "
            "tools).")] = "openai-messages",
        dest: Annotated[Path, typer.Option(
            "--dest", help="atif: a directory (one .json per trajectory); openai-messages: a "
            ".jsonl file.")] = Path("trajectories-export"),
        json_out: JsonOut = False,
    ) -> None:
        """Export a run's graded trajectories as ATIF documents or OpenAI chat messages."""
        from swemill.core.errors import SwemillError
        from swemill.exports.trajectories import export_trajectories
        from swemill.store import Store

        if fmt not in ("atif", "openai-messages"):
            fail(f"unknown --format {fmt!r}: atif or openai-messages")
        try:
            summary = export_trajectories(Store.open(out, check=False), run, fmt, dest)
        except SwemillError as exc:
            fail(str(exc))
        if json_out:
            emit_json(summary)
        else:
            console.print(f"wrote {summary['written']} trajectories as {fmt} to {dest}",
                          highlight=False)
