"""``swemill build [SOURCE] --out ROOT``: the whole pipeline, from a source to SFT/DPO Parquet."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from swemill.cli import options as opt
from swemill.cli._common import emit_json
from swemill.cli.display import StageDisplay

if TYPE_CHECKING:
    from swemill.pipeline import BuildConfig, BuildResult


def register(app: typer.Typer) -> None:
    @app.command()
    def build(
        source: Annotated[str | None, typer.Argument(
            help="A directory, git URL, pypi:NAME==VER or 'sample' (default: the bundled "
                 "sample repository, scripted policies, no network).")] = None,
        out: opt.Out = "",
        policy: Annotated[list[str] | None, typer.Option(
            "--policy", help="Policy spec, repeatable (default: oracle and noisy-oracle:0.5).")]
        = None,
        samples: Annotated[int | None, typer.Option(
            "--samples", min=1,
            help="Rollouts per task, cycling through the policies (default 4).")] = None,
        max_tasks: Annotated[int | None, typer.Option(
            "--max-tasks", min=1, help="Validated tasks to keep (default 4).")] = None,
        strategies: Annotated[str | None, typer.Option(
            "--strategies", help="Comma-separated: procedural, pr-mirror, combine, lm-modify, "
                                 "lm-rewrite (default: the first three).")] = None,
        workers: Annotated[int | None, typer.Option(
            "--workers", min=1,
            help="Parallel workers for validation and for rollouts (default: the stages' "
                 "own, one per CPU and 1).")] = None,
        seed: Annotated[int | None, typer.Option(
            "--seed", help="Seed of every random choice (default 0).")] = None,
        executor: opt.Executor = None,
        suite_timeout: opt.SuiteTimeout = None,
        repeat: opt.Repeat = None,
        audit: opt.Audit = None,
        max_usd: opt.MaxUsd = None,
        issue_writer: Annotated[str | None, typer.Option(
            "--issue-writer", help="Policy spec that writes the tasks' statements from the "
                                   "failing tests' evidence, or 'template' (default: the "
                                   "--bug-writer model if given, else the template; spends "
                                   "from --max-usd).")] = None,
        bug_writer: Annotated[str | None, typer.Option(
            "--bug-writer", help="Policy spec of the model that writes the lm-modify / "
                                 "lm-rewrite bugs (spends from --max-usd).")] = None,
        price: Annotated[str | None, typer.Option(
            "--price", help="IN,OUT dollars per million tokens of the models the build calls "
                            "(bug and issue writers, rollout policies) where the price table "
                            "does not know them ('0,0' for a free local server).")] = None,
        difficulty: Annotated[str | None, typer.Option(
            "--difficulty", help="Keep the SFT/DPO rows of tasks labelled easy, medium or hard "
            "(solve rate from the build's rollouts); all keeps every row (default).")] = None,
        curriculum: Annotated[bool, typer.Option(
            "--curriculum", help="Order the SFT/DPO rows easy to hard instead of input "
                                 "order.")] = False,
        allow_contaminated: opt.AllowContaminated = False,
        recipe: opt.Recipe = None,
        emit: Annotated[list[str] | None, typer.Option(
            "--emit", help="Extra tables: 'wm' for world-model tuples.")] = None,
        resume: Annotated[bool, typer.Option(
            "--resume", help="Continue the latest unfinished build under ROOT (or --run-id).")]
        = False,
        run_id: Annotated[str | None, typer.Option(
            "--run-id", help="Run id: the one to resume, or the id a new build takes.")] = None,
        parent: Annotated[str | None, typer.Option(
            "--parent", help="Parent run id (lineage across generations).")] = None,
        stage: Annotated[list[str] | None, typer.Option(
            "--stage", help="Run only this stage (repeatable; for orchestrators): gate, env, "
                            "tasks, rollouts, corpus, report.")] = None,
        json_out: opt.JsonOut = False,
    ) -> None:
        """Gate -> env -> tasks -> rollouts -> corpus -> report, into one run under ROOT."""
        from swemill.cli._common import fail
        from swemill.pipeline import run_build
        from swemill.pipeline.config import RUNTIME_SETTINGS

        if not out:
            fail("--out ROOT is required: a directory or s3://bucket/prefix")
        extra = set(emit or ())
        if extra - {"wm"}:
            fail(f"unknown --emit {sorted(extra - {'wm'})}: the only extra table is 'wm'")
        flags: dict[str, Any] = {
            "policies": tuple(policy) if policy else None, "samples": samples,
            "max_tasks": max_tasks, "workers": workers,
            "strategies": tuple(x.strip() for x in strategies.split(",") if x.strip())
            if strategies else None, "seed": seed, "max_usd": max_usd, "executor": executor,
            "emit_wm": True if extra else None,
            "allow_contaminated": True if allow_contaminated else None,
            "suite_timeout_s": suite_timeout, "repeat": repeat, "audit": audit,
            "issue_writer": issue_writer, "bug_writer": bug_writer, "price": price,
            "recipe": recipe, "difficulty": difficulty,
            "curriculum": True if curriculum else None}
        given = {k: v for k, v in flags.items() if v is not None}
        if resume and (fixed := sorted(set(given) - RUNTIME_SETTINGS)):
            names = ", ".join("--" + k.replace("_", "-") for k in fixed)
            fail(f"--resume continues a run under its recorded settings; drop {names}")
        config = _config(given) if given or not resume else None
        with StageDisplay(enabled=not json_out) as display:
            result = run_build(source, out, config, resume=resume, run_id=run_id, parent=parent,
                               stages=stage or None, progress=display.event)
        if json_out:
            from swemill.pipeline.driver import describe

            emit_json(describe(result))
        else:
            _print_summary(result)


def _config(given: dict[str, Any]) -> BuildConfig:
    from pydantic import ValidationError

    from swemill.cli._common import fail
    from swemill.pipeline import BuildConfig

    try:
        return BuildConfig.from_flags(**given)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(map(str, err["loc"]))
        what = str(err["msg"]).removeprefix("Value error, ")
        fail(f"invalid setting {where}: {what}" if where else what)


def _print_summary(result: BuildResult) -> None:
    """Plain lines on stdout (URLs never wrapped, so they can be copied)."""
    from rich.console import Console

    from swemill.pipeline import STAGES
    from swemill.validate.drops import run_summary

    m = result.manifest
    out = Console(soft_wrap=True, highlight=False)
    if m.status != "complete":  # a --stage step of a longer run
        done = [k for k, v in m.metadata.get("build", {}).get("stages", {}).items()
                if v == "complete"]
        out.print(f"[bold]swemill build[/]: run {result.run_id} {m.status}; complete stages: "
                  f"{', '.join(done) or 'none'}")
        return
    where = result.locations()
    rows = result.rows
    lines = [
        ("SFT Parquet", f"{where['sft']}/  ({rows['sft_train']} rows)"),
        ("DPO Parquet", f"{where['dpo']}/  ({rows['dpo_train']} rows)"),
        ("held out", f"{where['holdout']}/  ({rows['sft_holdout']} SFT, "
                     f"{rows['dpo_holdout']} DPO rows)"),
        ("dataset card", where["card"]),
        ("report", where["report"]),
        ("manifest", where["manifest"]),
        ("cost", f"${m.cost_usd:.4f}"),
        ("time", ", ".join(f"{s.name} {m.timings_s[s.name]:.1f}s" for s in STAGES
                           if s.name in m.timings_s)),
    ]
    if result.skipped:
        lines.append(("resumed", "already finished: " + ", ".join(result.skipped)))
    drops = run_summary(result.store, result.run_id)
    if drops is not None:  # why candidates were dropped (candidates/ has every one)
        first, *rest = drops.lines()
        lines += [("candidates", first), *(("", line.strip()) for line in rest)]
    out.print(f"[bold]swemill build[/]: run {result.run_id} {m.status}")
    for note in m.metadata.get("build", {}).get("warnings", []):
        out.print(f"  [yellow]warning:[/] {note}")
    for key, value in lines:
        out.print(f"  {key:13} {value}", markup=False)
    load = f'datasets.load_dataset("parquet", data_files="{where["sft"]}/*.parquet")'
    out.print(f"  {'load with':13} {load}", markup=False)
