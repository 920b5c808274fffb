"""Several labels and the losses other than one BinaryCrossEntropyLoss (codegen/runtime/losses.py).

The loss functions against NumPy references written from HugeCTR's loss unit tests and kernels (tests/
hugectr_reference.py; float32 against float64, rtol 1e-5, atol 1e-7): value and gradient. Then a two-label,
MMoE-like spec (two label columns, a shared layer, a tower and a BinaryCrossEntropyLoss per label, Model.compile's
loss_weights) renders, and its train_torch.py trains a few iterations on tiny synthetic Parquet data in a process
forked from the warm Python and writes an AUC per label.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

import hugectr_reference as ref
from codegen.runtime.losses import LossTerm, cross_entropy, multi_cross_entropy, objective, probabilities
from conftest import REPO
from test_boundaries import LOCK, _render, spec_with
from warm_python import run as run_warm

TOL = {"rtol": 1e-5, "atol": 1e-7}


def _grad(fn, x: np.ndarray) -> tuple[float, np.ndarray]:
    t = torch.tensor(x, dtype=torch.float32, requires_grad=True)
    loss = fn(t)
    loss.backward()
    return loss.item(), t.grad.double().numpy()


def test_cross_entropy_loss():
    """CrossEntropyLoss: loss_test.cpp's cross_entropy_loss (v23.06.01), label (B, 1) and the (B, 2) label the
    built graph gives it, read flat as the kernel reads it."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 2))
    for label in (rng.integers(0, 2, (6, 1)).astype(float), rng.integers(0, 2, (6, 2)).astype(float)):
        got, dx = _grad(lambda t, y=label: cross_entropy(t, torch.tensor(y, dtype=torch.float32)), x)
        want, want_dx = ref.cross_entropy_loss(x, label)
        np.testing.assert_allclose(got, want, **TOL)
        np.testing.assert_allclose(dx, want_dx, **TOL)


def test_multi_cross_entropy_loss():
    """MultiCrossEntropyLoss: target weights per column, a label below -0.5 skipped but counted in B * N."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 3)) * 3
    label = rng.integers(0, 2, (5, 3)).astype(float)
    label[1, 2] = label[3, 0] = -1.0
    weights = [0.5, 2.0, 1.0]
    got, dx = _grad(lambda t: multi_cross_entropy(t, torch.tensor(label, dtype=torch.float32),
                                                  torch.tensor(weights)), x)
    want, want_dx = ref.multi_cross_entropy_loss(x, label, weights)
    np.testing.assert_allclose(got, want, **TOL)
    np.testing.assert_allclose(dx, want_dx, **TOL)
    assert dx[1, 2] == 0 and dx[3, 0] == 0


def test_several_losses_report_the_weighted_sum_and_train_on_the_plain_sum():
    """Two BinaryCrossEntropyLosses (MMoE): HugeCTR scales the reported loss by each label weight, not the gradient."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 2))
    label = rng.integers(0, 2, (8, 2)).astype(float)
    terms = (LossTerm("BinaryCrossEntropyLoss", (0, 1), (0, 1), ("a",), weight=0.25),
             LossTerm("BinaryCrossEntropyLoss", (1, 2), (1, 2), ("b",), weight=0.75))
    t = torch.tensor(x, dtype=torch.float32, requires_grad=True)
    total, reported = objective(terms, t, torch.tensor(label, dtype=torch.float32))
    total.backward()
    (la, da), (lb, db) = (ref.binary_cross_entropy_loss(x[:, [j]], label[:, [j]]) for j in (0, 1))
    np.testing.assert_allclose(reported.item(), 0.25 * la + 0.75 * lb, **TOL)
    np.testing.assert_allclose(total.item(), la + lb, **TOL)
    np.testing.assert_allclose(t.grad.double().numpy(), np.hstack([da, db]), **TOL)
    names = [name for name, *_ in probabilities(terms, t.detach(), torch.tensor(label))]
    assert names == ["a", "b"]


# ---- a two-label model end to end ----------------------------------------------------------------------------------

TWO = copy.deepcopy(LOCK)
TWO["labels"] = [{"name": "rating", "dtype": "float32"}, {"name": "liked", "dtype": "float32"}]
MMOE = {"hugectr_version": "23.06", "features.label": ["rating", "liked"], "model": {"preset": "layers", "layers": [
    {"type": "Reshape", "bottom": "sparse_embedding1", "top": "r", "leading_dim": 32},
    {"type": "InnerProduct", "bottom": "r", "top": "shared", "num_output": 8},
    {"type": "ReLU", "bottom": "shared", "top": "shared_relu"},
    {"type": "InnerProduct", "bottom": "shared_relu", "top": "a_fc", "num_output": 1},
    {"type": "InnerProduct", "bottom": "shared_relu", "top": "b_fc", "num_output": 1},
    {"type": "BinaryCrossEntropyLoss", "bottom": ["a_fc", "rating"], "top": "loss_a"},
    {"type": "BinaryCrossEntropyLoss", "bottom": ["b_fc", "liked"], "top": "loss_b"}]},
    "training.compile": {"loss_names": ["rating", "liked"], "loss_weights": [0.5, 0.5]}}


def _synthesize(features: dict, rows: int, out: Path, seed: int) -> None:
    """One Parquet file: each label follows a logistic model of the ids of its own."""
    rng = np.random.default_rng(seed)
    columns: dict[str, np.ndarray] = {}
    logits = np.zeros((2, rows))
    for s in features["sparse"]:
        for c in s["columns"]:
            card = min(c["cardinality"], 20)
            ids = rng.integers(0, card, rows)
            columns[c["name"]] = ids.astype(np.int64)
            logits += np.random.default_rng([7, card]).normal(0.0, 1.5, (2, card))[:, ids]
    for c in features["continuous"]:
        columns[c["name"]] = rng.normal(0.0, 1.0, rows).astype(np.float32)
    for j, c in enumerate(features["labels"]):
        columns[c["name"]] = (rng.random(rows) < 1 / (1 + np.exp(-logits[j]))).astype(np.float32)
    out.mkdir(parents=True)
    pq.write_table(pa.table(columns), out / "part_0.parquet")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict:
    return _render(tmp_path_factory.mktemp("mmoe"), spec_with(MMOE), TWO).files


def test_two_labels_render_one_output_column_each(rendered):
    text = rendered[next(k for k in rendered if str(k) == "train_torch.py")]
    assert "return torch.cat([a_fc, b_fc], dim=1)" in text
    assert ('LossTerm(kind="BinaryCrossEntropyLoss", outputs=(0, 1), labels=(0, 1), names=("rating",), weight=0.5)'
            in text)
    assert 'outputs=(1, 2), labels=(1, 2), names=("liked",), weight=0.5)' in text
    features = json.loads(rendered[next(k for k in rendered if str(k) == "features.json")])
    assert [c["name"] for c in features["labels"]] == ["rating", "liked"]


def test_two_labels_train_and_report_an_auc_per_label(rendered, tmp_path):
    """Seconds: the generated two-label trainer runs 60 steps to learn both planted labels."""
    for name in ("train_torch.py", "features.json"):
        (tmp_path / name).write_text(rendered[next(k for k in rendered if str(k) == name)])
    features = json.loads((tmp_path / "features.json").read_text())
    _synthesize(features, 4096, tmp_path / "data" / "train", 1)
    _synthesize(features, 1024, tmp_path / "data" / "valid", 2)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0", "PYTHONPATH": str(REPO)}
    proc = run_warm([sys.executable, "train_torch.py", "--device", "cpu", "--train", "data/train", "--eval",
                     "data/valid", "--max-iter", "60", "--batch-size", "128", "--display", "30", "--eval-interval",
                     "60", "--snapshot", "0", "--lr", "0.01", "--compile", "off", "--output-dir", "out"],
                    cwd=tmp_path, env=env, timeout=300)      # a process forked from the warm Python
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    per_label = metrics["auc_per_label"]
    assert sorted(per_label) == ["liked", "rating"]
    assert all(auc > 0.6 for auc in per_label.values()), per_label     # each tower learned its own label
    assert metrics["auc"] == pytest.approx(sum(per_label.values()) / 2, abs=1e-5)
    assert "eval AUC" in proc.stdout and "rating " in proc.stdout and "liked " in proc.stdout
    tags = {json.loads(line)["tag"] for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()}
    assert {"eval/auc/rating", "eval/auc/liked", "eval/auc", "eval/loss", "eval/normalized_entropy/rating",
            "eval/calibration/liked", "eval/pr_auc/rating", "eval/pr_auc"} <= tags
    each = metrics["eval_per_label"]
    assert sorted(each) == ["liked", "rating"] and each["rating"]["auc"] == per_label["rating"]
    assert metrics["pr_auc"] == pytest.approx((each["rating"]["pr_auc"] + each["liked"]["pr_auc"]) / 2, abs=1e-5)
    assert all(0 < m["normalized_entropy"] < 1 for m in each.values()), each    # both beat the label's CTR
