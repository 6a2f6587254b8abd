"""``swemill tasks SOURCE --out ROOT``: validated SWE tasks from a repository.

``swemill tasks export --out ROOT --run RUN_ID --format swebench`` writes a run's tasks as
SWE-bench JSONL instead: a Typer subcommand, with ``generate`` the one a SOURCE selects.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from swemill.cli._common import emit_json, fail
from swemill.cli.display import progress_bar
from swemill.cli.options import (
    AllowContaminated,
    Audit,
    Executor,
    JsonOut,
    MaxUsd,
    Out,
    Recipe,
    Repeat,
    SuiteTimeout,
)

if TYPE_CHECKING:
    from typer._click.core import Context  # the Click that Typer vendors


class _TasksGroup(TyperGroup):
    """``swemill tasks SOURCE ...`` is ``swemill tasks generate SOURCE ...``.

    A first argument that names no subcommand is a SOURCE. ``export`` is the subcommand,
    unless a directory of that name is meant and no ``--run`` was given (``./export`` always
    means the directory).
    """

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.get_help_option_names(ctx) and (
                args[0] not in self.commands or _export_dir_meant(args)):
            args = ["generate", *args]
        return super().parse_args(ctx, args)


def _export_dir_meant(args: list[str]) -> bool:
    given_run = any(a == "--run" or a.startswith("--run=") for a in args[1:])
    return args[0] == "export" and Path("export").is_dir() and not given_run


tasks_app = typer.Typer(
    cls=_TasksGroup, no_args_is_help=True,
    help="Generate candidate bugs in SOURCE, validate them with the four gates, write tasks."
         "\n\n`swemill tasks SOURCE --out ROOT [OPTIONS]` is short for `swemill tasks generate "
         "SOURCE ...` (see `swemill tasks SOURCE --help`); `swemill tasks export --out ROOT "
         "--run RUN_ID` writes a run's tasks as SWE-bench JSONL or Harbor task directories.")


@tasks_app.command("generate")
def generate(
    source: Annotated[str, typer.Argument(
        help="A directory, git URL, pypi:NAME==VER or sample.")],
    out: Out,
    strategies: Annotated[str, typer.Option(
        "--strategies", help="Comma-separated: procedural, pr-mirror, combine, rows, "
                             "lm-modify, lm-rewrite (these two need --bug-writer).")]
    = "procedural,pr-mirror,combine",
    rows: Annotated[Path | None, typer.Option(
        "--rows", help="SWE-bench / SWE-smith rows (JSON, JSONL or Parquet) for 'rows'.")]
    = None,
    max_tasks: Annotated[int | None, typer.Option(
        "--max-tasks", min=1, help="Tasks to write in all, shared between strategies "
        "(default 4).")] = None,
    workers: Annotated[int | None, typer.Option(
        "--workers", min=1, help="Parallel validation workers (default: CPU count).")]
    = None,
    seed: Annotated[int, typer.Option("--seed", help="Same seed, same tasks.")] = 0,
    audit: Audit = None,
    repeat: Repeat = 3,
    near_misses: Annotated[int, typer.Option(
        "--near-misses", min=0, help="Near-miss variants run against each task's lists "
        "for its near_miss columns (0: none).")] = 2,
    commit_envs: Annotated[int, typer.Option(
        "--commit-envs", min=0, help="Environments built for older base commits (pr-mirror, "
        "rows) that declare other dependencies than the head; the rest run in the head's "
        "(0: every such commit gets one).")] = 3,
    issue_writer: Annotated[str | None, typer.Option(
        "--issue-writer", help="Policy spec (e.g. openai:MODEL@URL) that writes each "
        "statement from the failing tests' evidence, or 'template'; leak-checked, the "
        "template if it leaks (default: the --bug-writer model if given, else the "
        "template).")] = None,
    bug_writer: Annotated[str | None, typer.Option(
        "--bug-writer", help="Policy spec (e.g. openai:MODEL@URL) of the model that writes "
        "the lm-modify / lm-rewrite bugs.")] = None,
    max_usd: MaxUsd = None,
    price: Annotated[str | None, typer.Option(
        "--price", help="IN,OUT dollars per million tokens of the bug and issue writers' "
        "models, where the price table does not know them ('0,0' for a free local server).")]
    = None,
    run_id: Annotated[str | None, typer.Option(
        "--run-id", help="Run id (default: a new time-sorted id).")] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Skip strategies whose shards are already complete.")] = False,
    allow_contaminated: AllowContaminated = False,
    backend: Annotated[str, typer.Option(
        "--backend", help="Sandbox backend: auto, bwrap, local.")] = "auto",
    executor: Executor = "local",
    suite_timeout: SuiteTimeout = None,
    recipe: Recipe = None,
    json_out: JsonOut = False,
) -> None:
    """Generate candidate bugs in SOURCE, validate them with the four gates, write tasks.

    Policy-visible rows go to tasks/run_id=<id>/ (plus scrubbed snapshots under
    snapshots/), everything that reveals the fix to golden/run_id=<id>/.
    """
    from swemill.store import Store

    summary = _run(source, Store.open(out), _config(
        strategies, rows, max_tasks, workers, seed, audit, allow_contaminated, backend,
        executor or "local", suite_timeout, recipe, repeat or 3, near_misses,
        issue_writer, commit_envs=commit_envs,
        model={"bug_writer": bug_writer, "max_usd": max_usd, "price": price}),
        run_id, resume, quiet=json_out)
    if json_out:
        emit_json(summary)
    else:
        _print(summary)
    if not summary["tasks"]:
        raise typer.Exit(1)


@tasks_app.command("export")
def export(
    out: Out,
    run: Annotated[str | None, typer.Option(
        "--run", help="The run whose tasks to export.")] = None,
    fmt: Annotated[str, typer.Option(
        "--format", help="'swebench' (JSONL) or 'harbor' (task directories, with the fix in "
        "solution/).")] = "swebench",
    dest: Annotated[Path | None, typer.Option(
        "--dest", help="swebench: JSONL file to write (default: stdout); harbor: the "
        "directory to write (required).")] = None,
) -> None:
    """Write a run's tasks as SWE-bench JSONL or Harbor task directories."""
    from swemill.store import Store

    if run is None:
        fail("export needs --run RUN_ID")
    _export(Store.open(out, check=False), run, fmt, dest)


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")


def _config(strategies: str, rows: Path | None, max_tasks: int | None, workers: int | None,
            seed: int,
            audit: int | None, allow_contaminated: bool, backend: str, executor: str = "local",
            suite_timeout: float | None = None, recipe: Path | None = None,
            repeat: int = 3, near_misses: int = 2, issue_writer: str | None = None, *,
            commit_envs: int = 3, model: dict[str, Any] | None = None) -> Any:
    from pydantic import ValidationError as PydanticError

    from swemill.validate.tasks_config import TasksConfig

    opts: dict[str, Any] = {
        "strategies": [s for s in strategies.split(",") if s.strip()], "rows": rows,
        "max_tasks": max_tasks, "seed": seed, "audit": audit,
        "allow_contaminated": allow_contaminated, "backend": backend, "executor": executor,
        "suite_timeout_s": suite_timeout, "recipe": recipe, "repeat": repeat,
        "near_misses": near_misses, "problem_writer": issue_writer,
        "commit_envs": commit_envs,
        **{k: v for k, v in (model or {}).items() if v is not None},
    }
    opts = {k: v for k, v in opts.items() if v is not None}  # else TasksConfig's default
    if workers is not None:
        opts["workers"] = workers
    if rows is not None and "rows" not in opts["strategies"]:
        opts["strategies"].append("rows")
    try:
        return TasksConfig(**opts).check()
    except PydanticError as exc:
        fail(str(exc.errors()[0]["msg"]))


def _run(source: str, store: Any, config: Any, run_id: str | None, resume: bool,
         quiet: bool) -> dict[str, Any]:
    from swemill.store import new_run_id
    from swemill.validate.validator import run_tasks

    rid = run_id or new_run_id()
    with progress_bar(enabled=not quiet) as progress:
        result = run_tasks(source, store, rid, config, resume=resume, progress=progress)
    return result.to_dict()  # type: ignore[no-any-return]


def _print(s: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    out = Console()
    out.print(f"run {s['run_id']}: {s['tasks']} task(s) from {s['candidates']} candidate(s) "
              f"of {s['repo']} ({s['license_tier']})", highlight=False)
    table = Table("strategy", "candidates", "valid", "written", "yield", "drops / note")
    for name, y in s["yields"].items():
        drops = ", ".join(f"{k} {v}" for k, v in sorted(y["drops"].items()))
        table.add_row(name, str(y["candidates"]), str(y["valid"]), str(y["tasks"]),
                      f"{100 * y['yield']:.0f}%", drops or (y["note"] or ""))
    out.print(table)
    for line in s.get("env_skipped", []):
        out.print(f"not installed (tests run without it): {line}", highlight=False,
                  markup=False)
    for key, what in s.get("commit_envs", {}).items():
        out.print(f"older commits' environment {key}: {what}", highlight=False, markup=False)
    for name, y in s["yields"].items():
        if y.get("calls"):
            out.print(f"{name}: {y['calls']} bug-writing call(s), ${y['cost_usd']:.4f}",
                      highlight=False)
        if y.get("statement_calls"):
            out.print(f"{name}: {y['statement_calls']} issue-writing call(s), "
                      f"${y['statement_cost_usd']:.4f}", highlight=False)
        if fell := y.get("statement_fallbacks"):
            why = ", ".join(f"{k} {v}" for k, v in sorted(fell.items()))
            out.print(f"{name}: {sum(fell.values())} statement(s) by the template instead "
                      f"({why})", highlight=False)
    t = s["timings_s"]
    out.print(f"setup {t.get('setup', 0):.1f} s, validation {t.get('validate', 0):.1f} s "
              f"({s['cpu_s']:.1f} CPU s), audited {s['audited']}"
              + (f" ({t['audit']:.1f} s)" if "audit" in t else ""), highlight=False)
    rejected = s.get("audit_rejected") or {}
    if rejected:
        out.print(f"[red]the audit removed {len(rejected)} of {s['audited']} audited task(s)"
                  "[/red] (their lists disagree with a cold run of the whole suite):")
        for iid, what in list(rejected.items())[:10]:
            out.print(f"  {iid}: {what}", highlight=False, markup=False)
    if flaky := s.get("head_flaky"):
        removed = s.get("flaky_removed") or {}
        out.print(f"{len(flaky)} test(s) did not pass on the head tree in a golden run or "
                  f"the audit (the baseline passed them): out of every list, first {flaky[0]}"
                  + (f"; {len(removed)} task(s) whose FAIL_TO_PASS held one removed"
                     if removed else ""), highlight=False, markup=False)
    if s.get("shadow_mismatches"):
        out.print(f"[red]shadow checks: the head image disagreed with an ordinary run "
                  f"{s['shadow_mismatches']} time(s) in {s['shadow_checks']}[/red]; the image was "
                  "off for the rest of the run (the ordinary results stand):")
        for what in s.get("shadow_details", []):
            out.print(f"  {what}", highlight=False, markup=False)
    for line in s["drop_lines"]:  # why candidates were dropped (candidates/ has every one)
        out.print(line, highlight=False, markup=False, soft_wrap=True)


def _export(store: Any, run: str, fmt: str, dest: Path | None) -> None:
    import json

    from swemill.core.records import Golden, Task
    from swemill.validate.export import swebench_rows

    if fmt == "harbor":
        from swemill.cli.export_cmd import harbor_export

        harbor_export(store, run, dest)
        return
    if fmt != "swebench":
        fail(f"unknown export format {fmt!r}: swebench or harbor")
    tasks = store.read_records("tasks", run, Task)
    goldens = store.read_records("golden", run, Golden)
    lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in swebench_rows(tasks, goldens)]
    if dest is None:
        sys.stdout.writelines(lines)
        return
    tmp = dest.with_name(f".{dest.name}.tmp")
    tmp.write_text("".join(lines), encoding="utf-8")
    tmp.replace(dest)
