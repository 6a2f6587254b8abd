"""The ``swemill`` command. Each area registers its commands from its own module."""

from __future__ import annotations

import typer

from swemill.cli import (
    aws_cmd,
    build_cmd,
    corpus_cmd,
    doctor_cmd,
    env_cmd,
    export_cmd,
    gate_cmd,
    probe_cmd,
    replay_cmd,
    report_cmd,
    rollout_cmd,
    sandbox_cmd,
    serve_cmd,
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
    serve_cmd,
    traces_cmd,
    replay_cmd,
    corpus_cmd,
    export_cmd,
    build_cmd,
    report_cmd,
    aws_cmd,
    probe_cmd,
):
    _module.register(app)


class Terminated(SystemExit):
    """Raised in the main thread on SIGTERM; exits ``128 + signal``, like the signal would."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum

    def __str__(self) -> str:
        import signal

        return f"terminated by {signal.Signals(self.signum).name}"


def _terminate(signum: int, _frame: object) -> None:
    """SIGTERM ends the command the way an error would: ``finally`` blocks and context
    managers run (sandboxes killed, cgroups and temporary folders removed, the manifest
    marked failed), then the process exits 143."""
    import signal

    signal.signal(signum, signal.SIG_DFL)  # a second SIGTERM is not delayed by clean-up
    raise Terminated(signum)


def _start_up() -> None:
    import signal

    from swemill.sandbox.leftovers import sweep

    signal.signal(signal.SIGTERM, _terminate)
    sweep()  # what killed swemill processes left behind: cgroups, temp folders, stores


def main() -> None:
    """Entry point: any :class:`SwemillError` becomes one red line and exit code 2."""
    import sys

    from rich.markup import escape

    from swemill.cli._common import console
    from swemill.core.errors import SwemillError
    from swemill.core.logs import cli_logging

    cli_logging(console)
    _start_up()
    try:
        app()
    except SwemillError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        console.print(f"[bold red]error:[/] {escape(first)}", highlight=False, soft_wrap=True)
        sys.exit(2)
    finally:
        from swemill.sandbox.leftovers import remove_own

        remove_own()  # what a SIGTERM cut short in a ``finally`` (mid-rmtree) is removed here
