"""The evaluation metrics of one binary label, each formula written once here: ROC AUC, log loss, normalized
entropy, calibration and PR-AUC (average precision). Every function takes the 0/1 labels and the predicted
probabilities (or scores) of the evaluation rows as tensors and returns a float, NaN where the metric is undefined
(one class only)."""

from __future__ import annotations

import math

import torch

# A probability is kept within [EPS, 1 - EPS] for its log: a saturated sigmoid would make the log loss infinite.
EPS = 1e-12
# The metrics of each label, in the order a log line shows them, with their log-line names.
NAMES = {"auc": "AUC", "normalized_entropy": "NE", "calibration": "calibration", "pr_auc": "PR-AUC"}


def roc_auc(labels: torch.Tensor, scores: torch.Tensor) -> float:
    """Area under the ROC curve (Mann-Whitney U, average ranks for ties)."""
    labels, scores = labels.double(), scores.double()
    order = torch.argsort(scores)
    _, inverse, counts = torch.unique_consecutive(scores[order], return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).double()
    ranks = ((ends - counts + 1 + ends) / 2)[inverse]
    positives = labels[order]
    n_pos = positives.sum()
    n_neg = labels.numel() - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    return float(((ranks * positives).sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def log_loss(labels: torch.Tensor, probs: torch.Tensor) -> float:
    """The mean of -(y log p + (1 - y) log(1 - p))."""
    y, p = labels.double(), probs.double().clamp(EPS, 1 - EPS)
    if y.numel() == 0:
        return float("nan")
    return float(-(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean())


def entropy(rate: float) -> float:
    """The entropy of a click rate: -(r log r + (1 - r) log(1 - r)), the log loss of always predicting ``rate``."""
    if not 0 < rate < 1:
        return float("nan")
    return -(rate * math.log(rate) + (1 - rate) * math.log(1 - rate))


def normalized_entropy(labels: torch.Tensor, probs: torch.Tensor) -> float:
    """Log loss divided by the entropy of the observed CTR: below 1 the model beats predicting the CTR."""
    return log_loss(labels, probs) / entropy(float(labels.double().mean())) if labels.numel() else float("nan")


def calibration(labels: torch.Tensor, probs: torch.Tensor) -> float:
    """The mean prediction divided by the observed CTR: 1 when the model predicts as many clicks as there are."""
    positives = float(labels.double().sum())
    return float(probs.double().sum()) / positives if positives > 0 else float("nan")


def average_precision(labels: torch.Tensor, scores: torch.Tensor) -> float:
    """PR-AUC as average precision: the sum over the distinct score thresholds, highest first, of the precision
    at the threshold times the recall it adds, sum_n (R_n - R_n-1) P_n (rows of equal score enter together)."""
    y = labels.double()
    n_pos = float(y.sum())
    if n_pos == 0:
        return float("nan")
    order = torch.argsort(scores.double(), descending=True, stable=True)
    s, y = scores.double()[order], y[order]
    _, counts = torch.unique_consecutive(s, return_counts=True)
    ends = torch.cumsum(counts, 0) - 1                  # the last row of each threshold
    true_pos = torch.cumsum(y, 0)[ends]
    precision = true_pos / (ends + 1).double()
    recall = true_pos / n_pos
    gained = torch.diff(recall, prepend=torch.zeros(1, dtype=recall.dtype))
    return float((gained * precision).sum())


def label_metrics(labels: torch.Tensor, probs: torch.Tensor) -> dict[str, float]:
    """Every metric of NAMES for one label."""
    return {"auc": roc_auc(labels, probs), "normalized_entropy": normalized_entropy(labels, probs),
            "calibration": calibration(labels, probs), "pr_auc": average_precision(labels, probs)}


def mean_metrics(per_label: dict[str, dict[str, float]]) -> dict[str, float]:
    """Each metric's mean over the labels (the run's value when a model has several)."""
    return {name: sum(m[name] for m in per_label.values()) / len(per_label) for name in NAMES}


def metrics_text(values: dict[str, float]) -> str:
    """'NE 0.9512, calibration 1.0213, PR-AUC 0.3120' (AUC is shown on its own)."""
    return ", ".join(f"{NAMES[name]} {values[name]:.4f}" for name in NAMES if name != "auc")
