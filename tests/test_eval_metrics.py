"""The evaluation metrics (codegen.runtime.metrics) against direct numpy computations, and the best-evaluation
tracker behind --early-stop (codegen.runtime.early_stop) on a small model."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
import torch

from codegen.runtime.early_stop import BestTracker, parse_early_stop
from codegen.runtime.evaluation import Evaluation
from codegen.runtime.metrics import (average_precision, calibration, label_metrics, log_loss, mean_metrics,
                                     normalized_entropy, roc_auc)


def _data(n=500, seed=0, ties=False):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.2).astype(np.float64)
    p = 1 / (1 + np.exp(-(rng.normal(size=n) + 1.5 * y - 1.5)))
    if ties:
        p = np.clip(np.round(p, 1), 0.05, 0.95)
    return y, p


def _np_ap(y, p):
    """Average precision by its definition: at each distinct threshold t (highest first), the precision of the rows
    scored >= t times the recall the threshold adds."""
    ap, prev = 0.0, 0.0
    for t in sorted(set(p), reverse=True):
        chosen = p >= t
        tp = y[chosen].sum()
        recall = tp / y.sum()
        ap += (recall - prev) * tp / chosen.sum()
        prev = recall
    return ap


@pytest.mark.parametrize("ties", [False, True])
def test_metrics_match_numpy(ties):
    y, p = _data(ties=ties)
    ty, tp = torch.from_numpy(y), torch.from_numpy(p)
    ll = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
    ctr = y.mean()
    assert log_loss(ty, tp) == pytest.approx(ll, rel=1e-12)
    assert normalized_entropy(ty, tp) == pytest.approx(ll / -(ctr * np.log(ctr) + (1 - ctr) * np.log(1 - ctr)),
                                                        rel=1e-12)
    assert calibration(ty, tp) == pytest.approx(p.mean() / ctr, rel=1e-12)
    assert average_precision(ty, tp) == pytest.approx(_np_ap(y, p), rel=1e-12)
    pos, neg = p[y == 1], p[y == 0]
    pairs = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    assert roc_auc(ty, tp) == pytest.approx(pairs / (len(pos) * len(neg)), rel=1e-12)


def test_metrics_of_known_cases():
    y = torch.tensor([1.0, 0.0, 1.0, 0.0])
    assert average_precision(y, torch.tensor([0.9, 0.8, 0.7, 0.1])) == pytest.approx((1 + 2 / 3) / 2)
    assert average_precision(y, torch.tensor([0.9, 0.1, 0.8, 0.2])) == 1.0
    # predicting the observed CTR everywhere: NE 1, calibration 1
    assert normalized_entropy(y, torch.full((4,), 0.5)) == pytest.approx(1.0)
    assert calibration(y, torch.full((4,), 0.25)) == pytest.approx(0.5)
    one_class = label_metrics(torch.zeros(3), torch.tensor([0.1, 0.2, 0.3]))
    assert all(np.isnan(one_class[k]) for k in ("auc", "normalized_entropy", "calibration", "pr_auc"))
    assert mean_metrics({"a": {"auc": 0.6, "normalized_entropy": 0.9, "calibration": 1.0, "pr_auc": 0.2},
                         "b": {"auc": 0.8, "normalized_entropy": 0.7, "calibration": 1.2, "pr_auc": 0.4}}) == \
        pytest.approx({"auc": 0.7, "normalized_entropy": 0.8, "calibration": 1.1, "pr_auc": 0.3})


class _Points:
    def __init__(self):
        self.points = []

    def scalar(self, tag, step, value):
        self.points.append((tag, step, value))


def test_evaluation_records_every_metric_per_label():
    per = {"click": {"auc": 0.7, "normalized_entropy": 0.9, "calibration": 1.1, "pr_auc": 0.3},
           "like": {"auc": 0.6, "normalized_entropy": 0.95, "calibration": 0.9, "pr_auc": 0.2}}
    result = Evaluation(0.45, mean_metrics(per), per)
    rec, metrics = _Points(), {}
    result.record(rec, metrics, 20)
    tags = {t for t, _, _ in rec.points}
    assert {"eval/loss", "eval/auc", "eval/normalized_entropy", "eval/calibration", "eval/pr_auc",
            "eval/pr_auc/like", "eval/calibration/click"} <= tags
    assert metrics["normalized_entropy"] == pytest.approx(0.925) and metrics["auc_per_label"]["like"] == 0.6
    assert metrics["eval_per_label"]["click"]["pr_auc"] == 0.3
    assert result.text() == ("eval AUC 0.6500 (click 0.7000, like 0.6000), eval loss 0.4500, NE 0.9250, "
                             "calibration 1.0000, PR-AUC 0.2500")


def test_early_stop_keeps_the_best_weights_and_stops(tmp_path):
    model = torch.nn.Linear(2, 1)
    best = BestTracker(tmp_path / "best", {"sparse": []}, "auc", 2)
    stops = []
    for it, auc in ((10, 0.6), (20, 0.7), (30, 0.65), (40, 0.69)):
        with torch.no_grad():
            model.weight.fill_(it)
        stops.append(best.observe(Evaluation(0.5, {"auc": auc}), it, model))
    assert stops == [False, False, False, True]
    saved = torch.load(tmp_path / "best" / "model.pt", weights_only=True)
    assert saved["weight"].flatten().tolist() == [20.0, 20.0]          # the weights of iteration 20
    assert json.loads((tmp_path / "best" / "features.json").read_text()) == {"sparse": []}
    metrics = {}
    best.record(metrics)
    assert metrics["best"] == {"metric": "auc", "iteration": 20, "value": 0.7, "folder": "best"}
    assert metrics["stopped_early"] is True and metrics["early_stop"] == "auc:2"
    loss = BestTracker(tmp_path / "b2", {}, "loss", None)
    assert [loss.observe(Evaluation(v, {"auc": 0.5}), i, model) for i, v in enumerate((0.5, 0.4, 0.45))] == \
        [False] * 3
    assert loss.iteration == 1 and loss.value == 0.4


def test_early_stop_argument():
    assert parse_early_stop("loss:3") == ("loss", 3)
    for bad in ("auc", "auc:0", "pr_auc:2", "auc:x"):
        with pytest.raises(argparse.ArgumentTypeError, match="METRIC:PATIENCE"):
            parse_early_stop(bad)


def test_unknown_trainer_option_names_the_closest():
    from codegen.runtime.cli import unknown_text

    text = unknown_text(["--max-iters", "5"], ["--max-iter", "--epochs", "--early-stop"])
    assert text == ("unrecognized arguments: --max-iters 5 (did you mean '--max-iter'?); the options: --early-stop, "
                    "--epochs, --max-iter")
