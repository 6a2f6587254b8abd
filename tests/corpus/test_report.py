"""The run report: self-contained HTML, charts that match the data, hostile text escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from html.parser import HTMLParser

from swemill.core.records import RunManifest, Usage
from swemill.corpus.assemble import assemble
from swemill.corpus.report import render_report, report_data
from swemill.corpus.svg import bar_chart, histogram_bins

SVG_NS = "{http://www.w3.org/2000/svg}"


class _Refs(HTMLParser):
    """Collects every tag and every attribute that could load something."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "xlink:href", "action", "srcset") or (
                value and "url(" in value
            ):
                self.refs.append(f"{tag}.{name}={value}")


def _svgs(html: str) -> list[ET.Element]:
    out, pos = [], 0
    while (start := html.find("<svg", pos)) != -1:
        end = html.index("</svg>", start) + len("</svg>")
        out.append(ET.fromstring(html[start:end]))  # each chart is well-formed XML
        pos = end
    return out


def _bars(svg: ET.Element) -> list[float]:
    return [float(r.get("width")) for r in svg.iter(f"{SVG_NS}rect")]


def test_histogram_bins_edges():
    bins = histogram_bins([0.0, 0.05, 0.5, 0.99, 1.0, 1.0, 1.5])
    assert [c for _, c in bins] == [2, 0, 0, 0, 0, 1, 0, 0, 0, 3]
    assert bins[0][0] == "0.0–0.1" and bins[-1][0] == "0.9–1.0"


def test_bar_widths_are_proportional():
    svg = ET.fromstring(bar_chart("t", [("a", 10), ("b", 5), ("c", 0)]))
    a, b, c = _bars(svg)
    assert a == 360.0 and b == 180.0 and c == 0.0
    empty = ET.fromstring(bar_chart("none", []))
    assert _bars(empty) == [] and "no data" in ET.tostring(empty, encoding="unicode")


def test_report_is_self_contained_and_matches_the_data(corpus, build):
    t = next(iter(corpus.tasks.values()))
    trajs = corpus.trajectories + [
        build.trajectory(t, 0, trajectory_id="bad", fixed=False,
                         usage=Usage(cost_usd=0.25), policy="openai:gpt"),
    ]
    tables = assemble(trajs, corpus.pairs, tasks=corpus.tasks, goldens=corpus.goldens)
    manifest = RunManifest(
        run_id="r1", source="sample", cost_usd=0.25, timings_s={"validate": 12.5, "corpus": 1.0},
        counts={"synth.procedural": {"in": 40, "out": 4}, "synth.pr-mirror": {"in": 8, "out": 4},
                "validate": {"in": 48, "out": 8, "dropped_not_failing": 40}},
        policies=["scripted:oracle", "openai:gpt"],
    )
    data = report_data(manifest, tables, tasks=corpus.tasks.values(), trajectories=trajs)
    assert data.yields["procedural"] == {"tasks": 4, "sft_rows": 4, "dpo_rows": 4,
                                         "candidates": 40}
    assert data.drops == {"validate: not_failing": 40, "corpus.sft: unresolved": 1}
    assert sorted(data.grades) == [0.0] + [1.0] * 8
    assert data.cost_by_policy == {"scripted:oracle": 0.0, "openai:gpt": 0.25}
    html = render_report(data)
    refs = _Refs()
    refs.feed(html)
    assert refs.refs == [] and "script" not in refs.tags and "link" not in refs.tags
    assert "http" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    svgs = _svgs(html)
    assert len(svgs) == 7
    titles = [s.find(f"{SVG_NS}title").text for s in svgs]
    grades = svgs[titles.index("Grades of graded trajectories")]
    widths = _bars(grades)
    assert widths[0] == 360.0 / 8 and widths[-1] == 360.0 and sum(w > 0 for w in widths) == 2
    drops = _bars(svgs[titles.index("Drops per reason")])
    assert drops == [360.0, 9.0]  # 40 and 1
    assert "10%" in html  # procedural: 4 tasks of 40 candidates


def test_hostile_text_is_escaped():
    manifest = RunManifest(run_id="r2", source="<script>alert(1)</script>",
                           policies=["a&b"], counts={"x": {"dropped_<img src=x>": 2}})
    html = render_report(report_data(manifest))
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;" in html and "a&amp;b" in html
    for svg in _svgs(html):
        assert svg.tag == f"{SVG_NS}svg"


def test_every_stage_s_losses_the_replay_section_and_example_rows(corpus, build):
    t = next(iter(corpus.tasks.values()))
    replayed = build.trajectory(t, 1, trajectory_id="s1::teacher-a", usage=Usage(cost_usd=0.5),
                                policy="openai:teacher-a")
    replayed.source = "replay"
    session = build.trajectory(t, 2, trajectory_id="s1", usage=Usage(cost_usd=2.0),
                               policy="claude-code")
    session.source = "claude_code"
    pairs = list(corpus.pairs)
    pairs[0] = pairs[0].model_copy(update={"preference_source": "consensus"})
    tables = assemble(corpus.trajectories + [replayed, session], pairs, tasks=corpus.tasks,
                      goldens=corpus.goldens)
    manifest = RunManifest(
        run_id="r3", source="sessions/", teachers=["openai:teacher-a"],
        counts={"tasks": {"in": 48, "valid": 20, "out": 8, "dropped_no_fail_to_pass": 28},
                "tasks.procedural": {"in": 30, "valid": 12, "out": 4,
                                     "dropped_no_fail_to_pass": 18},
                "traces": {"lines": 900, "quarantined": 3, "quarantined_files": 1,
                           "dropped.dead_leaf": 2, "reattached": 5},
                "replay": {"in": 12, "out": 6, "replies_ok": 24}},
        metadata={"replay": {"divergence_rate": 0.5, "budget": {"spent_usd": 0.5}}})
    data = report_data(manifest, tables, tasks=corpus.tasks.values(),
                       trajectories=corpus.trajectories + [replayed, session])
    # the candidates and the valid ones come from the tasks stage's own counts
    assert data.yields["procedural"]["candidates"] == 30
    assert data.yields["procedural"]["valid"] == 12
    # ingest's losses are drops too; a per-strategy breakdown is not counted twice
    assert data.drops["traces: quarantined"] == 3 and data.drops["traces: dead_leaf"] == 2
    assert data.drops["traces: quarantined_files"] == 1
    assert data.drops["tasks: no_fail_to_pass"] == 28 and "tasks.procedural: no_fail_to_pass" \
        not in data.drops
    assert "traces: reattached" not in data.drops  # kept, not lost
    assert data.replay["pairs"]["consensus"] == 1 and data.replay["divergence_rate"] == 0.5
    assert data.replay["teacher_cost_usd"] == 0.5
    assert data.replay["sessions_cost_usd"] == 2.0
    html = render_report(data)
    assert "<h2>Replay</h2>" in html and "50.0%" in html and "pairs: consensus" in html
    assert "40%" in html  # procedural: 12 valid of 30 candidates
    for kind in ("task", "sft", "dpo"):
        assert f"<h3>{kind}</h3><pre>" in html
    assert t.FAIL_TO_PASS[0] in html
    assert "max-width:1100px" not in html  # the page width is used


def test_a_run_without_replay_has_no_replay_section(corpus):
    tables = assemble(corpus.trajectories, corpus.pairs, tasks=corpus.tasks,
                      goldens=corpus.goldens)
    html = render_report(report_data(RunManifest(run_id="r4"), tables,
                                     tasks=corpus.tasks.values()))
    assert "<h2>Replay</h2>" not in html and "<h3>dpo</h3>" in html


def test_the_report_renders_in_headless_chromium(tmp_path, corpus):
    import shutil
    import subprocess

    import pytest

    browser = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")
                    if shutil.which(b)), None)
    if browser is None:
        pytest.skip("no Chromium on this machine")
    tables = assemble(corpus.trajectories, corpus.pairs, tasks=corpus.tasks,
                      goldens=corpus.goldens)
    page = tmp_path / "index.html"
    page.write_text(render_report(report_data(RunManifest(run_id="r5"), tables,
                                              tasks=corpus.tasks.values())))
    shot = tmp_path / "shot.png"
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                           "--enable-logging=stderr", "--v=0", f"--screenshot={shot}",
                           "--window-size=1400,1800", f"file://{page}"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    console = [ln for ln in done.stderr.splitlines() if "CONSOLE" in ln]
    assert console == [], console


def test_candidates_give_the_yields_and_the_drop_reasons(corpus):
    from swemill.core.records import CandidateRecord

    def row(i: int, strategy: str, reason: str, detail: str = "") -> CandidateRecord:
        return CandidateRecord(
            candidate_id=f"{strategy}-{i}", instance_id=f"x.{strategy}-{i}", repo="o/x",
            strategy=strategy, position=i, file="x.py", symbol="f", base_commit="c",
            verdict="written" if reason == "accepted" else "dropped", reason=reason,
            detail=detail)

    crash = "pytest exit 4 (usage error): <script>alert(1)</script>Warning"
    cands = ([row(i, "procedural", "crashed", crash) for i in range(7)]
             + [row(7, "procedural", "accepted"), row(0, "rows", "baseline_failed")])
    manifest = RunManifest(run_id="r1", counts={"tasks.procedural": {"in": 99, "valid": 98}})
    data = report_data(manifest, tasks=corpus.tasks.values(), candidates=cands)
    # the table wins over the manifest's counts, and a strategy without tasks is shown too
    assert data.yields["procedural"]["candidates"] == 8
    assert data.yields["procedural"]["valid"] == 1
    assert data.yields["rows"] == {"candidates": 1, "valid": 0}
    assert data.candidates is not None and data.candidates.advice is not None
    assert data.candidates.advice.startswith("7 of 9 candidates crashed")
    html = render_report(data)
    assert "Why candidates were dropped" in html and "7 of 9 candidates crashed" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "baseline_failed" in html
    # a run without the table (made before it existed) reads the manifest, as before
    old = report_data(manifest, tasks=corpus.tasks.values())
    assert old.candidates is None and old.yields["procedural"]["candidates"] == 99
    assert "Why candidates were dropped" not in render_report(old)
