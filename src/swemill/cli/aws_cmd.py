"""``swemill aws``: the AWS Batch child entrypoint and the generated Step Functions definition."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from swemill.cli.options import Executor, JsonOut, Out

aws_app = typer.Typer(help="Run on AWS: Batch child, state machine.", no_args_is_help=True)


@aws_app.command("batch-child")
def batch_child_cmd(
    root: Annotated[str, typer.Option(
        "--root", envvar="SWEMILL_BATCH_ROOT",
        help="The Batch job folder holding job.json and the manifests (set by the submitter).",
    )],
    json_out: JsonOut = False,
) -> None:
    """Do the manifest line AWS_BATCH_JOB_ARRAY_INDEX names; write its result object.

    Exit 0: finished (its result may record a failure of the work); 1: transient failure,
    Batch retries; 2: bad input (recorded, not retried).
    """
    from swemill.aws.batch_child import run_child
    from swemill.cli._common import console, emit_json
    from swemill.core.logs import worker_logging
    from swemill.store import Store

    worker_logging()  # plain lines in the container's log (CloudWatch), not Rich's
    outcome = run_child(Store(root))
    if json_out:
        emit_json({"index": outcome.index, "status": outcome.status, "error": outcome.error,
                   "exit_code": outcome.exit_code})
    elif outcome.error:
        colour = "red" if outcome.status == "bad_input" else "yellow"
        console.print(f"[bold {colour}]item {outcome.index} {outcome.status}:[/] {outcome.error}",
                      highlight=False, soft_wrap=True)
    else:
        console.print(f"item {outcome.index}: {outcome.status}")
    raise typer.Exit(outcome.exit_code)


@aws_app.command("run-stage")
def run_stage_cmd(
    name: Annotated[str, typer.Argument(
        help="Stage: gate, env, tasks, rollouts, corpus, report.")],
    out: Out,
    run_id: Annotated[str, typer.Option("--run-id", help="The run this stage belongs to.")],
    source: Annotated[str, typer.Option(
        "--source", help="The build's source (first stage).")] = "sample",
    executor: Executor = None,
) -> None:
    """Run one build stage, as a Step Functions state does (skipped when already complete)."""
    from swemill.aws.run_stage import run_stage
    from swemill.cli._common import console
    from swemill.store import Store

    summary = run_stage(name, Store.open(out), run_id, source, executor=executor or None)
    console.print(f"{name}: " + ("already complete" if summary is None else str(dict(summary))))


@aws_app.command("state-machine")
def state_machine_cmd(
    out: Annotated[Path | None, typer.Option(
        "--out", help="Write the ASL JSON here (default: stdout).")] = None,
) -> None:
    """The pipeline's Step Functions definition (ASL JSON), generated from the stage list."""
    import json
    import sys

    from swemill.aws.stepfunctions import state_machine

    text = json.dumps(state_machine(), indent=2, sort_keys=False) + "\n"
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text)


def register(app: typer.Typer) -> None:
    app.add_typer(aws_app, name="aws")
