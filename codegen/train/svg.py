"""The geometry of the report's inline SVG (the template writes the elements): line charts of metrics.jsonl's series
and the model graph as layered boxes. Coordinates are rounded to 0.01 px so the page is byte-stable."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..inputs import DBL_MAX

WIDTH, HEIGHT = 480, 220
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 36
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")
BOX_W, LINE_H, ROW_GAP, COL_GAP = 190, 14, 34, 16


def _num(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _tick(value: float) -> str:
    return f"{value:.4g}"


@dataclass
class Series:
    tag: str
    colour: str
    points: str                     # the polyline's points attribute
    steps: list[int] = field(default_factory=list)


@dataclass
class Chart:
    """One line chart: the value range [y0, y1] over steps [x0, x1] maps onto the plot box (left, top, w, h)."""

    title: str
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


def line_chart(title: str, series: dict[str, list[tuple[int, float]]]) -> Chart | None:
    """A chart of ``series`` (tag -> [(step, value)]); None when no series has a point."""
    points = [p for values in series.values() for p in values]
    if not points:
        return None
    x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
    y0, y1 = min(p[1] for p in points), max(p[1] for p in points)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if y1 == y0:
        pad = abs(y0) * 0.05 or 1.0
        y0, y1 = max(y0 - pad, -DBL_MAX), min(y1 + pad, DBL_MAX)
    chart = Chart(title, x0, x1, y0, y1, [])

    # Halves: the span of two finite doubles (-1e308 .. 1e308) may overflow to Infinity; half of it never does.
    def px(step: float, value: float) -> tuple[float, float]:
        return (chart.left + (step / 2 - x0 / 2) / (x1 / 2 - x0 / 2) * chart.plot_w,
                chart.top + (y1 / 2 - value / 2) / (y1 / 2 - y0 / 2) * chart.plot_h)

    for i, (tag, values) in enumerate(sorted(series.items())):
        if values:
            coords = " ".join(f"{_num(x)},{_num(y)}" for x, y in (px(s, v) for s, v in values))
            chart.series.append(Series(tag, COLOURS[i % len(COLOURS)], coords, [s for s, _ in values]))
    for k in range(5):
        value = y0 + (y1 / 2 - y0 / 2) * k / 2
        chart.y_ticks.append((_num(px(x0, value)[1]), _tick(value)))
    for k in range(5):
        step = x0 + (x1 / 2 - x0 / 2) * k / 2
        chart.x_ticks.append((_num(px(step, y0)[0]), _tick(step)))
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
