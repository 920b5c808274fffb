"""``ctrgen report RUN_DIR``: one self-contained HTML page of a training run (no script, no network), from the run
folder's run.json (ctrgen train), metrics.json and metrics.jsonl (the trainer). The page's template is package data
of this module, not a generator template (it is no input of generated code)."""

from __future__ import annotations

import os

from functools import lru_cache
from importlib import resources
from pathlib import Path
import jinja2

from ..errors import UserError
from ..runtime.progress import METRICS_JSONL, TENSORBOARD_DIR
from .record import RUN_FILE
from .report_inputs import read_metrics, read_points, read_run
from .svg import graph_layout, line_chart

TEMPLATE = "report.html.j2"
CHARTS = (("Loss", ("train/loss", "eval/loss")), ("Eval AUC", ("eval/auc",)), ("Eval PR-AUC", ("eval/pr_auc",)),
          ("Eval normalized entropy", ("eval/normalized_entropy",)), ("Eval calibration", ("eval/calibration",)),
          ("Throughput (samples/s)", ("train/samples_per_second",)), ("Learning rate", ("train/lr",)))


@lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    text = resources.files(__package__).joinpath(TEMPLATE).read_text(encoding="utf-8")
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    return env.from_string(text)


def _best(metrics: dict) -> str | None:
    best = metrics.get("best")
    if not isinstance(best, dict) or best.get("iteration") is None:
        return None
    stopped = ", stopped early" if metrics.get("stopped_early") else ""
    return f"{best.get('metric')} {best.get('value')} at iteration {best.get('iteration')} (best/){stopped}"


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def render_report(run_dir: Path) -> str:
    if not run_dir.is_dir():
        what = "not a folder" if os.path.lexists(run_dir) else "run folder not found"
        raise UserError.one(run_dir, what, fix="pass the --out folder of ctrgen train")
    run = read_run(run_dir / RUN_FILE)
    metrics = read_metrics(run_dir / "metrics.json")
    read = read_points(run_dir / METRICS_JSONL)
    series = read.series
    charts = [c for c in (line_chart(title, {t: series[t] for t in tags if t in series}) for title, tags in CHARTS)
              if c is not None]
    summary = [
        ("iterations", f"{metrics.get('iterations')} (batch {metrics.get('batch_size')} per rank, "
                       f"{metrics.get('world_size')} rank(s), global {metrics.get('global_batch_size')})"),
        ("eval AUC", metrics.get("auc")), ("eval loss", metrics.get("eval_loss")),
        ("eval normalized entropy / calibration / PR-AUC", f"{metrics.get('normalized_entropy')} / "
                                                           f"{metrics.get('calibration')} / {metrics.get('pr_auc')}"),
        ("best evaluation", _best(metrics)),
        ("train loss", metrics.get("train_loss")),
        ("throughput", f"{metrics.get('samples_per_second', 0):,.0f} samples/s over "
                       f"{metrics.get('train_seconds')} s of training"),
        ("precision", metrics.get("precision")), ("device", metrics.get("device")),
        ("compiled / CUDA graph", f"{metrics.get('compiled')} / {metrics.get('cuda_graph')}"),
        ("embedding update", metrics.get("embedding_update")), ("data on", metrics.get("data_on")),
        ("peak memory per rank", ", ".join(_size(b) for b in metrics.get("peak_memory_bytes_per_rank", []))),
    ]
    hw = run.get("hardware", {})
    hardware = [("machine", f"{hw.get('machine')}, {hw.get('cpus')} CPUs"), ("system", hw.get("system")),
                ("python", hw.get("python")), ("GPUs", ", ".join(hw.get("gpus") or []) or "none")]
    return _template().render(
        run=run, summary=summary, hardware=hardware, charts=charts, graph=graph_layout(**run["graph"]),
        command=" ".join(run["command"]), tensorboard=(run_dir / TENSORBOARD_DIR).is_dir(),
        points=sum(len(v) for v in series.values()), left_out=read.left_out, cut=read.cut_last_line)
