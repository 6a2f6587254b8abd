"""``swemill report --run RUN_ID --out ROOT``: the run's self-contained HTML report."""

from __future__ import annotations

import typer

from swemill.cli._common import emit_json
from swemill.cli.options import JsonOut, Out, Run


def register(app: typer.Typer) -> None:
    @app.command()
    def report(
        run: Run,
        out: Out,
        json_out: JsonOut = False,
    ) -> None:
        """Write reports/run_id=RUN/index.html: yields, drops, grades, cost, timings, offline."""
        from swemill.cli._common import console
        from swemill.corpus.report import write_report
        from swemill.store import Store

        store = Store.open(out)
        key = write_report(store, run)
        if json_out:
            emit_json({"run_id": run, "report": store.url_for(key)})
        else:
            console.print(f"report: {store.url_for(key)}")
