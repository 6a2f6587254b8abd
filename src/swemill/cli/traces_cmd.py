"""``swemill traces ingest``: agent session logs and trajectory files into the store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from swemill.cli._common import emit_json
from swemill.cli.options import JsonOut, Out, ScrubKeep
from swemill.policies.prices import Price

traces_app = typer.Typer(help="Import agent session logs and trajectories.", no_args_is_help=True)


@traces_app.command("ingest")
def ingest_cmd(
    paths: Annotated[list[Path], typer.Argument(
        help="Session .jsonl files, ~/.claude/projects-style folders, .traj.json, .traj.")],
    out: Out,
    run_id: Annotated[str | None, typer.Option(
        "--run-id", help="Run id (default: a new one).")] = None,
    no_thinking: Annotated[bool, typer.Option(
        "--no-thinking", help="Drop thinking blocks.")] = False,
    max_line_mb: Annotated[float, typer.Option(
        "--max-line-mb", help="Quarantine JSONL lines (and whole .traj files) above this.")]
    = 32.0,
    prices: Annotated[Path | None, typer.Option(
        "--prices", help="JSON price table for models swemill does not know: "
        '{"model-prefix": "IN,OUT"} in $ per million tokens.')] = None,
    scrub_keep: ScrubKeep = "",
    json_out: JsonOut = False,
) -> None:
    """One state per assistant turn and one trajectory per session, in the canonical IR.

    Exits 1 (after the counts) when nothing in the input was usable."""
    from swemill.cli._common import console, fail, keep_kinds
    from swemill.store import Store
    from swemill.traces.claude_code import IngestOptions
    from swemill.traces.ingest import ingest
    from swemill.traces.scrub_hook import Scrubber

    if max_line_mb <= 0:
        fail("--max-line-mb must be positive")
    opts = IngestOptions(keep_thinking=not no_thinking, max_line_bytes=int(max_line_mb * 2**20),
                         prices=_price_table(prices) if prices is not None else {},
                         scrub_keep=keep_kinds(scrub_keep))
    result = ingest(paths, Store.open(out), run_id, opts)
    counts = result.counts
    if counts.unpriced:
        listed = ", ".join(f"{m} ({n} turns)" for m, n in sorted(counts.unpriced.items()))
        typer.echo(f"warning: no price for {listed}: costed at $0; pass --prices FILE",
                   err=True)
    if json_out:
        emit_json({"run_id": result.run_id, "counts": counts, "shards": result.shards,
                   "status": "failed" if result.error else "complete", "error": result.error})
    else:
        if not Scrubber.active:
            console.print("[yellow]warning:[/] secrets scrubbing is not available yet; "
                          "texts were stored as found")
        _print_counts(result.run_id, counts, out)
    if result.error:
        fail(result.error, code=1)


def _price_table(path: Path) -> dict[str, Price]:
    import json

    from swemill.cli._common import fail
    from swemill.core.errors import ConfigError
    from swemill.policies.prices import parse_price

    try:
        raw = json.loads(path.read_text())
        if not isinstance(raw, dict):
            raise ValueError("not an object")
        return {str(model): parse_price(str(price)) for model, price in raw.items()}
    except (OSError, ValueError, ConfigError) as exc:
        fail(f"--prices {path}: {exc} (expected {{\"model-prefix\": \"IN,OUT\"}})")


def _print_counts(run_id: str, counts: object, out: str) -> None:
    from rich.table import Table

    from swemill.cli._common import console

    c = counts.model_dump()  # type: ignore[attr-defined]
    table = Table(title=f"traces ingest -> {out} (run {run_id})")
    table.add_column("count")
    table.add_column("value", justify="right")
    for key in ("files", "sessions", "subagent_sessions", "sidechains", "branches",
                "trajectories", "assistant_turns", "tool_calls", "tool_errors",
                "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
                "lines", "quarantined", "quarantined_files", "reattached",
                "redacted_thinking", "images"):
        table.add_row(key, str(c[key]))
    table.add_row("cost_usd", f"{c['cost_usd']:.4f}")
    for group in ("skipped_types", "dropped", "unpriced"):
        for k, v in sorted(c[group].items()):
            table.add_row(f"{group}.{k}", str(v))
    console.print(table)


def register(app: typer.Typer) -> None:
    app.add_typer(traces_app, name="traces")
