"""Tiny inline SVG charts for the run report: no plotting library, no scripts, no network.

Every text that reaches the SVG is escaped; the output is a standalone ``<svg>`` element
(valid XML) that any browser draws inside an HTML page.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

__all__ = ["bar_chart", "histogram_bins"]

_BAR = 18
_GAP = 6
_LABEL_W = 220
_PLOT_W = 360
_VALUE_W = 90


def _fmt(value: float, unit: str) -> str:
    text = f"{value:,.0f}" if float(value).is_integer() else f"{value:,.3g}"
    return f"{unit}{text}" if unit == "$" else f"{text}{unit}"


def bar_chart(title: str, items: Sequence[tuple[str, float]], *, unit: str = "",
              color: str = "#4c78a8") -> str:
    """A horizontal bar chart, one bar per ``(label, value)``; empty data draws a note."""
    rows = max(len(items), 1)
    height = 28 + rows * (_BAR + _GAP)
    width = _LABEL_W + _PLOT_W + _VALUE_W
    top = max((v for _, v in items), default=0.0)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f'<title>{escape(title)}</title>',
        f'<text x="0" y="16" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    if not items:
        parts.append('<text x="0" y="40" font-size="12" fill="#777">no data</text>')
    for i, (label, value) in enumerate(items):
        y = 28 + i * (_BAR + _GAP)
        w = 0.0 if top <= 0 else max(value, 0.0) / top * _PLOT_W
        short = label if len(label) <= 32 else label[:31] + "…"
        parts += [
            f'<text x="{_LABEL_W - 6}" y="{y + 13}" font-size="12" text-anchor="end">'
            f'<title>{escape(label)}</title>{escape(short)}</text>',
            f'<rect class="bar" x="{_LABEL_W}" y="{y}" width="{w:.1f}" height="{_BAR}" '
            f'fill="{escape(color)}"/>',
            f'<text x="{_LABEL_W + w + 4:.1f}" y="{y + 13}" font-size="12">'
            f'{escape(_fmt(value, unit))}</text>',
        ]
    parts.append("</svg>")
    return "".join(parts)


def histogram_bins(values: Sequence[float], bins: int = 10, lo: float = 0.0,
                   hi: float = 1.0) -> list[tuple[str, float]]:
    """Counts per equal-width bin over ``[lo, hi]``; the top edge belongs to the last bin."""
    counts = [0] * bins
    width = (hi - lo) / bins
    for v in values:
        if lo <= v <= hi:
            counts[min(int((v - lo) / width), bins - 1)] += 1
    return [(f"{lo + i * width:.1f}–{lo + (i + 1) * width:.1f}", float(c))
            for i, c in enumerate(counts)]
