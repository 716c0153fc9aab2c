"""The charts: server-rendered SVG of a run's step over time (the progress chart) and stacked
bars (GPU-hours per day, week, user or job). Pure: no database.

Why SVG from the server and not a chart library: the series is at most ~200 points, one line,
two axes; an SVG polyline of it is a few kilobytes of markup, needs no script (so nothing to
vendor, keep patched, or allow through the strict script-src of the CSP), renders the same in
every browser, prints, and is refreshed by the same htmx swap as the rest of the job page. The
text around it (step N of M, rate, ETA) is the accessible alternative; the SVG carries a
<title> and <desc> of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

WIDTH, HEIGHT = 640, 180
_LEFT, _RIGHT, _TOP, _BOTTOM = 48, 12, 10, 24


def _time(milliseconds: int) -> str:
    return datetime.fromtimestamp(milliseconds / 1000, tz=UTC).strftime("%H:%M")


def y_ticks(top: float, plot_h: float, labels: Iterable[str]) -> SafeString:
    """The value axis' labels at 0, half and the top (`labels` in that order)."""
    return format_html_join("", '<text x="{}" y="{}" font-size="11" fill="#555" '
                            'text-anchor="end">{}</text>',
                            ((_LEFT - 6, _TOP + plot_h - fraction * plot_h + 4, label)
                             for fraction, label in zip((0, 0.5, 1), labels, strict=True)))


def progress_svg(points: Sequence[Sequence[int]], *, total: int | None, title: str,
                 description: str) -> SafeString:
    """An SVG line of `points` ([[unix ms, step], ...]) up to `total` (or the highest step)."""
    top = max([total or 0, *(int(s) for _t, s in points), 1])
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    first = int(points[0][0]) if points else 0
    span = max(1, (int(points[-1][0]) - first) if points else 1)

    def xy(point: Sequence[int]) -> str:
        x = _LEFT + (int(point[0]) - first) / span * plot_w
        y = _TOP + plot_h - int(point[1]) / top * plot_h
        return f"{x:.1f},{y:.1f}"

    line = " ".join(xy(point) for point in points)
    last = format_html('<circle cx="{}" cy="{}" r="3" fill="#1d4ed8"/>',
                       *xy(points[-1]).split(",")) if points else ""
    ticks = y_ticks(top, plot_h, [str(int(top * fraction)) for fraction in (0, 0.5, 1)])
    times = format_html(
        '<text x="{}" y="{}" font-size="11" fill="#555">{}</text>'
        '<text x="{}" y="{}" font-size="11" fill="#555" text-anchor="end">{}</text>',
        _LEFT, HEIGHT - 6, _time(first) if points else "",
        WIDTH - _RIGHT, HEIGHT - 6, _time(int(points[-1][0])) if points else "")
    return format_html(
        '<svg class="progress-chart" viewBox="0 0 {w} {h}" width="100%" role="img" '
        'aria-labelledby="progress-chart-title progress-chart-desc" data-points="{n}" '
        'preserveAspectRatio="none">'
        '<title id="progress-chart-title">{title}</title><desc id="progress-chart-desc">{desc}'
        '</desc><rect x="{l}" y="{t}" width="{pw}" height="{ph}" fill="none" stroke="#ddd"/>'
        '{ticks}{times}<polyline points="{line}" fill="none" stroke="#1d4ed8" '
        'stroke-width="2"/>{last}</svg>',
        w=WIDTH, h=HEIGHT, n=len(points), title=title, desc=description, l=_LEFT, t=_TOP,
        pw=plot_w, ph=plot_h, ticks=ticks, times=times, line=line, last=last)


@dataclass(frozen=True)
class Layer:
    """One stacked series of a bar chart: its key in each bar's values, legend label, colour."""

    key: str
    label: str
    color: str


def stacked_bars_svg(bars: Sequence[tuple[str, dict[str, float]]], layers: Sequence[Layer], *,
                     title: str, description: str, unit: str) -> SafeString:
    """Bars (label, {layer key: value}) stacked bottom-up in the order of `layers`, on the
    same frame as the progress chart. Each segment has a <title> (label, layer, value): the
    table beside the chart is the accessible alternative."""
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    top = max([sum(values.get(layer.key, 0.0) for layer in layers) for _l, values in bars] + [0])
    top = top if top > 0 else 1.0
    slot = plot_w / max(1, len(bars))
    width = max(1.0, min(48.0, slot * 0.7))
    rects = []
    every = max(1, len(bars) // 8)  # at most ~8 bar labels fit under the chart
    for index, (label, values) in enumerate(bars):
        x = _LEFT + index * slot + (slot - width) / 2
        base = float(_TOP + plot_h)
        for layer in layers:
            value = values.get(layer.key, 0.0)
            if value <= 0:
                continue
            height = value / top * plot_h
            base -= height
            rects.append(format_html(
                '<rect x="{}" y="{}" width="{}" height="{}" fill="{}" '
                'data-layer="{}"><title>{}: {} {} {}</title></rect>',
                f"{x:.1f}", f"{base:.1f}", f"{width:.1f}", f"{height:.1f}", layer.color,
                layer.key, label, layer.label, f"{value:g}", unit))
        if index % every == 0:
            rects.append(format_html(
                '<text x="{}" y="{}" font-size="11" fill="#555" text-anchor="middle">{}'
                '</text>', f"{x + width / 2:.1f}", HEIGHT - 6, label[:16]))
    ticks = y_ticks(top, plot_h, [f"{top * fraction:.3g}" for fraction in (0, 0.5, 1)])
    return format_html(
        '<svg class="usage-chart" viewBox="0 0 {w} {h}" width="100%" role="img" '
        'aria-labelledby="usage-chart-title usage-chart-desc" data-bars="{n}">'
        '<title id="usage-chart-title">{title}</title><desc id="usage-chart-desc">{desc}</desc>'
        '<rect x="{l}" y="{t}" width="{pw}" height="{ph}" fill="none" stroke="#ddd"/>{ticks}'
        '{rects}</svg>',
        w=WIDTH, h=HEIGHT, n=len(bars), title=title, desc=description, l=_LEFT, t=_TOP,
        pw=plot_w, ph=plot_h, ticks=ticks, rects=SafeString("".join(rects)))
