"""The run report: one self-contained ``index.html`` (inline CSS and SVG, no scripts, nothing
fetched), from a :class:`RunManifest` and a few summary tables.

Yields per strategy read ``manifest.counts["synth.<strategy>"]["in"]`` as the candidates a
strategy proposed when the run recorded it; validated tasks and corpus rows per strategy
come from the tasks and rows themselves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape

from swemill.core.records import RunManifest, Task, Trajectory
from swemill.corpus.assemble import CorpusTables
from swemill.corpus.stage import optional_records
from swemill.corpus.svg import bar_chart, histogram_bins
from swemill.store import Store
from swemill.store.layout import report_key

__all__ = ["ReportData", "report_data", "render_report", "write_report"]



@dataclass(slots=True)
class ReportData:
    manifest: RunManifest
    yields: dict[str, dict[str, int]] = field(default_factory=dict)
    """Strategy -> ``{"candidates": n, "tasks": m, "sft_rows": k, "dpo_rows": j}``."""
    grades: list[float] = field(default_factory=list)
    drops: Counter[str] = field(default_factory=Counter)
    """``"stage: reason"`` -> rows dropped."""
    license_tiers: Counter[str] = field(default_factory=Counter)
    cost_by_policy: dict[str, float] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)


def _drops(counts: Mapping[str, Mapping[str, int]]) -> Counter[str]:
    out: Counter[str] = Counter()
    for stage, c in counts.items():
        for key, n in c.items():
            if key.startswith("dropped_"):
                out[f"{stage}: {key.removeprefix('dropped_')}"] += n
    return out


def report_data(manifest: RunManifest, tables: CorpusTables | None = None, *,
                tasks: Iterable[Task] = (), trajectories: Iterable[Trajectory] = ()) -> ReportData:
    """Gather what the report shows from the run's records."""
    data = ReportData(manifest)
    yields: dict[str, Counter[str]] = {}
    for t in tasks:
        yields.setdefault(t.strategy, Counter())["tasks"] += 1
    counts = dict(manifest.counts)
    if tables is not None:
        counts.update(tables.manifest_counts())
        for kind, rows in (("sft_rows", tables.sft + tables.sft_holdout),
                           ("dpo_rows", tables.dpo + tables.dpo_holdout)):
            for r in rows:
                yields.setdefault(r["strategy"] or "imported", Counter())[kind] += 1
                data.license_tiers[r["license_tier"]] += 1
        data.rows = {"sft": len(tables.sft), "sft holdout": len(tables.sft_holdout),
                     "dpo": len(tables.dpo), "dpo holdout": len(tables.dpo_holdout),
                     "wm": len(tables.wm)}
    for name, c in yields.items():
        proposed = manifest.counts.get(f"synth.{name}", {}).get("in")
        if proposed is not None:
            c["candidates"] = proposed
    data.yields = {k: dict(v) for k, v in sorted(yields.items())}
    cost: dict[str, float] = {}
    for traj in trajectories:
        if traj.outcome is not None:
            data.grades.append(traj.outcome.grade)
        cost[traj.policy] = cost.get(traj.policy, 0.0) + traj.usage.cost_usd
    data.cost_by_policy = dict(cost)
    data.drops = _drops(counts)
    if not data.license_tiers:
        data.license_tiers = Counter(manifest.license_tiers)
    return data


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:.25em .6em;
text-align:left}td.n{text-align:right}.charts{display:flex;flex-wrap:wrap;gap:1.5em}
.muted{color:#777}"""


def _kv_table(rows: Sequence[tuple[str, object]]) -> str:
    body = "".join(f"<tr><th>{escape(str(k))}</th><td class='n'>{escape(str(v))}</td></tr>"
                   for k, v in rows)
    return f"<table>{body}</table>"


def _yield_table(yields: Mapping[str, Mapping[str, int]]) -> str:
    cols = ("candidates", "tasks", "sft_rows", "dpo_rows")
    head = "".join(f"<th>{c.replace('_', ' ')}</th>" for c in ("strategy", *cols, "task yield"))
    body = []
    for name, c in yields.items():
        cand = c.get("candidates")
        rate = f"{c.get('tasks', 0) / cand:.0%}" if cand else "–"
        cells = "".join(f"<td class='n'>{c.get(k, '–')}</td>" for k in cols)
        body.append(f"<tr><th>{escape(name)}</th>{cells}<td class='n'>{rate}</td></tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _charts(d: ReportData) -> list[str]:
    m = d.manifest
    return [
        bar_chart("Tasks per strategy", [(k, v.get("tasks", 0)) for k, v in d.yields.items()]),
        bar_chart("SFT rows per strategy",
                  [(k, v.get("sft_rows", 0)) for k, v in d.yields.items()], color="#59a14f"),
        bar_chart("Drops per reason", sorted(d.drops.items(), key=lambda kv: -kv[1]),
                  color="#e15759"),
        bar_chart("Grades of graded trajectories", histogram_bins(d.grades), color="#76b7b2"),
        bar_chart("Rows per license tier", sorted(d.license_tiers.items()), color="#b07aa1"),
        bar_chart("Time per stage", sorted(m.timings_s.items(), key=lambda kv: -kv[1]),
                  unit=" s", color="#f28e2b"),
        bar_chart("Cost per policy", sorted(d.cost_by_policy.items()), unit="$",
                  color="#edc948"),
    ]


def render_report(d: ReportData) -> str:
    """The whole ``index.html`` as one string."""
    m = d.manifest
    summary = [("run", m.run_id), ("parent run", m.parent_run_id or "none"),
               ("status", m.status), ("source", m.source or "–"),
               ("started", m.started_at), ("finished", m.finished_at or "–"),
               ("cost (USD)", f"{m.cost_usd:.4f}"), ("policies", ", ".join(m.policies) or "–"),
               ("teachers", ", ".join(m.teachers) or "–"),
               ("graded trajectories", len(d.grades))]
    charts = "".join(f"<figure>{svg}</figure>" for svg in _charts(d))
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>swemill run {escape(m.run_id)}</title><style>{_CSS}</style></head><body>",
        f"<h1>swemill run <code>{escape(m.run_id)}</code></h1>", _kv_table(summary),
        "<h2>Corpus rows</h2>", _kv_table(list(d.rows.items())) if d.rows
        else "<p class='muted'>no corpus yet</p>",
        "<h2>Yield per strategy</h2>", _yield_table(d.yields),
        "<h2>Charts</h2>", f"<div class='charts'>{charts}</div>",
        "<h2>Drops</h2>", _kv_table(d.drops.most_common())
        if d.drops else "<p class='muted'>nothing dropped</p>",
        "<h2>Counts per stage</h2>",
        _kv_table([(f"{s}: {k}", v) for s, c in m.counts.items() for k, v in c.items()]),
        "</body></html>",
    ])


def write_report(store: Store, run_id: str) -> str:
    """Render the report of ``run_id`` from the store; returns its key."""
    from swemill.corpus.stage import load_corpus_tables

    manifest = store.read_manifest(run_id)  # no manifest: "no run <id>" (one clear error)
    tasks = optional_records(store, "tasks", run_id, Task)
    trajs = optional_records(store, "trajectories", run_id, Trajectory)
    tables = load_corpus_tables(store, run_id)
    html = render_report(report_data(manifest, tables, tasks=tasks, trajectories=trajs))
    key = report_key(run_id, "index.html")
    store.write_text(key, html)
    return key


