"""``swemill gate SOURCE``: license tier and benchmark-contamination verdict for a source."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from swemill.cli._common import emit_json
from swemill.cli.options import AllowContaminated, JsonOut


def register(app: typer.Typer) -> None:
    @app.command()
    def gate(
        source: Annotated[str, typer.Argument(
            help="Directory, git URL, pypi:NAME==VER or 'sample'.")],
        json_out: JsonOut = False,
        allow_contaminated: AllowContaminated = False,
        copyleft_policy: Annotated[str, typer.Option(
            "--copyleft-policy",
            help="trainable-only: copyleft sources pass with that tier; refuse: refuse them.")]
        = "trainable-only",
        refuse_unknown: Annotated[bool, typer.Option(
            "--refuse-unknown", help="Refuse sources with no license found.")] = False,
    ) -> None:
        """Check a source's license tier and whether it is a benchmark's repository.

        Exits 0 when the source may be used, 1 when the gate refuses it.
        """
        from swemill.cli._common import console, fail
        from swemill.repo.gate import GatePolicy, gate_directory

        if copyleft_policy not in ("trainable-only", "refuse"):
            fail(f"--copyleft-policy must be trainable-only or refuse, not {copyleft_policy!r}")
        policy = GatePolicy(
            allow_contaminated=allow_contaminated,
            copyleft_policy=copyleft_policy,  # type: ignore[arg-type]
            refuse_unknown=refuse_unknown,
        )
        path, repo = _resolve(source)
        verdict = gate_directory(path, source=source, repo=repo, policy=policy)
        if json_out:
            emit_json(verdict)
        else:
            _print(verdict, console)
        if not verdict.allowed:
            if json_out:
                from rich.markup import escape

                console.print(f"[bold red]{escape(verdict.reason)}[/]", highlight=False)
            raise typer.Exit(1)


def _resolve(source: str) -> tuple[Path, str | None]:
    """A local directory is read where it is (its git remotes are part of its identity);
    anything else is fetched into the cache first."""
    local = Path(source).expanduser()
    if local.is_dir():
        return local, None
    from swemill.repo.sources import resolve_source

    resolved = resolve_source(source)
    return resolved.path, resolved.repo


def _print(verdict, console) -> None:  # type: ignore[no-untyped-def]
    from rich.markup import escape

    style = "green" if verdict.allowed else "bold red"
    console.print(f"[{style}]{escape(verdict.reason)}[/]", highlight=False, soft_wrap=True)
    console.print(f"  license: {verdict.license_spdx or 'none found'} ({verdict.license_tier})",
                  highlight=False)
    for line in verdict.license_evidence:
        console.print(f"    {line}", markup=False, highlight=False, soft_wrap=True)
    if verdict.contamination_matches:
        console.print("  contamination:", highlight=False)
        for line in verdict.contamination_matches:
            console.print(f"    {line}", markup=False, highlight=False, soft_wrap=True)
    else:
        console.print("  contamination: none (not an evaluation repository)", highlight=False)
