"""``swemill traces ingest``: agent session logs and trajectory files into the store."""

from __future__ import annotations

from pathlib import Path

import typer

from swemill.cli._common import emit_json
from swemill.policies.prices import Price

traces_app = typer.Typer(help="Import agent session logs and trajectories.", no_args_is_help=True)


@traces_app.command("ingest")
def ingest_cmd(
    paths: list[Path] = typer.Argument(  # noqa: B008
        ..., help="Session .jsonl files, ~/.claude/projects-style folders, .traj.json, .traj."
    ),
    out: str = typer.Option(..., "--out", help="Store root (a folder or s3:// URL)."),
    run_id: str | None = typer.Option(None, "--run-id", help="Run id (default: a new one)."),
    no_thinking: bool = typer.Option(False, "--no-thinking", help="Drop thinking blocks."),
    max_line_mb: float = typer.Option(
        32.0, "--max-line-mb", help="Quarantine JSONL lines (and whole .traj files) above this."
    ),
    prices: Path | None = typer.Option(  # noqa: B008
        None, "--prices", help="JSON price table for models swemill does not know: "
        '{"model-prefix": "IN,OUT"} in $ per million tokens.'),
    scrub_keep: str = typer.Option(
        "", "--scrub-keep", help="PII kinds to leave in the texts, comma-separated: email, ipv4, "
        "ipv6, ip (both). Secrets and home paths are always redacted."),
    json_out: bool = typer.Option(False, "--json", help="Print the counts as JSON."),
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
