"""``swemill corpus --run RUN_ID --out ROOT``: a run's trajectories and pairs -> SFT/DPO Parquet."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from swemill.cli._common import emit_json, fail, keep_kinds
from swemill.cli.options import JsonOut, Out, Run, ScrubKeep

if TYPE_CHECKING:
    from swemill.corpus.stage import CorpusSummary
    from swemill.store import Store

GROUPINGS = ("auto", "repo", "family", "task")


def register(app: typer.Typer) -> None:
    @app.command()
    def corpus(
        run: Run,
        out: Out,
        emit: Annotated[list[str] | None, typer.Option(
            "--emit", help="Extra tables: 'wm' for world-model tuples.")] = None,
        holdout: Annotated[float, typer.Option(
            "--holdout", min=0.0, max=0.95, help="Share of rows held out (whole groups).")] = 0.1,
        seed: Annotated[int, typer.Option("--seed", help="Seed of the held-out split.")] = 0,
        group_by: Annotated[str, typer.Option(
            "--group-by", help="Split groups: auto, repo, family, task.")] = "auto",
        no_dedup: Annotated[bool, typer.Option(
            "--no-dedup", help="Keep exact and near duplicates.")] = False,
        no_reasoning: Annotated[bool, typer.Option(
            "--no-reasoning", help="Leave thinking out of the rows.")] = False,
        scrub_keep: ScrubKeep = "",
        difficulty: Annotated[str, typer.Option(
            "--difficulty", help="Keep the rows of tasks labelled easy, medium or hard (solve "
            "rate where rollouts measured it, else proxies); all keeps every row.")] = "all",
        curriculum: Annotated[bool, typer.Option(
            "--curriculum", help="Order the rows easy to hard instead of input order.")]
        = False,
        resume: Annotated[bool, typer.Option(
            "--resume", help="Skip the run when its corpus and card are already written.")]
        = False,
        json_out: JsonOut = False,
    ) -> None:
        """Filter, scrub, dedup and split a run's records into TRL-ready SFT and DPO Parquet."""
        from swemill.corpus.assemble import DIFFICULTIES, CorpusConfig
        from swemill.corpus.split import SplitConfig
        from swemill.corpus.stage import run_corpus
        from swemill.store import Store

        extra = set(emit or ())
        if extra - {"wm"}:
            fail(f"unknown --emit {sorted(extra - {'wm'})}: the only extra table is 'wm'")
        if difficulty not in DIFFICULTIES:
            fail(f"unknown --difficulty {difficulty!r}: choose one of {', '.join(DIFFICULTIES)}")
        if group_by not in GROUPINGS:
            fail(f"unknown --group-by {group_by!r}: choose one of {', '.join(GROUPINGS)}")
        config = CorpusConfig(
            reasoning=not no_reasoning, emit_wm="wm" in extra, dedup=not no_dedup,
            scrub_keep=keep_kinds(scrub_keep), difficulty=difficulty, curriculum=curriculum,
            split=SplitConfig(holdout_fraction=holdout, seed=seed, group_by=group_by),  # type: ignore[arg-type]
        )
        store = Store.open(out)
        summary = run_corpus(store, run, config, resume=resume)
        if json_out:
            emit_json({"run_id": summary.run_id, "rows": summary.rows, "counts": summary.counts,
                       "card": store.url_for(summary.card_key), "skipped": summary.skipped})
            return
        _print(store, summary)


def _print(store: Store, summary: CorpusSummary) -> None:
    from swemill.cli._common import console

    if summary.skipped:
        console.print(f"corpus of run {summary.run_id} already written (--resume): nothing to do")
        return
    for name, n in summary.rows.items():
        console.print(f"{name:12} {n:6d} rows")
    drops = {f"{s}: {k[8:]}": n for s, c in summary.counts.items() for k, n in c.items()
             if k.startswith("dropped_")}
    for reason, n in sorted(drops.items(), key=lambda kv: -kv[1]):
        console.print(f"  dropped {n:5d}  {reason}")
    console.print(f"card: {store.url_for(summary.card_key)}")
