"""The geometry of the report's inline SVG (the template writes the elements): line charts of metrics.jsonl's series
and the model graph as layered boxes. Coordinates are rounded to 0.01 px so the page is byte-stable."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..inputs import DBL_MAX

WIDTH, HEIGHT = 480, 230
LEFT, RIGHT, TOP, BOTTOM = 78, 16, 18, 36
# One colour a run (several runs) or a series (one run): matplotlib's tab10, which stays apart on a white page.
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
BOX_W, LINE_H, ROW_GAP, COL_GAP = 190, 14, 34, 16
MAX_EPOCH_LINES = 24      # more boundaries than this would hide the curves: none are drawn


def _num(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


@dataclass
class Line:
    """A series to draw: ``label`` in the legend, ``dash`` an SVG stroke-dasharray ('' solid)."""

    run: int
    tag: str
    label: str
    colour: str
    dash: str
    values: list[tuple[int, float]]


@dataclass
class Series:
    run: int
    tag: str
    label: str
    colour: str
    dash: str
    points: str                     # the polyline's points attribute
    steps: list[int] = field(default_factory=list)


@dataclass
class Chart:
    """One line chart: the value range [y0, y1] over steps [x0, x1] maps onto the plot box (left, top, w, h)."""

    title: str
    y_label: str
    x0: float
    x1: float
    y0: float
    y1: float
    series: list[Series]
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    top: int = TOP
    plot_w: int = WIDTH - LEFT - RIGHT
    plot_h: int = HEIGHT - TOP - BOTTOM
    y_ticks: list[tuple[str, str]] = field(default_factory=list)     # (y px, label)
    x_ticks: list[tuple[str, str]] = field(default_factory=list)
    epochs: list[tuple[str, str]] = field(default_factory=list)      # (x px, 'epoch N' starting there)
    best: list[dict] = field(default_factory=list)                   # the best evaluation's marker of each run


def nice_range(lo: float, hi: float, count: int = 5, whole: bool = False) -> tuple[float, float, list[float], int]:
    """An axis over [lo, hi] in about ``count`` round steps (1, 2 or 5 times a power of ten; whole numbers when
    ``whole``): (start, end, ticks, decimals of a tick label). A span past what a double holds keeps [lo, hi] and
    five even ticks (decimals -1: a label in %.4g)."""
    span = hi / 2 - lo / 2
    if not (math.isfinite(span) and span > 0) or max(abs(lo), abs(hi)) > 1e15 or span < 1e-12:
        return lo, hi, [2 * (lo / 2 + (hi / 2 - lo / 2) * (k / 4)) for k in range(5)], -1
    raw = 2 * span / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-9))
    if whole:
        step = max(1.0, round(step))
    start, end = math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step
    n = round((end - start) / step)
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    return start, end, [start + k * step for k in range(n + 1)], 0 if whole else decimals


def tick_label(value: float, decimals: int) -> str:
    """0.55, 40,000, 1.5e+20: never 162.5 for a step count nor 4.125e+04 for a rate."""
    if decimals < 0:
        return f"{value:.4g}"
    text = f"{value:,.{decimals}f}"
    return "0" if text.strip("-0.,") == "" else text


def line_chart(title: str, y_label: str, lines: list[Line], *, unit_range: bool = False,
               epoch_steps: Sequence[tuple[int, str]] = (), best: Sequence[tuple[int, int, float, str]] = ()) -> Chart | None:
    """A chart of ``lines``; None when none has a point. ``unit_range``: a score in [0.5, 1] (AUC) is drawn on that
    fixed axis, so that noise of ±0.01 stays small. ``epoch_steps``: (iteration, label) where an epoch starts (dashed
    verticals). ``best``: (run, step, value, text) of the best evaluation, marked with a circle."""
    points = [p for line in lines for p in line.values]
    if not points:
        return None
    lo, hi = min(p[1] for p in points), max(p[1] for p in points)
    if unit_range and 0.5 <= lo and hi <= 1:
        y0, y1, y_ticks, y_dec = 0.5, 1.0, [0.5 + 0.1 * k for k in range(6)], 1
    else:
        if hi == lo:
            pad = abs(lo) * 0.05 or 1.0
            lo, hi = max(lo - pad, -DBL_MAX), min(hi + pad, DBL_MAX)
        y0, y1, y_ticks, y_dec = nice_range(lo, hi)
    first, last = min(p[0] for p in points), max(p[0] for p in points)
    x0, x1, x_ticks, x_dec = nice_range(first if first < last else first - 1, last if first < last else last + 1,
                                        whole=True)
    chart = Chart(title, y_label, x0, x1, y0, y1, [])

    # Halves: the span of two finite doubles (-1e308 .. 1e308) may overflow to Infinity; half of it never does.
    def px(step: float, value: float) -> tuple[float, float]:
        return (chart.left + (step / 2 - x0 / 2) / (x1 / 2 - x0 / 2) * chart.plot_w,
                chart.top + (y1 / 2 - value / 2) / (y1 / 2 - y0 / 2) * chart.plot_h)

    for line in lines:
        if line.values:
            coords = " ".join(f"{_num(x)},{_num(y)}" for x, y in (px(s, v) for s, v in line.values))
            chart.series.append(Series(line.run, line.tag, line.label, line.colour, line.dash, coords,
                                       [s for s, _ in line.values]))
    chart.y_ticks = [(_num(px(x0, v)[1]), tick_label(v, y_dec)) for v in y_ticks]
    chart.x_ticks = [(_num(px(s, y0)[0]), tick_label(s, x_dec)) for s in x_ticks]
    inside = sorted({(s, text) for s, text in epoch_steps if x0 < s < x1})
    if len(inside) <= MAX_EPOCH_LINES:
        chart.epochs = [(_num(px(s, y0)[0]), text) for s, text in inside]
    for run, step, value, text in best:
        x, y = px(step, value)
        chart.best.append({"run": run, "x": _num(x), "y": _num(y), "text": text,
                           "colour": next((line.colour for line in lines if line.run == run), COLOURS[0])})
    return chart


@dataclass
class Box:
    x: float
    y: float
    h: float
    lines: list[str]
    kind: str


def graph_layout(nodes: list, edges: list) -> dict:
    """Nodes (id, label lines, kind) in topological order as boxes in rows by depth (the longest path from an
    input), edges as lines from a box's bottom to the next one's top; returns the SVG size, boxes and lines."""
    depth: dict[str, int] = {}
    preds: dict[str, list[str]] = {}
    for a, b in edges:
        preds.setdefault(b, []).append(a)
    for nid, _, _ in nodes:
        depth[nid] = 1 + max((depth[p] for p in preds.get(nid, ()) if p in depth), default=-1)
    rows: dict[int, list] = {}
    for node in nodes:
        rows.setdefault(depth[node[0]], []).append(node)
    widest = max(len(r) for r in rows.values())
    width = widest * (BOX_W + COL_GAP) + COL_GAP
    boxes: dict[str, Box] = {}
    y = 10.0
    for d in sorted(rows):
        row = rows[d]
        h = max(len(lines) for _, lines, _ in row) * LINE_H + 10
        start = (width - len(row) * (BOX_W + COL_GAP) + COL_GAP) / 2
        for k, (nid, lines, kind) in enumerate(row):
            boxes[nid] = Box(start + k * (BOX_W + COL_GAP), y, h, lines, kind)
        y += h + ROW_GAP
    lines = [(_num(boxes[a].x + BOX_W / 2), _num(boxes[a].y + boxes[a].h), _num(boxes[b].x + BOX_W / 2),
              _num(boxes[b].y)) for a, b in edges if a in boxes and b in boxes]
    return {"width": _num(width), "height": _num(y - ROW_GAP + 10), "box_w": BOX_W, "line_h": LINE_H,
            "boxes": [{"x": _num(b.x), "y": _num(b.y), "h": _num(b.h), "lines": b.lines, "kind": b.kind,
                       "text_x": _num(b.x + BOX_W / 2)} for b in boxes.values()],
            "edges": lines}
