"""Reading a run folder for ``ctrgen report`` as every other input is read (codegen/inputs.py: regular files only,
a size cap, UTF-8, bounded nesting): run.json and metrics.json checked field by field, metrics.jsonl streamed line by
line. Every problem is one UserError naming the file (and the line of metrics.jsonl)."""

from __future__ import annotations

import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..inputs import check_regular, decode, parse_json, read_json

# A point is ~70 bytes: 256 MiB is millions of points, more than a chart can show; a line is one small object.
MAX_METRICS_BYTES = 256 << 20
MAX_POINT_BYTES = 4096
_RETRAIN = "train again with ctrgen train, which writes it"


@dataclass
class Points:
    """metrics.jsonl as tag -> [(step, value)] in file order, and how many points were left out (a value that is
    not a finite number: NaN or Infinity cannot be drawn)."""

    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    left_out: int = 0
    cut_last_line: bool = False


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(value), "a number")


def _expect(ok: bool, path: Path, name: str, want: str, value: Any, fix: str = _RETRAIN) -> None:
    if not ok:
        raise UserError.one(path, f"must be {want}, not {_type_name(value)}", field=name, fix=fix)


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def read_run(path: Path) -> dict[str, Any]:
    """run.json, with the fields the report uses present and of their type."""
    if not os.path.lexists(path):
        raise UserError.one(path, "not found", fix="train with ctrgen train, which writes it")
    run = read_json(path, "run.json")
    _expect(isinstance(run, dict), path, "run.json", "an object", run)
    for name in ("name", "spec", "spec_sha256", "ctrgen"):
        if name not in run:
            raise UserError.one(path, "missing", field=name, fix=_RETRAIN)
        _expect(isinstance(run[name], str), path, name, "a string", run[name])
    command, data = run.get("command"), run.get("data", {})
    _expect(_strings(command), path, "command", "a list of strings", command)
    _expect(isinstance(data, dict) and all(_strings(v) for v in data.values()), path, "data",
            "an object of lists of strings", data)
    generated, hardware = run.get("generated", {}), run.get("hardware", {})
    _expect(isinstance(generated, dict) and all(isinstance(v, str) for v in generated.values()), path, "generated",
            "an object of strings", generated)
    _expect(isinstance(hardware, dict) and _strings(hardware.get("gpus") or []), path, "hardware",
            "an object (gpus: a list of strings)", hardware)
    _check_graph(run.get("graph"), path)
    return run


def _check_graph(graph: Any, path: Path) -> None:
    _expect(isinstance(graph, dict), path, "graph", "an object of nodes and edges", graph)
    nodes, edges = graph.get("nodes"), graph.get("edges", [])
    _expect(isinstance(nodes, list), path, "graph.nodes", "a list", nodes)
    if not nodes:
        raise UserError.one(path, "the model graph has no nodes", field="graph.nodes", fix=_RETRAIN)
    for i, node in enumerate(nodes):
        ok = (isinstance(node, list) and len(node) == 3 and isinstance(node[0], str) and _strings(node[1])
              and isinstance(node[2], str))
        _expect(ok, path, f"graph.nodes[{i}]", "[id, [label lines], kind]", node)
    _expect(isinstance(edges, list), path, "graph.edges", "a list", edges)
    for i, edge in enumerate(edges):
        _expect(_strings(edge) and len(edge) == 2, path, f"graph.edges[{i}]", "[from id, to id]", edge)


def read_metrics(path: Path) -> dict[str, Any]:
    """metrics.json (NaN allowed: a diverged run's loss is NaN and the page says so)."""
    fix = "let the run finish (the trainer writes it at the end)"
    if not os.path.lexists(path):
        raise UserError.one(path, "not found", fix=fix)
    metrics = read_json(path, "metrics.json", finite=False)
    _expect(isinstance(metrics, dict), path, "metrics.json", "an object", metrics, fix)
    for name in ("samples_per_second",):
        if name in metrics:
            _expect(_number(metrics[name]), path, name, "a number", metrics[name], fix)
    peak = metrics.get("peak_memory_bytes_per_rank", [])
    _expect(isinstance(peak, list) and all(_number(v) and math.isfinite(v) for v in peak), path,
            "peak_memory_bytes_per_rank", "a list of numbers", peak, fix)
    return metrics


def read_points(path: Path) -> Points:
    """metrics.jsonl streamed line by line (a file over MAX_METRICS_BYTES is refused before it is read). A last line
    without its line break that is no JSON is what a killed trainer leaves: it ends the record. Any other line that
    is not a point is refused naming its line."""
    if not os.path.lexists(path):
        raise UserError.one(path, "not found", fix="train with ctrgen train (the trainer writes it)")
    check_regular(path, "metrics.jsonl", MAX_METRICS_BYTES)
    points = Points()
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise UserError.one(path, f"cannot read metrics.jsonl: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise UserError.one(path, "metrics.jsonl is not a regular file", fix="give the run folder's file")
        number, read = 0, 0
        while read <= MAX_METRICS_BYTES and (raw := fh.readline(MAX_POINT_BYTES + 1)):
            number, read = number + 1, read + len(raw)
            last = not raw.endswith(b"\n")
            if len(raw) > MAX_POINT_BYTES:
                raise UserError.one(path, f"line is more than {MAX_POINT_BYTES} bytes; a point is a few dozen",
                                    line=number, fix="train again; the trainer writes one point per line")
            if _add_point(points, raw, path, number, last):
                points.cut_last_line = True
                break
    return points


def _add_point(points: Points, raw: bytes, path: Path, number: int, last: bool) -> bool:
    """Add the point on line ``number``; True when it is a cut last line (which ends the record)."""
    fix = "train again; the trainer writes one point per line"
    try:
        text = decode(raw, path, "metrics.jsonl")
    except UserError:
        if last:
            return True
        raise UserError.one(path, "not UTF-8 text", line=number, fix=fix) from None
    if not text.strip():
        return False
    try:
        point = parse_json(text, path, "metrics.jsonl", finite=False)
    except UserError as exc:
        if last:
            return True
        raise UserError.one(path, f"not a JSON point ({exc.problems[0].message})", line=number, fix=fix) from None
    step: Any = point.get("step") if isinstance(point, dict) else None
    value: Any = point.get("value") if isinstance(point, dict) else None
    ok = (isinstance(point, dict) and isinstance(point.get("tag"), str) and isinstance(step, int)
          and not isinstance(step, bool) and 0 <= step < 2**63 and _number(value))
    if not ok:
        raise UserError.one(path, "not a point {\"step\": a whole number ≥ 0, \"tag\": a string, \"value\": a "
                                  "number}", line=number, fix=fix)
    if math.isfinite(value):
        points.series.setdefault(point["tag"], []).append((step, float(value)))
    else:
        points.left_out += 1
    return False

