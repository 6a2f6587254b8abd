"""``swemill replay``: ask heterogeneous teachers to act on a traces run's states and turn their
disagreements into preference pairs for the corpus stage."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from swemill.cli._common import emit_json, fail
from swemill.cli.display import progress_bar
from swemill.cli.options import JsonOut, MaxUsd, Out

if TYPE_CHECKING:
    from swemill.core.progress import Progress

MODES = ("realtime", "bedrock-batch", "auto")
URGENCIES = ("low", "normal", "high")


def register(app: typer.Typer) -> None:
    @app.command()
    def replay(
        traces: Annotated[str, typer.Option("--traces", help="Run id of a `traces ingest` run.")],
        out: Out,
        teachers: Annotated[str, typer.Option(
            "--teachers", show_default=False,
            help="Comma-separated PROVIDER:MODEL, each optionally with @URL and "
                 "#family=F;price=IN/OUT; providers: openai, openrouter, anthropic, bedrock, "
                 "bedrock-batch.")] = "",
        max_usd: MaxUsd = None,
        mode: Annotated[str, typer.Option(
            "--mode", help="realtime, bedrock-batch or auto (batch when it pays).")] = "auto",
        concurrency: Annotated[int, typer.Option(
            "--concurrency", min=1, max=512, help="Realtime calls in flight.")] = 16,
        max_tokens: Annotated[int, typer.Option(
            "--max-tokens", min=16, help="Output tokens per teacher call.")] = 1024,
        min_families: Annotated[int, typer.Option(
            "--min-families", min=1, help="Model families the pool must span.")] = 3,
        consensus_families: Annotated[int, typer.Option(
            "--consensus-families", min=1,
            help="Families that must back a majority action for a consensus pair.")] = 3,
        pairs_only: Annotated[bool, typer.Option(
            "--pairs-only", help="Call no teacher: extract pairs again from the replies "
                                 "stored for the run (after one-teacher-at-a-time "
                                 "replays).")] = False,
        student_family: Annotated[str | None, typer.Option(
            "--student-family", help="Family of the model to be trained (kept out of the "
                                     "pool).")] = None,
        allow_student_family: Annotated[bool, typer.Option(
            "--allow-student-family", help="Allow teachers of the student's family.")] = False,
        limit: Annotated[int | None, typer.Option(
            "--limit", min=1, help="Replay only the first N states.")] = None,
        urgency: Annotated[str, typer.Option(
            "--urgency", help="low, normal or high (high never waits for batch jobs).")]
        = "normal",
        role_arn: Annotated[str | None, typer.Option(
            "--role-arn", help="IAM role Bedrock batch jobs run as "
                               "(default: $SWEMILL_BEDROCK_ROLE_ARN).")] = None,
        records_per_job: Annotated[int | None, typer.Option(
            "--records-per-job", min=1, help="Batch quota when Service Quotas is not "
                                             "readable.")] = None,
        min_records: Annotated[int | None, typer.Option(
            "--min-records", min=1, help="Batch job floor; fewer records go realtime.")]
        = None,
        service_quotas: Annotated[bool, typer.Option(
            "--service-quotas/--no-service-quotas",
            help="Read batch quotas from Service Quotas (else the configured ones).")] = True,
        judge: Annotated[str | None, typer.Option(
            "--judge", help="A teacher-style spec of an optional judge model for states "
                            "without another signal.")] = None,
        trajectories: Annotated[bool, typer.Option(
            "--trajectories", help="Also write one-step teacher trajectories.")] = False,
        json_out: JsonOut = False,
    ) -> None:
        """Replay a traces run with a heterogeneous teacher pool; write replies and pairs."""
        from dataclasses import asdict, replace

        from swemill.cli._common import console
        from swemill.replay.batch_plan import BatchQuotas
        from swemill.replay.run import ReplayConfig, run_replay
        from swemill.store import Store

        if not teachers.strip() and not pairs_only:
            fail("--teachers is required (unless --pairs-only)")
        if mode not in MODES:
            fail(f"unknown --mode {mode!r}: choose one of {', '.join(MODES)}")
        if urgency not in URGENCIES:
            fail(f"unknown --urgency {urgency!r}: choose one of {', '.join(URGENCIES)}")
        quotas = BatchQuotas()
        if records_per_job is not None:
            quotas = replace(quotas, max_records_per_job=records_per_job,
                             max_records_per_file=records_per_job,
                             min_records_per_job=min(quotas.min_records_per_job,
                                                     records_per_job))
        if min_records is not None:
            quotas = replace(quotas, min_records_per_job=min_records)
        cfg = ReplayConfig(
            teachers=[t for t in teachers.split(",") if t.strip()], max_usd=max_usd,
            mode=mode, concurrency=concurrency,  # type: ignore[arg-type]
            max_tokens=max_tokens, min_families=min_families,
            consensus_families=consensus_families, pairs_only=pairs_only,
            student_family=student_family,
            allow_student_family=allow_student_family, limit=limit,
            urgency=urgency,  # type: ignore[arg-type]
            role_arn=role_arn, quotas=quotas, service_quotas=service_quotas, judge=judge,
            emit_trajectories=trajectories)
        store = Store.open(out)
        with _progress(enabled=not json_out) as tick:
            summary = run_replay(store, traces, cfg, progress=tick)
        if json_out:
            emit_json(asdict(summary))
            return
        c = summary.counts
        console.print(
            f"replay {traces}: {c.get('in', 0)} states, {c.get('replies', 0)} replies, "
            f"{c.get('pairs', 0)} pairs (execution {c.get('pairs_execution', 0)}, error_signal "
            f"{c.get('pairs_error_signal', 0)}, consensus {c.get('pairs_consensus', 0)}, judge "
            f"{c.get('pairs_judge', 0)}); divergence {summary.divergence_rate:.1%}; "
            f"cost ${summary.cost_usd:.4f}", highlight=False)
        for slug, decision in summary.decisions.items():
            console.print(f"  {slug}: {decision}", highlight=False)


@contextmanager
def _progress(enabled: bool) -> Iterator[Progress | None]:
    """The realtime calls' progress bar on stderr (none with --json)."""
    if not enabled:
        yield None
        return
    with progress_bar(enabled=True, label="teacher calls") as update:
        yield update
