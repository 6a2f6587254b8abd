"""The CLI's progress displays, on stderr: one bar for a stage's items, one line per stage.

Both are off with ``--json`` (stdout then holds only the JSON) and leave nothing on the
terminal that a user would copy by mistake: the bar is transient, the stage lines stay as
the run's log.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from swemill.core.progress import Progress
    from swemill.pipeline.driver import BuildEvent

__all__ = ["progress_bar", "StageDisplay"]


@contextmanager
def progress_bar(*, enabled: bool, label: str = "starting") -> Iterator[Progress]:
    """A transient bar ``label ━━━━ done/total``, drawn by the stage's
    :class:`~swemill.core.progress.Progress` callback it yields."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
    from rich.progress import Progress as Bar

    from swemill.cli._common import console

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Bar(*columns, console=console, transient=True, disable=not enabled) as bar:
        task = bar.add_task(label, total=None)

        def update(label: str, done: int, total: int) -> None:
            bar.update(task, description=label, completed=done, total=total or None)

        yield update


class StageDisplay:
    """One line per build stage with its latest message and elapsed time (not transient)."""

    def __init__(self, *, enabled: bool) -> None:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
        from rich.table import Column

        from swemill.cli._common import console

        self.enabled = enabled
        self.progress = Progress(SpinnerColumn(), TextColumn("[bold]{task.fields[stage]}",
                                            table_column=Column(min_width=9, no_wrap=True)),
                                 TextColumn("{task.description}",
                                            table_column=Column(ratio=1, no_wrap=True)),
                                 TimeElapsedColumn(),
                                 console=console, transient=False, disable=not enabled)
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> StageDisplay:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)  # type: ignore[arg-type]

    def event(self, e: BuildEvent) -> None:
        """Show what the build driver reports about one stage."""
        if not self.enabled:
            return
        p = self.progress
        if e.stage not in self.tasks:
            self.tasks[e.stage] = p.add_task(e.message, stage=e.stage, total=1)
        task = self.tasks[e.stage]
        if e.kind == "update":
            p.update(task, description=e.message[:100])
        elif e.kind == "skip":
            p.update(task, description="[dim]done by an earlier attempt", completed=1)
        elif e.kind == "done":
            summary = ", ".join(f"{k} {v}" for k, v in e.summary.items())
            p.update(task, description=f"[green]done[/] {summary}", completed=1)
        elif e.kind == "fail":
            p.update(task, description=f"[red]failed[/] {e.message[:100]}")
            p.stop_task(task)
