"""``swemill sandbox run [OPTIONS] -- CMD...``: run one command in a fresh sandbox."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from swemill.cli._common import emit_json, fail
from swemill.cli.options import JsonOut

sandbox_app = typer.Typer(name="sandbox", help="Run commands in the sandbox.",
                          no_args_is_help=True)


@sandbox_app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run(
    cmd: Annotated[list[str], typer.Argument(help="The command and its arguments (after --).",
                                             show_default=False)],
    workspace: Annotated[Path | None, typer.Option(
        "--workspace", help="Workspace directory (read-write; as root, its contents are "
        "handed to the sandbox user); default: a fresh empty one.")]
    = None,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="Wall-clock seconds.")]
    = 60.0,
    memory: Annotated[int | None, typer.Option("--memory", min=16, help="Memory limit, MB.")]
    = 4096,
    pids: Annotated[int | None, typer.Option("--pids", min=1, help="Process limit.")] = 1024,
    disk: Annotated[int | None, typer.Option(
        "--disk-mb", min=1, help="What the workspace may hold in total, MB (killed: disk).")]
    = 4096,
    net: Annotated[bool, typer.Option("--net", help="Share the host network.")] = False,
    backend: Annotated[str, typer.Option("--backend", help="auto, bwrap, local or docker.")]
    = "auto",
    output_bytes: Annotated[int, typer.Option(
        "--output-bytes", min=0, help="Per-stream cap; past it head and tail are kept.")]
    = 1_000_000,
    json_out: JsonOut = False,
) -> None:
    """Run CMD in a fresh sandbox; exit with its exit code (non-zero when it was killed)."""
    import shutil

    from swemill.sandbox import Limits, open_sandbox
    from swemill.sandbox.leftovers import scratch_dir

    if workspace is not None and not workspace.is_dir():
        fail(f"workspace {workspace} is not a directory")
    limits = Limits(timeout_s=timeout, memory_mb=memory, pids=pids, disk_mb=disk, net=net,
                    output_bytes=output_bytes)
    scratch = scratch_dir("sandbox") if workspace is None else None
    try:
        with open_sandbox(workspace or scratch, backend=backend, limits=limits) as sb:  # type: ignore[arg-type]
            result = sb.exec(cmd)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    if json_out:
        emit_json({k: getattr(result, k) for k in
                   ("exit_code", "timed_out", "killed_reason", "stdout", "stderr", "wall_s",
                    "truncated")})
    else:
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        from swemill.cli._common import console

        why = f", killed: {result.killed_reason}" if result.killed_reason else ""
        console.print(f"[dim]exit {result.exit_code} in {result.wall_s:.3f}s{why}"
                      f"{', output truncated' if result.truncated else ''}[/]", highlight=False)
    code = result.exit_code if result.exit_code else (1 if result.killed_reason else 0)
    raise typer.Exit(min(code, 255))


def register(app: typer.Typer) -> None:
    app.add_typer(sandbox_app)
