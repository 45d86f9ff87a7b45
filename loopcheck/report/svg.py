"""Inline SVG charts: line charts and bar charts, no dependency, no script.

Each chart is a ``<figure>`` holding an ``<svg role="img">`` with a ``<title>`` and a ``<desc>``
(what a screen reader says) and a ``<figcaption>``. Every drawn series is a ``<path>`` that also
carries the values it plots in ``data-x``/``data-y`` (comma-separated; empty for unknown), so the
numbers behind a curve can be read back from the page; bars carry ``data-x``/``data-y`` and a
``<title>`` tooltip. Colours come from the page's CSS classes (``s0``, ``s1``, ...).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

WIDTH, HEIGHT = 720, 230
LEFT, RIGHT, TOP, BOTTOM = 70, 16, 24, 42


@dataclass
class Line:
    name: str
    xs: Sequence[float]
    ys: Sequence[float | None]
    css: str = "s0"


@dataclass
class Marker:
    """A vertical rule at ``x`` (a skipped step, a scheduler's horizon, the step ranks diverged)."""

    x: float
    label: str
    css: str = "marker"
    show_label: bool = True


@dataclass
class Level:
    """A horizontal rule at ``y`` (peak memory, device capacity)."""

    y: float
    label: str
    css: str = "level"


@dataclass
class Chart:
    id: str
    title: str
    desc: str
    x_label: str
    y_label: str
    y_format: Callable[[float], str] = field(default=lambda v: number(v))
    log2_y: bool = False
    y_unit: float = 1.0  # ticks fall on round multiples of this (2**30 for GiB)


def number(value: float) -> str:
    if value == 0:
        return "0"
    if value == int(value) and abs(value) < 1e6:
        return f"{int(value):,}"
    if abs(value) >= 1e5 or abs(value) < 1e-3:
        return f"{value:.3g}"
    return f"{value:.4g}"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 12) for i in range(int((hi - first) / step + 1e-9) + 1)]


class _Frame:
    """Maps data coordinates to the plot area."""

    def __init__(self, x0: float, x1: float, y0: float, y1: float, log2_y: bool) -> None:
        self.log2_y = log2_y
        self.x0, self.x1 = x0, x1 if x1 > x0 else x0 + 1
        if log2_y:
            y0, y1 = math.log2(max(y0, 1e-30)), math.log2(max(y1, 1e-30))
        self.y0, self.y1 = (y0, y1) if y1 > y0 else (y0 - 0.5, y0 + 0.5)

    def x(self, value: float) -> float:
        return LEFT + (value - self.x0) / (self.x1 - self.x0) * (WIDTH - LEFT - RIGHT)

    def y(self, value: float) -> float:
        v = math.log2(max(value, 1e-30)) if self.log2_y else value
        return HEIGHT - BOTTOM - (v - self.y0) / (self.y1 - self.y0) * (HEIGHT - TOP - BOTTOM)


def _values(values: Sequence[float | None]) -> str:
    return ",".join("" if v is None else (str(v) if isinstance(v, int) else f"{v:.6g}") for v in values)


def _path(frame: _Frame, xs: Sequence[float], ys: Sequence[float | None]) -> str:
    parts, pen_down = [], False
    for x, y in zip(xs, ys):
        if y is None or (frame.log2_y and y <= 0):
            pen_down = False
            continue
        parts.append(f"{'L' if pen_down else 'M'}{frame.x(x):.1f} {frame.y(y):.1f}")
        pen_down = True
    return "".join(parts)


def _open(chart: Chart) -> list[str]:
    return [f'<figure class="chart" id="{chart.id}">',
            f'<svg role="img" viewBox="0 0 {WIDTH} {HEIGHT}" aria-labelledby="{chart.id}-t {chart.id}-d" '
            f'xmlns="http://www.w3.org/2000/svg">',
            f'<title id="{chart.id}-t">{escape(chart.title)}</title><desc id="{chart.id}-d">{escape(chart.desc)}</desc>']


def _close(chart: Chart) -> list[str]:
    return ["</svg>", f"<figcaption><strong>{escape(chart.title)}.</strong> {escape(chart.desc)}</figcaption>",
            "</figure>"]


def _axes(chart: Chart, frame: _Frame, x_ticks: Sequence[float], y_ticks: Sequence[float],
          x_text: Callable[[float], str]) -> list[str]:
    bottom, right = HEIGHT - BOTTOM, WIDTH - RIGHT
    out = ['<g class="axis">', f'<path d="M{LEFT} {TOP}V{bottom}H{right}"/>']
    for t in x_ticks:
        x = frame.x(t)
        out.append(f'<path class="tick" d="M{x:.1f} {bottom}v4"/>'
                   f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="middle">{escape(x_text(t))}</text>')
    for t in y_ticks:
        y = frame.y(t)
        out.append(f'<path class="grid" d="M{LEFT} {y:.1f}H{right}"/>'
                   f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(chart.y_format(t))}</text>')
    out.append(f'<text class="label" x="{(LEFT + right) / 2:.0f}" y="{HEIGHT - 6}" text-anchor="middle">'
               f'{escape(chart.x_label)}</text>')
    out.append(f'<text class="label" transform="translate(14 {(TOP + bottom) / 2:.0f}) rotate(-90)" '
               f'text-anchor="middle">{escape(chart.y_label)}</text>')
    out.append("</g>")
    return out


def _legend(lines: Sequence[Line]) -> list[str]:
    if len(lines) < 2:
        return []
    out, x = ['<g class="legend">'], LEFT + 8
    for line in lines:
        out.append(f'<path class="{line.css}" d="M{x} {TOP - 10}h16"/>'
                   f'<text x="{x + 20}" y="{TOP - 6}">{escape(line.name)}</text>')
        x += 28 + 7 * len(line.name)
    out.append("</g>")
    return out


def line_chart(chart: Chart, lines: Sequence[Line], markers: Sequence[Marker] = (), levels: Sequence[Level] = (),
               x_max: float | None = None, y_floor: float | None = None) -> str:
    """Lines against the optimizer step. ``x_max`` widens the x range (a scheduler's horizon past
    the end of the run); ``y_floor`` pins the bottom of the y range (0 for counts and bytes)."""
    xs = [x for line in lines for x in line.xs] + [m.x for m in markers]
    ys = [y for line in lines for y in line.ys if y is not None and (y > 0 or not chart.log2_y)]
    ys += [lv.y for lv in levels]
    x0, x1 = (min(xs), max(xs)) if xs else (0, 1)
    if x_max is not None:
        x1 = max(x1, x_max)
    y0, y1 = (min(ys), max(ys)) if ys else (0, 1)
    if y_floor is not None and not chart.log2_y:
        y0 = min(y0, y_floor)
    if not chart.log2_y and y1 > y0:
        y1 += (y1 - y0) * 0.05
    frame = _Frame(x0, x1, y0, y1, chart.log2_y)
    if chart.log2_y:
        y_ticks = [2.0 ** e for e in _log_ticks(frame.y0, frame.y1)]
    else:
        unit = chart.y_unit
        y_ticks = [t * unit for t in nice_ticks(frame.y0 / unit, frame.y1 / unit) if frame.y0 <= t * unit <= frame.y1]
    x_ticks = [t for t in nice_ticks(frame.x0, frame.x1, 6) if t == int(t)]
    out = _open(chart) + _axes(chart, frame, x_ticks, y_ticks, lambda t: str(int(t)))
    for level in levels:
        y = frame.y(level.y)
        out.append(f'<g class="{level.css}" data-y="{level.y}"><title>{escape(level.label)}</title>'
                   f'<path d="M{LEFT} {y:.1f}H{WIDTH - RIGHT}"/>'
                   f'<text x="{WIDTH - RIGHT - 4}" y="{y - 4:.1f}" text-anchor="end">{escape(level.label)}</text></g>')
    for line in lines:
        out.append(f'<path class="series {line.css}" data-name="{escape(line.name)}" data-x="{_values(line.xs)}" '
                   f'data-y="{_values(line.ys)}" d="{_path(frame, line.xs, line.ys)}"><title>{escape(line.name)}'
                   f"</title></path>")
    out += _markers(frame, markers)
    out += _legend(lines)
    return "".join(out + _close(chart))


def _markers(frame: _Frame, markers: Sequence[Marker]) -> list[str]:
    out, by_class = [], {}
    for marker in markers:
        by_class.setdefault(marker.css, []).append(marker)
    rows: list[list[tuple[float, float]]] = []  # the spans of the labels placed on each text row
    for css, group in by_class.items():
        out.append(f'<g class="{css}" data-x="{_values([m.x for m in group])}">')
        for m in group:
            x = frame.x(m.x)
            out.append(f'<path d="M{x:.1f} {TOP}V{HEIGHT - BOTTOM}"><title>{escape(m.label)}</title></path>')
            if m.show_label:
                width = 7 * len(m.label)
                near_right = x > WIDTH - RIGHT - width
                span = (x - 3 - width, x - 3) if near_right else (x + 3, x + 3 + width)
                # markers a few steps apart would print their labels over each other: next row down
                row = next((i for i, placed in enumerate(rows)
                            if all(span[1] < a or span[0] > b for a, b in placed)), len(rows))
                if row == len(rows):
                    rows.append([])
                rows[row].append(span)
                out.append(f'<text x="{span[1] if near_right else span[0]:.1f}" y="{TOP + 10 + 12 * row}" '
                           f'text-anchor="{"end" if near_right else "start"}">{escape(m.label)}</text>')
        out.append("</g>")
    return out


def _log_ticks(lo: float, hi: float) -> list[int]:
    first, last = math.ceil(lo), math.floor(hi)
    stride = max(1, (last - first) // 5)
    return list(range(first, last + 1, stride)) or [round(lo)]


def bar_chart(chart: Chart, bars: Sequence[tuple[str, float, str]], css: str = "s0") -> str:
    """``bars``: ``(x label, value, tooltip)`` left to right, e.g. a histogram's buckets."""
    top = max((v for _, v, _ in bars), default=1) or 1
    frame = _Frame(0, max(len(bars), 1), 0, top * 1.08, False)
    y_ticks = [t for t in nice_ticks(0, top * 1.08) if t == int(t)]
    out = _open(chart) + _axes(chart, frame, [], y_ticks, str)
    slot = (WIDTH - LEFT - RIGHT) / max(len(bars), 1)
    bar = min(slot * 0.7, 90.0)
    for i, (label, value, tip) in enumerate(bars):
        middle, y = LEFT + (i + 0.5) * slot, frame.y(value)
        out.append(f'<g class="bar {css}" data-x="{escape(label)}" data-y="{value}"><title>{escape(tip)}</title>'
                   f'<rect x="{middle - bar / 2:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{HEIGHT - BOTTOM - y:.1f}"/>'
                   f'<text class="value" x="{middle:.1f}" y="{y - 4:.1f}" text-anchor="middle">{number(value)}</text>'
                   f'<text x="{middle:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">{escape(label)}</text></g>')
    return "".join(out + _close(chart))
