"""The ``swemill`` command. Each area registers its commands from its own module."""

from __future__ import annotations

import typer

from swemill.cli import (
    aws_cmd,
    build_cmd,
    corpus_cmd,
    doctor_cmd,
    env_cmd,
    gate_cmd,
    probe_cmd,
    replay_cmd,
    report_cmd,
    rollout_cmd,
    sandbox_cmd,
    tasks_cmd,
    traces_cmd,
)

app = typer.Typer(
    name="swemill",
    help="Turn repositories and agent sessions into validated SWE tasks and training data.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)



@app.callback()
def _root() -> None:
    """swemill: repositories and agent sessions in, validated tasks and training data out."""


for _module in (
    doctor_cmd,
    sandbox_cmd,
    env_cmd,
    gate_cmd,
    tasks_cmd,
    rollout_cmd,
    traces_cmd,
    replay_cmd,
    corpus_cmd,
    build_cmd,
    report_cmd,
    aws_cmd,
    probe_cmd,
):
    _module.register(app)


def main() -> None:
    """Entry point: any :class:`SwemillError` becomes one red line and exit code 2."""
    import sys

    from rich.markup import escape

    from swemill.cli._common import console
    from swemill.core.errors import SwemillError

    try:
        app()
    except SwemillError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        console.print(f"[bold red]error:[/] {escape(first)}", highlight=False, soft_wrap=True)
        sys.exit(2)
