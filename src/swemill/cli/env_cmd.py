"""``swemill env SOURCE``: build (or reuse) the environment, run the baseline, summarise it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from swemill.cli._common import emit_json, fail
from swemill.cli.options import JsonOut, Recipe, SuiteTimeout

BACKENDS = ("auto", "bwrap", "local", "docker")


def register(app: typer.Typer) -> None:
    @app.command()
    def env(
        source: Annotated[str, typer.Argument(
            help="A directory, a git URL (URL@REF for a ref), pypi:NAME==VER, or sample.")],
        json_out: JsonOut = False,
        recipe: Recipe = None,
        rebuild: Annotated[bool, typer.Option(
            "--rebuild", help="Rebuild the environment and the baseline.")] = False,
        backend: Annotated[str, typer.Option(
            "--backend", help="Sandbox backend: auto, bwrap, local, docker.")] = "auto",
        suite_timeout: SuiteTimeout = None,
        runs: Annotated[int, typer.Option(
            "--runs", min=1, help="Baseline runs (tests whose outcome changes are flaky).")]
        = 3,
    ) -> None:
        """Build the test environment of SOURCE and run its baseline (3 runs + coverage map)."""
        from swemill.core.errors import EnvBuildError

        if backend not in BACKENDS:
            fail(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")
        try:
            summary = _run(source, recipe, rebuild, backend, suite_timeout, runs)
        except EnvBuildError as exc:
            _print_tail(str(exc))
            fail(str(exc))
        if json_out:
            emit_json(summary)
        else:
            _print_summary(summary)


def _run(source: str, recipe_file: Path | None, rebuild: bool, backend: str,
         suite_timeout: float | None, runs: int) -> dict[str, Any]:
    from swemill.cli._common import console
    from swemill.repo.envbuild import build_env
    from swemill.repo.recipe import load_recipe
    from swemill.repo.sources import resolve_source
    from swemill.suite.baseline import run_baseline

    recipe = load_recipe(recipe_file) if recipe_file else None
    with console.status(f"resolving {source}") as status:
        src = resolve_source(source)
        status.update(f"building the environment of {src.repo}@{src.commit[:12]} (uv)")
        env = build_env(src, recipe=recipe, rebuild=rebuild)
        baseline = run_baseline(env, backend=backend, runs=runs, suite_timeout=suite_timeout,
                                rebuild=rebuild, step=lambda msg: status.update(msg))
    counts: dict[str, int] = {}
    for outcome in baseline.outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    return {
        "source": {"spec": src.spec, "kind": src.kind, "repo": src.repo, "commit": src.commit,
                   "path": str(src.path)},
        "env": {"key": env.key, "path": str(env.path), "python": env.python_version},
        "recipe": env.recipe.model_dump(),
        "env_skipped": [s.to_json() for s in env.skipped],
        "generated": env.generated,
        "tests": len(baseline.outcomes),
        "counts": counts,
        "flaky": len(baseline.flaky),
        "load_flaky": baseline.load_flaky,
        "stuttered": bool(baseline.stutter),
        "suite_wall_s": baseline.suite_wall_s,
        "startup_s": baseline.startup_s,
        "coverage_functions": len(baseline.coverage),
        "test_cmd": baseline.test_cmd,
    }


def _print_tail(message: str) -> None:
    from swemill.cli._common import console

    for line in message.splitlines()[1:]:
        console.print(f"  {line}", style="dim", highlight=False, markup=False)


def _print_summary(s: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"swemill env {s['source']['spec']}", show_header=False)
    recipe = s["recipe"]
    rows = [
        ("repository", f"{s['source']['repo']} @ {s['source']['commit'][:12]}"),
        ("environment", s["env"]["path"]),
        ("python", s["env"]["python"]),
        ("recipe", _recipe_line(recipe)),
        ("tests", str(s["tests"])),
        ("outcomes", ", ".join(f"{k} {v}" for k, v in sorted(s["counts"].items()))),
        ("flaky", str(s["flaky"]) + _load_note(s)),
        ("suite duration", f"{s['suite_wall_s']:.2f} s (start-up {s['startup_s']:.2f} s)"),
        ("coverage map", f"{s['coverage_functions']} functions"),
    ]
    if s["generated"]:
        rows.insert(4, ("generated", ", ".join(s["generated"])))
    rows += [("not installed", f"{k['requirement']}: {k['reason']}") for k in s["env_skipped"]]
    from rich.markup import escape

    for key, value in rows:
        table.add_row(key, escape(value))  # ".[tests]" is an extra, not a style
    Console().print(table)  # the summary is the command's output: stdout


def _load_note(s: dict[str, Any]) -> str:
    if not s["stuttered"]:
        return " (the stuttered run did not count: tests that fail on a busy machine unknown)"
    load = s["load_flaky"]
    if not load:
        return ""
    return (f" ({len(load)} only on a busy machine: {', '.join(load[:3])}"
            + (", ..." if len(load) > 3 else "") + ")")


def _recipe_line(recipe: dict[str, Any]) -> str:
    parts = ["editable ." + (f"[{','.join(recipe['extras'])}]" if recipe["extras"] else "")]
    parts += [f"-r {f}" for f in recipe["requirement_files"]]
    parts += recipe["packages"] + ["pytest", "coverage"]
    if recipe["pytest_args"]:
        parts.append(f"pytest args: {' '.join(recipe['pytest_args'])}")
    return " ".join(dict.fromkeys(parts))
