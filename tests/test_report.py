"""`ctrgen report` of synthetic run folders, in-process: several runs overlaid (a colour a run, a legend naming each),
round tick labels, the AUC axis fixed at 0.5-1, the best evaluation marked where metrics.json puts it, epoch
boundaries at each multiple of the epoch's iterations, a constant learning rate as a summary line instead of a chart,
hyperparameters and data statistics side by side. The real trainer's run is drawn by tests/test_train_command.py."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from codegen.cli import main
from codegen.train.report import render_report
from codegen.train.svg import nice_range, tick_label

RUN = {"ctrgen": "0.1.0", "name": "m", "spec": "m.yaml", "spec_sha256": "0" * 64, "command": ["python", "t.py"],
       "data": {"--train": ["t.parquet"]}, "generated": {"train_torch.py": "1" * 64},
       "graph": {"nodes": [["a", ["input"], "input"], ["b", ["loss"], "loss"]], "edges": [["a", "b"]]},
       "hardware": {"machine": "x86_64", "cpus": 2, "system": "Linux", "python": "3.11", "gpus": []}}
SCHEDULE = {"lr": 0.001, "warmup_steps": 0, "decay_start": 0, "decay_steps": 1, "decay_power": 2.0, "end_lr": 0.0}


def run_folder(d: Path, *, auc: list[float], lr: list[float], best_at: int, steps_per_epoch: int, rate: float) -> Path:
    d.mkdir(parents=True)
    steps = [100 * (k + 1) for k in range(len(auc))]
    points = [{"step": s, "tag": "eval/auc", "value": v} for s, v in zip(steps, auc)]
    points += [{"step": s, "tag": "train/lr", "value": v} for s, v in zip(steps, lr)]
    points += [{"step": s, "tag": "train/loss", "value": 0.5 - 0.01 * k} for k, s in enumerate(steps)]
    points += [{"step": s, "tag": "eval/loss", "value": 0.52 - 0.005 * k} for k, s in enumerate(steps)]
    points += [{"step": s, "tag": "train/samples_per_second", "value": rate + 1000 * k} for k, s in enumerate(steps)]
    metrics = {"iterations": steps[-1], "auc": auc[-1], "batch_size": 256, "world_size": 1, "global_batch_size": 256,
               "optimizer": "Adam", "lr": 0.001, "lr_schedule": SCHEDULE, "samples_per_second": rate,
               "best": {"metric": "auc", "iteration": best_at, "value": auc[best_at // 100 - 1], "folder": "best"},
               "data": {"train_rows": 41_250, "eval_rows": 5_000, "steps_per_epoch": steps_per_epoch,
                        "train_label_mean": {"click": 0.25}, "eval_label_mean": {"click": 0.2475}}}
    (d / "run.json").write_text(json.dumps(RUN))
    (d / "metrics.json").write_text(json.dumps(metrics))
    (d / "metrics.jsonl").write_text("".join(json.dumps(p) + "\n" for p in points))
    return d


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.charts: list[dict] = []
        self.constants: list[dict] = []
        self.summary: list[list[str]] = []
        self._cell: list[str] | None = None
        self._in_cell = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg" and "data-x0" in a:
            self.charts.append({**a, "curves": {}, "best": [], "epochs": [], "y_ticks": [], "x_ticks": []})
        elif tag == "polyline" and self.charts:
            self.charts[-1]["curves"][(int(a["data-run"]), a["data-tag"])] = (
                a["stroke"], [tuple(map(float, p.split(","))) for p in a["points"].split()])
        elif tag == "circle" and self.charts:
            self.charts[-1]["best"].append((int(a["data-run"]), float(a["cx"]), float(a["cy"])))
        elif tag == "line" and a.get("class") == "epoch":
            self.charts[-1]["epochs"].append(float(a["x1"]))
        elif tag == "text" and a.get("class") in ("y-tick", "x-tick"):
            self._cell = self.charts[-1][a["class"].replace("-", "_") + "s"]
        elif tag == "span" and a.get("class") == "constant":
            self.constants.append(a)
        elif tag == "tr":
            self.summary.append([])
        elif tag in ("td", "th") and self.summary:
            self.summary[-1].append("")
            self._in_cell = True

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self._in_cell = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
            self._cell = None
        elif self._in_cell:
            self.summary[-1][-1] += data


def to_data(chart: dict, x: float, y: float) -> tuple[float, float]:
    x0, x1, y0, y1 = (float(chart[k]) for k in ("data-x0", "data-x1", "data-y0", "data-y1"))
    left, top, w, h = (float(chart[k]) for k in ("data-left", "data-top", "data-plot-w", "data-plot-h"))
    return x0 + (x - left) / w * (x1 - x0), y1 - (y - top) / h * (y1 - y0)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    a = run_folder(root / "lr-small", auc=[0.70, 0.74, 0.7576, 0.75, 0.7315], lr=[0.001] * 5, best_at=300,
                   steps_per_epoch=150, rate=41_250.0)
    b = run_folder(root / "lr-big", auc=[0.68, 0.72, 0.73, 0.735, 0.738], lr=[0.001] * 5, best_at=500,
                   steps_per_epoch=150, rate=30_000.0)
    return a, b


def test_two_runs_are_overlaid_with_a_legend_the_best_point_and_epoch_boundaries(two_runs, tmp_path):
    a, b = two_runs
    out = tmp_path / "compare.html"
    result = CliRunner().invoke(main, ["report", str(a), str(b), "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "<script" not in text and " src=" not in text and "https://" not in text       # self-contained
    page = Page()
    page.feed(text)
    auc = next(c for c in page.charts if c["aria-label"] == "Eval AUC")
    (colour_a, pts_a), (colour_b, _) = auc["curves"][(0, "eval/auc")], auc["curves"][(1, "eval/auc")]
    assert colour_a != colour_b                             # a colour a run, named in the legend
    assert f"&#9632; {a} eval/auc" in text and f"&#9632; {b} eval/auc" in text
    drawn = [to_data(auc, x, y) for x, y in pts_a]
    assert [round(s) for s, _ in drawn] == [100, 200, 300, 400, 500]
    assert [v for _, v in drawn] == pytest.approx([0.70, 0.74, 0.7576, 0.75, 0.7315], abs=1e-4)
    # The AUC axis is 0.5-1 with round ticks, not auto-scaled to the spread of the values.
    assert (auc["data-y0"], auc["data-y1"]) == ("0.5", "1.0")
    assert auc["y_ticks"] == ["0.5", "0.6", "0.7", "0.8", "0.9", "1.0"]
    assert auc["x_ticks"] == ["100", "200", "300", "400", "500"]
    # The best evaluation of each run, where metrics.json says (a: 0.7576 at 300; b: 0.738 at 500).
    best = {run: to_data(auc, x, y) for run, x, y in auc["best"]}
    assert best[0] == pytest.approx((300, 0.7576), abs=1e-3) and best[1] == pytest.approx((500, 0.738), abs=1e-3)
    # Epochs of 150 iterations: boundaries at 150, 300 and 450 inside the 100-500 axis.
    assert [round(to_data(auc, x, 0)[0]) for x in auc["epochs"]] == [150, 300, 450]
    # The throughput axis: thousands with separators, never 4.125e+04.
    rate = next(c for c in page.charts if c["aria-label"] == "Throughput")
    assert rate["y_ticks"] == ["30,000", "35,000", "40,000", "45,000", "50,000"]
    # The constant learning rate is a summary line, not a chart; each series is accounted for.
    assert "Learning rate" not in [c["aria-label"] for c in page.charts]
    assert sorted((c["data-run"], c["data-tag"], c["data-points"]) for c in page.constants) == [
        ("0", "train/lr", "5"), ("1", "train/lr", "5")]
    rows = {row[0]: row[1:] for row in page.summary if row}
    assert rows["learning rate (constant)"] == ["0.001 at every point (train/lr, 5 points)"] * 2
    assert rows["optimizer, learning rate"] == ["Adam, 0.001"] * 2
    assert rows["learning-rate schedule"] == ["constant"] * 2
    assert rows["training / evaluation rows"] == ["41,250 / 5,000"] * 2
    assert rows["label mean (CTR)"] == ["click 0.25 (train), click 0.2475 (eval)"] * 2
    assert rows["iterations"] == ["500 (3.33 epochs of 150 iterations)"] * 2
    assert rows["best evaluation"] == ["auc 0.7576 at iteration 300 (best/)", "auc 0.738 at iteration 500 (best/)"]
    assert rows[""] == [str(a), str(b)]                     # the header row names each run
    assert text.count('<svg class="graph"') == 1            # the same model graph is drawn once
    # Deterministic: the same folders give the same bytes.
    assert render_report([a, b]) == text


def test_one_run_keeps_its_folder_default_and_several_runs_need_out(two_runs):
    a, b = two_runs
    result = CliRunner().invoke(main, ["report", str(a), str(b)])
    assert result.exit_code == 2 and "--out: 2 runs compared" in result.output and "fix: name the page" in result.output
    result = CliRunner().invoke(main, ["report", str(a), str(a), "--out", str(a / "x.html")])
    assert result.exit_code == 2 and "given twice" in result.output and not (a / "x.html").exists()
    assert CliRunner().invoke(main, ["report", str(a)]).exit_code == 0
    assert "<title>m: training run</title>" in (a / "report.html").read_text()


@pytest.mark.parametrize("lo, hi, ticks", [
    (0.4123, 0.4987, ["0.40", "0.42", "0.44", "0.46", "0.48", "0.50"]),
    (162.5, 387.5, ["150", "200", "250", "300", "350", "400"]),
    (3229.0, 41250.0, ["0", "10,000", "20,000", "30,000", "40,000", "50,000"]),
    (0.99, 1.01, ["0.990", "0.995", "1.000", "1.005", "1.010"]),
    (-1e308, 1e308, ["-1e+308", "-5e+307", "0", "5e+307", "1e+308"]),
])
def test_ticks_are_round_numbers(lo, hi, ticks):
    start, end, values, decimals = nice_range(lo, hi)
    assert [tick_label(v, decimals) for v in values] == ticks
    assert start <= lo and end >= hi
