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
