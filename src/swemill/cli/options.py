"""Options that several commands share, declared once.

Each alias carries the flag and its help; a command gives the default in its own signature
(``out: Out`` is required, ``out: Out = ""`` is not), because defaults differ where a command
resolves them later (``swemill build`` from its recorded config on ``--resume``). An option
that means something different per command (``--workers``, ``--resume``, ``--run-id``) is
declared by that command, under its own help.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["Out", "Run", "JsonOut", "Executor", "SuiteTimeout", "Repeat", "Audit",
           "AllowContaminated", "ScrubKeep", "MaxUsd", "Recipe"]

Out = Annotated[str, typer.Option("--out", help="Store root: a path or s3://bucket/prefix.")]

Run = Annotated[str, typer.Option("--run", help="Run id (in the store under --out) to read.")]

JsonOut = Annotated[bool, typer.Option("--json", help="Print the outcome as JSON on stdout.")]

Executor = Annotated[str | None, typer.Option(
    "--executor", help="Where the work items run: local, ray or aws-batch [default: local].")]

SuiteTimeout = Annotated[float | None, typer.Option(
    "--suite-timeout", min=1.0, help="Seconds one full run of the suite may take (default: "
                                     "derived from the number of tests).")]

Repeat = Annotated[int | None, typer.Option(
    "--repeat", min=1, help="Runs of each broken tree: FAIL_TO_PASS tests must fail in every "
                            "one (and pass in as many golden runs, at least 2) [default: 3].")]

Audit = Annotated[int | None, typer.Option(
    "--audit", min=0, help="Re-run the full suite cold on K written tasks and remove any that "
                           "disagrees (default: every task below 20, else 10%, at least 2; "
                           "0: off).")]

AllowContaminated = Annotated[bool, typer.Option(
    "--allow-contaminated", help="Let an evaluation benchmark's repository through (the "
                                 "manifest records it).")]

ScrubKeep = Annotated[str, typer.Option(
    "--scrub-keep", help="PII kinds to leave in the texts, comma-separated: email, ipv4, ipv6, "
                         "ip (both). Secrets and home paths are always redacted.")]

MaxUsd = Annotated[float | None, typer.Option(
    "--max-usd", min=0.0, help="Dollar ceiling for the policy calls; never passed.")]

Recipe = Annotated[Path | None, typer.Option(
    "--recipe", help="Install recipe (TOML or JSON) instead of the detected one; see "
                     "docs/recipes.md.")]
