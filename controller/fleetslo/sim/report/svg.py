"""Inline SVG line charts for the simulation report: axes, ticks, gaps for missing data, target lines.

Pure string building — no plotting library, no JavaScript, no network — so the page opens anywhere.
A ``None`` value is a gap in its line, never a zero. Every piece of text is escaped here. This module
knows nothing about simulation results; ``page`` maps results onto charts.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

#: Colour-blind-safe (Okabe–Ito, yellow left out: unreadable on white); runs beyond it repeat with dashes.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9", "#E69F00", "#000000")
DASHES = ("", "7 4", "2 3")

WIDTH, HEIGHT = 1080, 250
LEFT, RIGHT, TOP, BOTTOM = 100, 20, 16, 42

Point = tuple[float, float | None]


@dataclass(frozen=True, slots=True)
class Line:
    """One series: points (x, y or None), drawn as a line, or as a step line for counts."""

    label: str
    points: Sequence[Point]
    color: str
    dash: str = ""
    width: float = 2.0
    step: bool = False


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    y_label: str
    lines: Sequence[Line]
    x_max: float
    log: bool = False
    y_format: Callable[[float], str] = lambda v: f"{v:g}"
    #: Horizontal reference lines: (y, label).
    targets: Sequence[tuple[float, str]] = ()
    #: Markers at the top edge for values above any scale (e.g. requests never served): (x, colour).
    overflow: Sequence[tuple[float, str]] = field(default_factory=tuple)
    height: int = HEIGHT
    #: Values at or above this do not set the scale and are drawn along the top edge (a batch
    #: limit of "no limit", the engine's max_num_seqs, would flatten real limits of 4-15).
    y_cap: float | None = None


def style(index: int) -> tuple[str, str]:
    """Colour and dash pattern of the ``index``-th run."""
    return PALETTE[index % len(PALETTE)], DASHES[(index // len(PALETTE)) % len(DASHES)]


def render_chart(chart: Chart) -> str:
    """The chart as one ``<svg>`` element (responsive: it scales to its container's width)."""
    values = [y for line in chart.lines for _, y in line.points if y is not None and _drawable(y, chart.log)]
    if chart.y_cap is not None:
        values = [y for y in values if y < chart.y_cap] or [1.0]
    values += [y for y, _ in chart.targets]
    y_scale = _LogScale(values) if chart.log else _LinearScale(values)
    x_scale = _LinearScale([0.0, chart.x_max], pad=False)
    plot = _Plot(x_scale, y_scale, chart.height)
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {chart.height}" role="img" '
        f'aria-label="{escape(chart.title)}">',
        f"<title>{escape(chart.title)}</title>",
        *_grid_and_axes(plot, chart),
        *(_target(plot, y, label) for y, label in chart.targets),
        *(_line(plot, line, chart.log) for line in chart.lines),
        *(_overflow(plot, x, color) for x, color in chart.overflow),
        "</svg>",
    ]
    return "\n".join(parts)


def render_strip(rows: Sequence[tuple[str, Sequence[bool | None]]], x_max: float, window_min: float) -> str:
    """One row of cells per run: SLO met (green), missed (red), no traffic (grey). Each row's label
    sits above it, aligned with the plot, so no label length can push it off the left edge."""
    row_h, label_h, gap = 16, 15, 6
    pitch = label_h + row_h + gap
    axis_y = TOP + len(rows) * pitch
    height = axis_y + 24
    plot = _Plot(_LinearScale([0.0, x_max], pad=False), _LinearScale([0.0, 1.0]), height)
    parts = [
        f'<svg class="chart strip" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="SLO met per window">'
    ]
    for r, (label, cells) in enumerate(rows):
        y = TOP + r * pitch + label_h
        parts.append(f'<text class="tick row-label" x="{LEFT}" y="{y - 4}">{escape(label)}</text>')
        spans = ((k * window_min, (k + 1) * window_min) for k in range(len(cells)))
        parts += (_cell(plot, label, met, span, (y, row_h)) for met, span in zip(cells, spans, strict=False))
    parts += _x_axis(plot, axis_y, label=False)
    parts.append("</svg>")
    return "\n".join(parts)


_VERDICT = {True: ("#2e9d5b", "SLO met"), False: ("#d1495b", "SLO missed"), None: ("#e4e4e4", "no traffic")}


def _cell(
    plot: _Plot, label: str, met: bool | None, span: tuple[float, float], row: tuple[float, float]
) -> str:
    """One window of the strip: ``span`` in minutes, ``row`` = (top, height) in pixels."""
    color, verdict = _VERDICT[met]
    x0, x1 = plot.x(span[0]), plot.x(min(span[1], plot.x_scale.hi))
    width = max(x1 - x0 - 0.5, 0.5)  # a hairline gap between cells keeps windows countable
    tip = f"{label} · {_minutes(span[0])}: {verdict}"
    return (
        f'<rect x="{x0:.1f}" y="{row[0]}" width="{width:.1f}" height="{row[1]}" fill="{color}">'
        f"<title>{escape(tip)}</title></rect>"
    )


# --- scales -----------------------------------------------------------------------------------


class _LinearScale:
    def __init__(self, values: Sequence[float], pad: bool = True) -> None:
        top = max([v for v in values if math.isfinite(v)] or [1.0])
        self.ticks = _nice_ticks(0.0, top * (1.05 if pad else 1.0) or 1.0)
        self.lo, self.hi = 0.0, self.ticks[-1] if pad else (top or 1.0)

    def fraction(self, v: float) -> float:
        return (v - self.lo) / (self.hi - self.lo)


class _LogScale:
    def __init__(self, values: Sequence[float]) -> None:
        positive = [v for v in values if v > 0 and math.isfinite(v)] or [0.1, 1.0]
        self.lo = 10.0 ** math.floor(math.log10(min(positive)))
        self.hi = 10.0 ** math.ceil(math.log10(max(positive)))
        if self.hi <= self.lo:
            self.hi = self.lo * 10
        decades = round(math.log10(self.hi / self.lo))
        steps = (1, 2, 5) if decades <= 2 else (1,)  # more would crowd a 250 px axis
        self.ticks = [
            self.lo * 10**d * s for d in range(decades + 1) for s in steps if self.lo * 10**d * s <= self.hi
        ]

    def fraction(self, v: float) -> float:
        return math.log10(v / self.lo) / math.log10(self.hi / self.lo)


def _nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    n = math.ceil(hi / step - 1e-9)
    return [round(lo + i * step, 10) for i in range(n + 1)]


@dataclass(frozen=True, slots=True)
class _Plot:
    x_scale: _LinearScale
    y_scale: _LinearScale | _LogScale
    height: int = HEIGHT

    def x(self, v: float) -> float:
        return LEFT + self.x_scale.fraction(v) * (WIDTH - LEFT - RIGHT)

    def y(self, v: float) -> float:
        clipped = min(max(self.y_scale.fraction(v), 0.0), 1.0)
        return self.height - BOTTOM - clipped * (self.height - BOTTOM - TOP)


# --- pieces -----------------------------------------------------------------------------------


def _drawable(v: float, log: bool) -> bool:
    return math.isfinite(v) and (v > 0 or not log)


def _grid_and_axes(plot: _Plot, chart: Chart) -> list[str]:
    parts = []
    for tick in plot.y_scale.ticks:
        y = plot.y(tick)
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>')
        parts.append(
            f'<text class="tick" x="{LEFT - 8}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(chart.y_format(tick))}</text>"
        )
    mid = (TOP + plot.height - BOTTOM) / 2
    parts.append(
        f'<text class="axis-label" transform="translate(24 {mid:.0f}) rotate(-90)" text-anchor="middle">'
        f"{escape(chart.y_label)}</text>"
    )
    parts += _x_axis(plot, plot.height - BOTTOM)
    return parts


def _x_axis(plot: _Plot, y: float, label: bool = True) -> list[str]:
    parts = [f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>']
    for tick in _time_ticks(plot.x_scale.hi):
        x = plot.x(tick)
        parts.append(f'<line class="axis" x1="{x:.1f}" x2="{x:.1f}" y1="{y:.1f}" y2="{y + 4:.1f}"/>')
        parts.append(
            f'<text class="tick" x="{x:.1f}" y="{y + 17:.1f}" text-anchor="middle">{_minutes(tick)}</text>'
        )
    if label:
        middle = (LEFT + WIDTH - RIGHT) / 2
        parts.append(
            f'<text class="axis-label" x="{middle:.0f}" y="{y + 34:.1f}" text-anchor="middle">'
            "time since trace start (h:mm)</text>"
        )
    return parts


def _time_ticks(x_max: float) -> list[float]:
    """Tick positions in minutes: a round step giving at most 12 ticks."""
    steps = (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880)
    step = next((s for s in steps if x_max / s <= 12), steps[-1])
    return [i * step for i in range(int(x_max // step) + 1)]


def _minutes(m: float) -> str:
    whole = round(m)
    return f"{whole // 60}:{whole % 60:02d}"


def _target(plot: _Plot, y: float, label: str) -> str:
    yy = plot.y(y)
    return (
        f'<line class="target" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{yy:.1f}" y2="{yy:.1f}"/>'
        f'<text class="target-label" x="{WIDTH - RIGHT - 4}" y="{yy - 5:.1f}" text-anchor="end">'
        f"{escape(label)}</text>"
    )


def _line(plot: _Plot, line: Line, log: bool) -> str:
    """A path with one sub-path per run of known values; lone points get a dot so they stay visible."""
    segments: list[list[tuple[float, float]]] = [[]]
    for x, y in line.points:
        if y is None or not _drawable(y, log):
            segments.append([])
        else:
            segments[-1].append((x, y))
    path, dots = [], []
    for seg in (s for s in segments if s):
        if len(seg) == 1:
            dots.append(f'<circle cx="{plot.x(seg[0][0]):.1f}" cy="{plot.y(seg[0][1]):.1f}" r="2.5"/>')
        path.append(_path_data(plot, seg, line.step))
    dash = f' stroke-dasharray="{line.dash}"' if line.dash else ""
    return (
        f'<g class="series" stroke="{line.color}" fill="{line.color}"><title>{escape(line.label)}</title>'
        f'<path d="{" ".join(path)}" fill="none" stroke-width="{line.width}"{dash}/>{"".join(dots)}</g>'
    )


def _path_data(plot: _Plot, seg: list[tuple[float, float]], step: bool) -> str:
    out = [f"M{plot.x(seg[0][0]):.1f},{plot.y(seg[0][1]):.1f}"]
    for (_, y0), (x1, y1) in itertools.pairwise(seg):
        if step:
            out.append(f"H{plot.x(x1):.1f}")
            if y1 != y0:
                out.append(f"V{plot.y(y1):.1f}")
        else:
            out.append(f"L{plot.x(x1):.1f},{plot.y(y1):.1f}")
    return "".join(out)


def _overflow(plot: _Plot, x: float, color: str) -> str:
    xx = plot.x(x)
    triangle = f"M{xx - 4:.1f},{TOP + 7} L{xx + 4:.1f},{TOP + 7} L{xx:.1f},{TOP}"
    return f'<path class="overflow" d="{triangle}" fill="{color}"><title>never served</title></path>'
