"""``ctrgen report RUN_DIR... [--out FILE]``: one self-contained HTML page (no script, no network) of one training run,
or of several overlaid (a colour a run, the legend naming each), from each run folder's run.json (ctrgen train),
metrics.json and metrics.jsonl (the trainer). The page's template is package data of this module, not a generator
template (it is no input of generated code)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from ..errors import UserError
from ..runtime.progress import METRICS_JSONL, TENSORBOARD_DIR
from .record import RUN_FILE
from .report_inputs import Points, read_metrics, read_points, read_run
from .report_summary import constant_text, summary_rows
from .svg import COLOURS, Line, graph_layout, line_chart

TEMPLATE = "report.html.j2"
# (title, y-axis label, tags, AUC-like: drawn on a fixed 0.5-1 axis when every value is in it)
CHARTS = (("Loss", "loss", ("train/loss", "eval/loss"), False), ("Eval AUC", "AUC", ("eval/auc",), True),
          ("Eval PR-AUC", "PR-AUC", ("eval/pr_auc",), False),
          ("Eval normalized entropy", "NE", ("eval/normalized_entropy",), False),
          ("Eval calibration", "mean prediction / CTR", ("eval/calibration",), False),
          ("Throughput", "samples/s", ("train/samples_per_second",), False),
          ("Learning rate", "learning rate", ("train/lr",), False))
# The metric --early-stop monitors -> the tag its best point is marked on.
BEST_TAGS = {"auc": "eval/auc", "loss": "eval/loss"}


@dataclass
class Run:
    label: str
    colour: str
    folder: Path
    run: dict[str, Any]
    metrics: dict[str, Any]
    points: Points


@lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    text = resources.files(__package__).joinpath(TEMPLATE).read_text(encoding="utf-8")
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    return env.from_string(text)


def read_runs(run_dirs: list[Path]) -> list[Run]:
    """Each folder read and checked (report_inputs); several runs are labelled by their folder as given, a folder
    given twice is refused."""
    seen: dict[str, Path] = {}
    runs = []
    for i, folder in enumerate(run_dirs):
        if not folder.is_dir():
            what = "not a folder" if os.path.lexists(folder) else "run folder not found"
            raise UserError.one(folder, what, fix="pass the --out folder of ctrgen train")
        key = os.path.realpath(folder)
        if key in seen:
            raise UserError.one(folder, f"given twice (also as {seen[key]})", fix="name each run folder once")
        seen[key] = folder
        run = read_run(folder / RUN_FILE)
        label = run["name"] if len(run_dirs) == 1 else str(folder)
        runs.append(Run(label, COLOURS[i % len(COLOURS)], folder, run, read_metrics(folder / "metrics.json"),
                        read_points(folder / METRICS_JSONL)))
    return runs


def _epoch_steps(runs: list[Run]) -> list[tuple[int, str]]:
    steps = []
    for r in runs:
        data = r.metrics.get("data")
        per = data.get("steps_per_epoch") if isinstance(data, dict) else None
        last = max((s for values in r.points.series.values() for s, _ in values), default=0)
        if isinstance(per, int) and not isinstance(per, bool) and per > 0 and last // per <= 1000:
            steps += [(k * per, f"epoch {k + 1}") for k in range(1, last // per + 1)]
    return steps


def _best(r: Run, index: int, tag: str) -> list[tuple[int, int, float, str]]:
    best = r.metrics.get("best")
    if not isinstance(best, dict) or BEST_TAGS.get(best.get("metric", "")) != tag:
        return []
    it, value = best.get("iteration"), best.get("value")
    if not isinstance(it, int) or isinstance(it, bool) or not isinstance(value, (int, float)):
        return []
    return [(index, it, float(value), f"best {best['metric']} {value} at iteration {it}")]


def charts_and_constants(runs: list[Run]) -> tuple[list, list[tuple[str, list[str]]], list[dict]]:
    """The charts; a chart whose every series holds one value throughout (a constant learning rate) is a summary
    row instead: (title, [text per run]); and the constant series as (run, tag, points) for the page's record."""
    several = len(runs) > 1
    epochs = _epoch_steps(runs)
    charts, rows, constants = [], [], []
    for title, y_label, tags, unit in CHARTS:
        lines = []
        for i, r in enumerate(runs):
            present = [t for t in sorted(tags) if r.points.series.get(t)]
            for k, tag in enumerate(present):
                colour = r.colour if several else COLOURS[(i + k) % len(COLOURS)]
                dash = "5 3" if several and tag.startswith("eval/") and len(present) > 1 else ""
                label = f"{r.label} {tag}" if several else tag
                lines.append(Line(i, tag, label, colour, dash, r.points.series[tag]))
        if not lines:
            continue
        if all(len({v for _, v in line.values}) == 1 for line in lines):
            texts = [constant_text([line for line in lines if line.run == i]) for i in range(len(runs))]
            rows.append((f"{title.lower()} (constant)", texts))
            constants += [{"run": line.run, "tag": line.tag, "points": len(line.values)} for line in lines]
            continue
        best = [b for i, r in enumerate(runs) for t in tags for b in _best(r, i, t)]
        charts.append(line_chart(title, y_label, lines, unit_range=unit, epoch_steps=epochs, best=best))
    return charts, rows, constants


def render_report(run_dirs: Path | list[Path]) -> str:
    runs = read_runs(run_dirs if isinstance(run_dirs, list) else [run_dirs])
    charts, constant_rows, constants = charts_and_constants(runs)
    graphs: list[dict] = []
    seen_graphs: dict[str, int] = {}
    for r in runs:     # one drawing per distinct model graph
        key = json.dumps(r.run["graph"], sort_keys=True)
        if key not in seen_graphs:
            seen_graphs[key] = len(graphs)
            graphs.append({"labels": [], "layout": graph_layout(**r.run["graph"])})
        graphs[seen_graphs[key]]["labels"].append(r.label)
    return _template().render(
        title=runs[0].run["name"] + ": training run" if len(runs) == 1 else f"{len(runs)} training runs compared",
        runs=[{"label": r.label, "colour": r.colour, "run": r.run, "command": " ".join(r.run["command"]),
               "tensorboard": (r.folder / TENSORBOARD_DIR).is_dir(),
               "points": sum(len(v) for v in r.points.series.values()), "left_out": r.points.left_out,
               "cut": r.points.cut_last_line, "hardware": _hardware(r.run)} for r in runs],
        several=len(runs) > 1, summary=summary_rows([r.metrics for r in runs]) + constant_rows,
        charts=charts, constants=constants, graphs=graphs)


def _hardware(run: dict) -> list[tuple[str, Any]]:
    hw = run.get("hardware", {})
    return [("machine", f"{hw.get('machine')}, {hw.get('cpus')} CPUs"), ("system", hw.get("system")),
            ("python", hw.get("python")), ("GPUs", ", ".join(hw.get("gpus") or []) or "none")]
