"""``swemill rollout --tasks ROOT|RUN_ID --policy SPEC --out ROOT``: graded trajectories."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from swemill.cli._common import emit_json, fail
from swemill.cli.display import progress_bar
from swemill.cli.options import Executor, JsonOut, MaxUsd, Out

if TYPE_CHECKING:
    from swemill.store import Store


def register(app: typer.Typer) -> None:
    @app.command()
    def rollout(
        tasks: Annotated[str, typer.Option(
            "--tasks", help="A run id whose tasks are in --out, or a store root holding tasks "
            "(its newest run).")],
        out: Out,
        policy: Annotated[str | None, typer.Option(
            "--policy", help="openai:MODEL[@URL], anthropic:MODEL, bedrock:MODEL_ID, oracle, "
            "noisy-oracle:P, scripted:NAME; comma-separated for several teachers.")] = None,
        config_file: Annotated[Path | None, typer.Option(
            "--config", help="YAML or JSON file of RolloutConfig settings; flags override it.")]
        = None,
        samples: Annotated[int | None, typer.Option(
            "--samples", min=1, help="Candidates per task (gives each task's solve rate).")]
        = None,
        max_usd: MaxUsd = None,
        max_usd_task: Annotated[float | None, typer.Option(
            "--max-usd-task", min=0.0, help="Dollar limit per task.")] = None,
        workers: Annotated[int | None, typer.Option(
            "--workers", min=1, help="Tasks run at once [default: CPU count].")] = None,
        select: Annotated[str | None, typer.Option(
            "--select", help="'all', or 'fractional': keep tasks solved sometimes, not always.")]
        = None,
        price: Annotated[str | None, typer.Option(
            "--price", help="IN,OUT dollars per million tokens ('0,0' for a free local server).")]
        = None,
        max_turns: Annotated[int | None, typer.Option(
            "--max-turns", min=1, help="Model calls per attempt [default: 50].")] = None,
        max_tasks: Annotated[int | None, typer.Option(
            "--max-tasks", min=1, help="Roll out only the first N tasks (by id).")] = None,
        branch_turns: Annotated[str | None, typer.Option(
            "--branch-turns", help="Extra decision points (turns of the first sample), "
            "e.g. '2,4'.")] = None,
        backend: Annotated[str | None, typer.Option(
            "--backend", help="Sandbox backend: auto, bwrap, local.")] = None,
        executor: Executor = None,
        run_id: Annotated[str | None, typer.Option(
            "--run-id", help="Run to write (default: the tasks' run).")] = None,
        resume: Annotated[bool, typer.Option(
            "--resume", help="Skip shards that are already complete.")] = False,
        json_out: JsonOut = False,
    ) -> None:
        """Run a policy on a run's tasks; write trajectories/ and pairs/ of the run."""
        from swemill.agent.rollout import run_rollouts
        from swemill.store import Store

        if select not in (None, "all", "fractional"):
            fail(f"unknown --select {select!r}: use 'all' or 'fractional'")
        turns = None
        if branch_turns is not None:
            try:
                turns = [int(t) for t in branch_turns.split(",") if t.strip()]
            except ValueError:
                fail(f"--branch-turns must be comma-separated turn numbers, got {branch_turns!r}")
        flags = {"policy": policy, "samples": samples, "max_usd": max_usd,
                 "max_usd_task": max_usd_task, "workers": workers, "select": select,
                 "price": price, "max_turns": max_turns, "max_tasks": max_tasks,
                 "branch_turns": turns, "backend": backend, "executor": executor}
        config = _config(config_file, flags)
        store = Store.open(out)
        tasks_run = _tasks_run(store, tasks)
        result = _run(store, tasks_run, config, run_id, resume, quiet=json_out, fn=run_rollouts)
        if json_out:
            emit_json(asdict(result))
        else:
            _print(result)


def _config(path: Path | None, flags: dict[str, Any]) -> Any:
    """File settings, then the flags that were given, as one checked RolloutConfig."""
    import yaml
    from pydantic import ValidationError as PydanticError

    from swemill.agent.rollout import RolloutConfig

    values: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            fail(f"--config {path}: cannot read it: {' '.join(str(exc).split())}")
        if not isinstance(loaded, dict):
            fail(f"--config {path}: expected a mapping of RolloutConfig settings")
        values.update(loaded)
    values.update({k: v for k, v in flags.items() if v is not None})
    if not values.get("policy"):
        fail("no policy: pass --policy SPEC (or 'policy:' in --config)")
    try:
        return RolloutConfig(**values).check()
    except PydanticError as exc:
        err = exc.errors()[0]
        fail(f"{'.'.join(map(str, err['loc'])) or 'config'}: {err['msg']}")


def _tasks_run(store: Store, tasks: str) -> str:
    """The run id of the tasks, copying them into ``store`` when they live in another root."""
    from swemill.core.errors import StoreError
    from swemill.store import Store

    if tasks in store.list_runs("tasks"):
        return tasks
    try:
        source = Store.open(tasks, check=False)
        runs = source.list_runs("tasks")
    except StoreError:
        runs = []
    if not runs:
        fail(f"--tasks {tasks!r} is neither a run id with tasks in {store.url} nor a store "
             "root holding tasks/")
    run = runs[-1]
    if source.url_for("") != store.url_for(""):
        _copy_run(source, store, run)
    return run


def _copy_run(src: Store, dst: Store, run: str) -> None:
    """Tasks, goldens, snapshots and the manifest of ``run`` (the corpus reads them there)."""
    from swemill.core.records import Golden, Task
    from swemill.store.layout import manifest_key, run_prefix, shard_name

    if not dst.list_keys(run_prefix("tasks", run)):
        for stage, model in (("tasks", Task), ("golden", Golden)):
            if src.list_keys(run_prefix(stage, run)):
                rows = src.read_records(stage, run, model)
                dst.write_records(stage, run, shard_name(0, 1), rows)
    prefix = f"snapshots/run_id={run}"
    for name in src.list_keys(prefix):
        key = f"{prefix}/{name}"
        if not dst.exists(key):
            dst.put_bytes(key, src.get_bytes(key))
    if src.exists(manifest_key(run)) and not dst.exists(manifest_key(run)):
        dst.put_bytes(manifest_key(run), src.get_bytes(manifest_key(run)))


def _run(store: Store, tasks_run: str, config: Any, run_id: str | None, resume: bool,
         quiet: bool, fn: Any) -> Any:
    with progress_bar(enabled=not quiet) as progress:
        return fn(store, tasks_run, config, run_id=run_id, resume=resume, progress=progress)


def _print(r: Any) -> None:
    from rich.console import Console

    out = Console()
    c = r.counts
    out.print(f"run {r.run_id}: {c.get('trajectories', 0)} trajectories over {r.tasks} task(s), "
              f"{c.get('pairs', 0)} preference pairs, ${r.cost_usd:.4f} spent", highlight=False)
    out.print(f"admission: sft {c.get('sft', 0)}, preference {c.get('preference', 0)}, "
              f"withheld {c.get('withheld', 0)}; failed {c.get('failed', 0)}, flagged "
              f"{c.get('flagged', 0)}, format errors {c.get('format_errors', 0)}",
              highlight=False)
    if r.divergence_rate is not None:
        out.print(f"divergence rate {r.divergence_rate:.2f}", highlight=False)
    if r.difficulty:
        d = r.difficulty
        out.print(f"difficulty: easy {d.get('easy', 0)}, medium {d.get('medium', 0)}, hard "
                  f"{d.get('hard', 0)} ({d.get('measured', 0)} by solve rate, the rest by "
                  f"proxies; difficulty/run_id={r.run_id}/)", highlight=False)
    if r.shards_skipped:
        out.print(f"{r.shards_skipped} shard(s) already complete (--resume)")
    if r.stopped:
        out.print(f"[yellow]stopped: the --max-usd budget is spent; {r.shards_stopped} "
                  "shard(s) left for --resume[/]")
