"""Reference numbers for the synthetic demo data: ROC AUC and a plain logistic-regression baseline (numpy only).

The demo datasets plant a known signal (see movielens.py / criteo.py). Two numbers bound what a trained model should
reach on the validation split:

* ``oracle_auc``: AUC of the planted signal itself, the Bayes-optimal ranking (a ceiling, up to sampling noise);
* ``baseline_auc``: AUC of an L2-regularised logistic regression on the one-hot (and multi-hot) ids, fitted on the
  train split: what a linear model gets from the same inputs a HugeCTR model sees.
"""

from __future__ import annotations

import numpy as np


def roc_auc(labels, scores) -> float:
    """Area under the ROC curve (Mann-Whitney U with average ranks for ties)."""
    y = np.asarray(labels, dtype=np.float64).ravel()
    s = np.asarray(scores, dtype=np.float64).ravel()
    if y.shape != s.shape:
        raise ValueError("labels and scores differ in length")
    n_pos = float((y > 0.5).sum())
    n_neg = float(len(y) - n_pos)
    if n_pos == 0 or n_neg == 0:
        raise ValueError("AUC needs both classes")
    order = np.argsort(s, kind="mergesort")
    sorted_s = s[order]
    ranks = np.empty(len(s), dtype=np.float64)
    # Average rank over each run of equal scores.
    bounds = np.flatnonzero(np.diff(sorted_s)) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [len(s)]))
    avg = (starts + ends - 1) / 2.0 + 1.0
    ranks[order] = np.repeat(avg, ends - starts)
    rank_sum = ranks[y > 0.5].sum()
    return float((rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def suggested_min_auc(baseline_auc: float) -> float:
    """Half-way from chance to the logistic baseline: clearly above 0.5, and any model that learns clears it."""
    return round(0.5 + 0.5 * (baseline_auc - 0.5), 4)


class SparseDesign:
    """Rows of (feature index, value) pairs: one-hot ids and normalised multi-hot lists, built block by block."""

    def __init__(self, n_rows: int):
        self.n_rows = n_rows
        self.rows: list[np.ndarray] = []
        self.cols: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []
        self.width = 0

    def add_onehot(self, codes: np.ndarray, n_codes: int) -> None:
        self.rows.append(np.arange(self.n_rows))
        self.cols.append(self.width + np.asarray(codes, dtype=np.int64))
        self.vals.append(np.ones(self.n_rows))
        self.width += n_codes

    def add_multihot(self, lists: list, n_codes: int) -> None:
        lengths = np.array([len(x) for x in lists])
        self.rows.append(np.repeat(np.arange(self.n_rows), lengths))
        self.cols.append(self.width + np.concatenate([np.asarray(x, dtype=np.int64) for x in lists]))
        self.vals.append(np.repeat(1.0 / np.maximum(lengths, 1), lengths))
        self.width += n_codes

    def add_dense(self, x: np.ndarray) -> None:
        x = np.asarray(x, dtype=np.float64).reshape(self.n_rows, -1)
        for j in range(x.shape[1]):
            self.rows.append(np.arange(self.n_rows))
            self.cols.append(np.full(self.n_rows, self.width))
            self.vals.append(x[:, j])
            self.width += 1

    def arrays(self, width: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        return (np.concatenate(self.rows), np.concatenate(self.cols), np.concatenate(self.vals),
                width if width is not None else self.width)


def _logits(w: np.ndarray, b: float, rows, cols, vals, n_rows: int) -> np.ndarray:
    return b + np.bincount(rows, weights=w[cols] * vals, minlength=n_rows)


def logistic_baseline_auc(train: SparseDesign, y_train, valid: SparseDesign, y_valid, *, l2: float = 1e-3,
                          steps: int = 400, lr: float = 0.1) -> float:
    """Fit logistic regression (full-batch Adam, deterministic) on ``train``; return its AUC on ``valid``."""
    rows, cols, vals, width = train.arrays()
    y = np.asarray(y_train, dtype=np.float64)
    n = train.n_rows
    w = np.zeros(width)
    b = 0.0
    m_w = np.zeros(width); v_w = np.zeros(width); m_b = v_b = 0.0
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    for t in range(1, steps + 1):
        p = 1.0 / (1.0 + np.exp(-_logits(w, b, rows, cols, vals, n)))
        r = p - y
        g_w = np.bincount(cols, weights=r[rows] * vals, minlength=width) / n + l2 * w
        g_b = r.mean()
        m_w = beta1 * m_w + (1 - beta1) * g_w; v_w = beta2 * v_w + (1 - beta2) * g_w ** 2
        m_b = beta1 * m_b + (1 - beta1) * g_b; v_b = beta2 * v_b + (1 - beta2) * g_b ** 2
        c1, c2 = 1 - beta1 ** t, 1 - beta2 ** t
        w -= lr * (m_w / c1) / (np.sqrt(v_w / c2) + eps)
        b -= lr * (m_b / c1) / (np.sqrt(v_b / c2) + eps)
    vr, vc, vv, _ = valid.arrays()
    return roc_auc(y_valid, _logits(w, b, vr, vc, vv, valid.n_rows))
