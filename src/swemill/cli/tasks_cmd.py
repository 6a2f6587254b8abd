"""``swemill tasks SOURCE --out ROOT``: validated SWE tasks from a repository.

``swemill tasks export --out ROOT --run RUN_ID --format swebench`` writes a run's tasks as
SWE-bench JSONL instead (one command: ``export`` in the SOURCE position selects it).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from swemill.cli._common import emit_json, fail


def register(app: typer.Typer) -> None:
    @app.command()
    def tasks(
        source: Annotated[str, typer.Argument(
            help="A directory, git URL, pypi:NAME==VER or sample; or 'export' to export a run.")],
        out: Annotated[str, typer.Option("--out", help="Store root: a path or s3://bucket/prefix.")],
        strategies: Annotated[str, typer.Option(
            "--strategies", help="Comma-separated: procedural, pr-mirror, combine, rows.")]
        = "procedural,pr-mirror,combine",
        rows: Annotated[Path | None, typer.Option(
            "--rows", help="SWE-bench / SWE-smith rows (JSON, JSONL or Parquet) for 'rows'.")]
        = None,
        max_tasks: Annotated[int, typer.Option(
            "--max-tasks", min=1, help="Tasks to write in all, shared between strategies.")] = 20,
        workers: Annotated[int | None, typer.Option(
            "--workers", min=1, help="Parallel validation workers (default: CPU count).")]
        = None,
        seed: Annotated[int, typer.Option("--seed", help="Same seed, same tasks.")] = 0,
        audit: Annotated[int | None, typer.Option(
            "--audit", min=0, help="Re-run the full suite cold on K written tasks and remove "
            "any that disagrees (default: every task below 20, else 10%, at least 2; 0: off).")]
        = None,
        repeat: Annotated[int, typer.Option(
            "--repeat", min=1, help="Runs of each broken tree: FAIL_TO_PASS tests must fail in "
            "every one (and pass in as many golden runs, at least 2).")] = 3,
        near_misses: Annotated[int, typer.Option(
            "--near-misses", min=0, help="Near-miss variants run against each task's lists "
            "for its near_miss columns (0: none).")] = 2,
        commit_envs: Annotated[int, typer.Option(
            "--commit-envs", min=0, help="Environments built for older base commits that "
            "declare other dependencies than the head (0: they run in the head's).")] = 3,
        run_id: Annotated[str | None, typer.Option(
            "--run-id", help="Run id (default: a new time-sorted id).")] = None,
        resume: Annotated[bool, typer.Option(
            "--resume", help="Skip strategies whose shards are already complete.")] = False,
        allow_contaminated: Annotated[bool, typer.Option(
            "--allow-contaminated", help="Let an evaluation benchmark's repository through.")]
        = False,
        backend: Annotated[str, typer.Option(
            "--backend", help="Sandbox backend: auto, bwrap, local.")] = "auto",
        executor: Annotated[str, typer.Option(
            "--executor",
            help="Where candidates are validated: local, ray or aws-batch.")] = "local",
        suite_timeout: Annotated[float | None, typer.Option(
            "--suite-timeout", min=1.0, help="Seconds one baseline run of the whole suite may "
                                             "take (default: derived from the number of tests).")]
        = None,
        recipe: Annotated[Path | None, typer.Option(
            "--recipe", help="Install recipe (TOML or JSON) instead of the detected one; "
                             "see docs/recipes.md.")] = None,
        run: Annotated[str | None, typer.Option(
            "--run", help="export: the run whose tasks to export.")] = None,
        fmt: Annotated[str, typer.Option(
            "--format", help="export: 'swebench' (JSONL) or 'harbor' (task directories, "
            "with the fix in solution/).")] = "swebench",
        dest: Annotated[Path | None, typer.Option(
            "--dest", help="export: JSONL file to write (default: stdout); harbor: the "
            "directory to write (required).")] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")]
        = False,
    ) -> None:
        """Generate candidate bugs in SOURCE, validate them with the four gates, write tasks.

        Policy-visible rows go to tasks/run_id=<id>/ (plus scrubbed snapshots under
        snapshots/), everything that reveals the fix to golden/run_id=<id>/.
        """
        from swemill.store import Store

        # ``tasks export`` is the subcommand, unless a directory of that name is meant and no
        # --run was given (``./export`` always means the directory)
        if source == "export" and (run is not None or not Path(source).is_dir()):
            if run is None:
                fail("export needs --run RUN_ID")
            _export(Store.open(out, check=False), run, fmt, dest)
            return
        summary = _run(source, Store.open(out), _config(
            strategies, rows, max_tasks, workers, seed, audit, allow_contaminated, backend,
            executor, suite_timeout, recipe, repeat, near_misses, commit_envs),
            run_id, resume, quiet=json_out)
        if json_out:
            emit_json(summary)
        else:
            _print(summary)
        if not summary["tasks"]:
            raise typer.Exit(1)


def _config(strategies: str, rows: Path | None, max_tasks: int, workers: int | None, seed: int,
            audit: int | None, allow_contaminated: bool, backend: str, executor: str = "local",
            suite_timeout: float | None = None, recipe: Path | None = None,
            repeat: int = 3, near_misses: int = 2, commit_envs: int = 3) -> Any:
    from pydantic import ValidationError as PydanticError

    from swemill.validate.tasks_config import TasksConfig

    opts: dict[str, Any] = {
        "strategies": [s for s in strategies.split(",") if s.strip()], "rows": rows,
        "max_tasks": max_tasks, "seed": seed, "audit": audit,
        "allow_contaminated": allow_contaminated, "backend": backend, "executor": executor,
        "suite_timeout_s": suite_timeout, "recipe": recipe, "repeat": repeat,
        "near_misses": near_misses, "commit_envs": commit_envs,
    }
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
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from swemill.cli._common import console
    from swemill.store import new_run_id
    from swemill.validate.validator import run_tasks

    rid = run_id or new_run_id()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=console, transient=True, disable=quiet) as bar:
        task = bar.add_task("starting", total=None)

        def progress(label: str, done: int, total: int) -> None:
            bar.update(task, description=label, completed=done, total=total or None)

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
