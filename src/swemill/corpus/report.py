"""The run report: one self-contained ``index.html`` (inline CSS and SVG, no scripts, nothing
fetched), from a :class:`RunManifest` and a few summary tables.

Yields per strategy read the candidates a strategy proposed and the valid ones from the
``candidates/`` table (older runs: ``manifest.counts["tasks.<strategy>"]``, ``in`` and
``valid``, or ``synth.<strategy>``); tasks written and corpus rows per strategy come from the
tasks and rows themselves. The same table gives the top drop reasons with an example line
each, and the likely cause and fix when one reason took over half of the candidates. Drops are
every counted loss of every stage (``dropped_*``, ``skipped_*``, ingest's quarantined lines and
files and ``dropped.*``). A replay run gets its own section (pairs per preference source,
divergence rate, teacher cost against the ingested sessions' cost), and three example rows (a
task, an SFT row, a DPO row; long text cut) show what the data looks like. The difficulty
table counts each strategy's tasks per label (``swemill.validate.difficulty``: solve rate
where rollouts measured it, else proxies) and how many of them rollouts measured.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from swemill.core.records import CandidateRecord, RunManifest, Task, Trajectory
from swemill.corpus.assemble import CorpusTables
from swemill.corpus.stage import load_corpus_tables, optional_records, read_trajectories
from swemill.corpus.svg import bar_chart, histogram_bins
from swemill.store import Store
from swemill.store.layout import report_key
from swemill.validate.difficulty import LABELS, TaskDifficulty, load_difficulty
from swemill.validate.drops import CANDIDATES_STAGE, DropSummary, summarize

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
    replay: dict[str, Any] = field(default_factory=dict)
    """Only for a run that replayed sessions: pairs per source, divergence, costs."""
    examples: dict[str, str] = field(default_factory=dict)
    """``task`` / ``sft`` / ``dpo`` -> a short rendering of one row."""
    candidates: DropSummary | None = None
    """Why the tasks stage's candidates were dropped (None: no ``candidates/`` table)."""
    difficulty: dict[str, dict[str, int]] = field(default_factory=dict)
    """Strategy -> ``{"easy": n, "medium": m, "hard": k, "measured": j}`` (tasks; measured:
    labelled by their rollouts' solve rate, the rest by proxies)."""


_LOSS_PREFIXES = ("dropped_", "dropped.", "skipped_", "quarantined")


def _drops(counts: Mapping[str, Mapping[str, int]]) -> Counter[str]:
    """Every counted loss, ``"stage: reason"`` -> count (zeros left out)."""
    out: Counter[str] = Counter()
    for stage, c in counts.items():
        if "." in stage and stage.split(".", 1)[0] in counts:
            continue  # a per-strategy breakdown of a stage already counted whole
        for key, n in c.items():
            if key.startswith(_LOSS_PREFIXES) and isinstance(n, int) and n:
                reason = key.removeprefix("dropped_").removeprefix("dropped.")
                out[f"{stage}: {reason}"] += n
    return out


_CUT = 300


def _cut(text: str | None, n: int = _CUT) -> str:
    text = (text or "").strip()
    return text if len(text) <= n else text[:n] + f" … [{len(text) - n} more characters]"


def _messages(messages: Sequence[Mapping[str, Any]], keep: int = 4) -> str:
    lines = []
    for m in list(messages)[:keep]:
        calls = m.get("tool_calls") or []
        said = _cut(m.get("content")) or ", ".join(
            f"{c['function']['name']}({_cut(str(c['function']['arguments']), 120)})"
            for c in calls)
        lines.append(f"[{m.get('role')}] {said}")
    if len(messages) > keep:
        lines.append(f"… {len(messages) - keep} more message(s)")
    return "\n".join(lines)


def _examples(tasks: Sequence[Task], tables: CorpusTables | None) -> dict[str, str]:
    out: dict[str, str] = {}
    if tasks:
        t = min(tasks, key=lambda t: t.instance_id)
        out["task"] = (f"{t.instance_id} ({t.repo}, {t.strategy})\n"
                       f"FAIL_TO_PASS: {', '.join(t.FAIL_TO_PASS[:3])}"
                       f"{' …' if len(t.FAIL_TO_PASS) > 3 else ''} | PASS_TO_PASS: "
                       f"{len(t.PASS_TO_PASS)} test(s)\n{_cut(t.problem_statement, 600)}")
    if tables is not None and (sft := tables.sft + tables.sft_holdout):
        r = min(sft, key=lambda r: r["trajectory_id"])
        out["sft"] = f"{r['trajectory_id']} (grade {r['grade']})\n{_messages(r['messages'])}"
    if tables is not None and (dpo := tables.dpo + tables.dpo_holdout):
        r = min(dpo, key=lambda r: r["pair_id"])
        out["dpo"] = (f"{r['pair_id']} ({r['preference_source']})\nprompt: "
                      f"{len(r['prompt'])} message(s), last:\n{_messages(r['prompt'][-1:])}\n"
                      f"chosen:\n{_messages(r['chosen'], 2)}\nrejected:\n"
                      f"{_messages(r['rejected'], 2)}")
    return out


def _replay(manifest: RunManifest, tables: CorpusTables | None,
            trajectories: Sequence[Trajectory]) -> dict[str, Any]:
    meta = manifest.metadata.get("replay")
    if not meta and "replay" not in manifest.counts:
        return {}
    pairs: Counter[str] = Counter()
    if tables is not None:
        pairs.update(str(r["preference_source"]) for r in tables.dpo + tables.dpo_holdout)
    teacher = sum(t.usage.cost_usd for t in trajectories if t.source == "replay")
    sessions = sum(t.usage.cost_usd for t in trajectories if t.source != "replay")
    budget = (meta or {}).get("budget") or {}
    spent = budget.get("spent_usd") if isinstance(budget, dict) else None
    return {"pairs": dict(pairs), "divergence_rate": (meta or {}).get("divergence_rate"),
            "teachers": [t.get("spec", t) if isinstance(t, dict) else t
                         for t in ((meta or {}).get("pool") or {}).get("teachers", [])]
            or manifest.teachers,
            "teacher_cost_usd": spent if isinstance(spent, int | float) else teacher,
            "sessions_cost_usd": sessions, "counts": dict(manifest.counts.get("replay", {}))}


def report_data(manifest: RunManifest, tables: CorpusTables | None = None, *,
                tasks: Iterable[Task] = (), trajectories: Iterable[Trajectory] = (),
                candidates: Iterable[CandidateRecord] = (),
                difficulty: Iterable[TaskDifficulty] = ()) -> ReportData:
    """Gather what the report shows from the run's records."""
    data = ReportData(manifest)
    for d in sorted(difficulty, key=lambda d: d.instance_id):
        per = data.difficulty.setdefault(d.strategy, dict.fromkeys((*LABELS, "measured"), 0))
        per[d.label] += 1
        per["measured"] += d.label_source == "rollouts"
    tasks, trajectories, candidates = list(tasks), list(trajectories), list(candidates)
    yields: dict[str, Counter[str]] = {}
    for t in tasks:
        yields.setdefault(t.strategy, Counter())["tasks"] += 1
    for row in candidates:
        y = yields.setdefault(row.strategy, Counter())
        y["candidates"] += 1
        y["valid"] += row.verdict != "dropped"
    if candidates:
        data.candidates = summarize(candidates)
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
    for name, c in yields.items() if not candidates else ():
        validated = manifest.counts.get(f"tasks.{name}") or manifest.counts.get(f"synth.{name}")
        if validated and validated.get("in") is not None:
            c["candidates"] = validated["in"]
        if validated and validated.get("valid") is not None:
            c["valid"] = validated["valid"]
    data.yields = {k: dict(v) for k, v in sorted(yields.items())}
    cost: dict[str, float] = {}
    for traj in trajectories:
        if traj.outcome is not None:
            data.grades.append(traj.outcome.grade)
        cost[traj.policy] = cost.get(traj.policy, 0.0) + traj.usage.cost_usd
    data.cost_by_policy = dict(cost)
    data.drops = _drops(counts)
    data.replay = _replay(manifest, tables, trajectories)
    data.examples = _examples(tasks, tables)
    if not data.license_tiers:
        data.license_tiers = Counter(manifest.license_tiers)
    return data


_CSS = """body{font-family:system-ui,sans-serif;margin:1.5em 2em;color:#222}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:.25em .6em;
text-align:left;vertical-align:top}td.n{text-align:right}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(480px,1fr));gap:1.5em}
.charts figure{margin:0}.charts svg{width:100%;height:auto}
.cols{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:0 2em}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f6f6;padding:.6em;margin:.3em 0}
.muted{color:#777}"""


def _kv_table(rows: Sequence[tuple[str, object]]) -> str:
    body = "".join(f"<tr><th>{escape(str(k))}</th><td class='n'>{escape(str(v))}</td></tr>"
                   for k, v in rows)
    return f"<table>{body}</table>"


def _yield_table(yields: Mapping[str, Mapping[str, int]]) -> str:
    cols = ("candidates", "valid", "tasks", "sft_rows", "dpo_rows")
    head = "".join(f"<th>{c.replace('_', ' ')}</th>" for c in ("strategy", *cols, "task yield"))
    body = []
    for name, c in yields.items():
        cand = c.get("candidates")
        rate = f"{c.get('valid', c.get('tasks', 0)) / cand:.0%}" if cand else "–"
        cells = "".join(f"<td class='n'>{c.get(k, '–')}</td>" for k in cols)
        body.append(f"<tr><th>{escape(name)}</th>{cells}<td class='n'>{rate}</td></tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _difficulty_section(per: Mapping[str, Mapping[str, int]]) -> list[str]:
    if not per:
        return []
    cols = (*LABELS, "measured")
    head = "".join(f"<th>{c}</th>" for c in ("strategy", *cols))
    body = "".join(f"<tr><th>{escape(name)}</th>"
                   + "".join(f"<td class='n'>{c.get(k, 0)}</td>" for k in cols) + "</tr>"
                   for name, c in sorted(per.items()))
    return ["<h2>Difficulty per strategy</h2>",
            "<p class='muted'>tasks per label: the rollouts' solve rate where they ran "
            "(measured), else proxies (lines changed, failing tests, what the failures say, "
            "strategy)</p>", f"<table><tr>{head}</tr>{body}</table>"]


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


def _replay_section(r: Mapping[str, Any]) -> list[str]:
    if not r:
        return []
    rate = r.get("divergence_rate")
    rows = [("teachers", ", ".join(map(str, r["teachers"])) or "–"),
            ("divergence rate", f"{rate:.1%}" if isinstance(rate, int | float) else "–"),
            ("teacher cost (USD)", f"{r['teacher_cost_usd']:.4f}"),
            ("ingested sessions' cost (USD)", f"{r['sessions_cost_usd']:.4f}"),
            *((f"pairs: {k}", v) for k, v in sorted(r["pairs"].items()))]
    return ["<h2>Replay</h2>", _kv_table(rows),
            _kv_table(sorted(r["counts"].items())) if r["counts"] else ""]


def _candidates_section(s: DropSummary | None) -> list[str]:
    if s is None:
        return []
    if not s.dropped:
        return ["<h2>Why candidates were dropped</h2>",
                f"<p class='muted'>no drops among {s.candidates} candidate(s)</p>"]
    body = "".join(f"<tr><th>{escape(r)}</th><td class='n'>{n}</td><td>{escape(d)}</td></tr>"
                   for r, n, d in s.top)
    advice = f"<p><strong>{escape(s.advice)}</strong></p>" if s.advice else ""
    return ["<h2>Why candidates were dropped</h2>",
            f"<p>{s.dropped} of {s.candidates} candidates dropped (every one is a row of "
            "<code>candidates/</code>)</p>", advice,
            f"<table><tr><th>reason</th><th>candidates</th><th>example</th></tr>{body}</table>"]


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
    examples = "".join(f"<h3>{escape(kind)}</h3><pre>{escape(text)}</pre>"
                       for kind, text in d.examples.items())
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>swemill run {escape(m.run_id)}</title><style>{_CSS}</style></head><body>",
        f"<h1>swemill run <code>{escape(m.run_id)}</code></h1>", _kv_table(summary),
        "<div class='cols'><div>", "<h2>Corpus rows</h2>", _kv_table(list(d.rows.items()))
        if d.rows else "<p class='muted'>no corpus yet</p>",
        "<h2>Yield per strategy</h2>", _yield_table(d.yields), "</div><div>",
        "<h2>Drops (every stage)</h2>", _kv_table(d.drops.most_common())
        if d.drops else "<p class='muted'>nothing dropped</p>", "</div></div>",
        *_candidates_section(d.candidates),
        *_difficulty_section(d.difficulty),
        *_replay_section(d.replay),
        "<h2>Charts</h2>", f"<div class='charts'>{charts}</div>",
        "<h2>Example rows</h2>", examples or "<p class='muted'>no rows yet</p>",
        "<h2>Counts per stage</h2>",
        _kv_table([(f"{s}: {k}", v) for s, c in m.counts.items() for k, v in c.items()]),
        "</body></html>",
    ])


def write_report(store: Store, run_id: str) -> str:
    """Render the report of ``run_id`` from the store; returns its key."""
    manifest = store.read_manifest(run_id)  # no manifest: "no run <id>" (one clear error)
    tasks = optional_records(store, "tasks", run_id, Task)
    trajs = read_trajectories(store, run_id)
    cands = optional_records(store, CANDIDATES_STAGE, run_id, CandidateRecord)
    tables = load_corpus_tables(store, run_id)
    labels = load_difficulty(store, run_id, tasks).values()
    html = render_report(report_data(manifest, tables, tasks=tasks, trajectories=trajs,
                                      candidates=cands, difficulty=labels))
    key = report_key(run_id, "index.html")
    store.write_text(key, html)
    return key


