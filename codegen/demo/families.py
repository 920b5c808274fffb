"""Planted data for HugeCTR's sample families that the demo's MovieLens and Criteo sets do not fit (issue 41): user
behaviour sequences for DIN and BST, and a set of two labels for MMoE and shared-bottom.

Both come in the layout the samples' own preprocessing writes (HugeCTR's samples/din ``utils/4_nvt_process.py``,
samples/mmoe's census parquet): one int64 column per slot with the ids already encoded (0: padding), float32
labels, so a generated ``train_torch.py`` reads them as they are. :func:`write` splits the rows (the last 20 %
validate) and writes ``train.parquet``, ``valid.parquet`` and ``truth.json``: the planted model, each column's
cardinality (largest id + 1) and, per label, the oracle AUC (the planted logit, the Bayes ceiling), the AUC of
logistic regression on every column's one-hot ids (metrics.py) and ``suggested_min_auc``, half-way from chance to
that baseline: the bound any model that learns the planted structure clears.

**Behaviour log** (:func:`behaviour`; the columns of ``specs/taobao.features.lock.json``: ``UID``, ``MID0``-``MID10``,
``CID0``-``CID10``, ``SLEN``, ``LABEL``). Every item has a category; every user has two favourite categories. A
user's history holds ``SLEN`` (3 to 10) items in the first positions, each from a favourite category with
probability ``P_FAVOURITE``, the other positions padded with id 0; position 10 (``MID10``, ``CID10``) is the target
item, from a favourite category half of the time:

    logit = b[target item] + GAMMA * (share of the history in the target's category) + bias
    LABEL ~ Bernoulli(sigmoid(logit))

The history term is the signal DIN's attention and BST's transformer read: it depends on the target and the history
together, so a model of the target's ids alone misses it (and so does the logistic baseline, which adds one weight per
id and column).

**Two labels** (:func:`two_labels`; the columns of ``specs/census.features.lock.json``: ``C1``-``C32``,
``50k_label``, ``married_label``). 32 categorical columns of 2 to 40 values; a weight per value of the ``SHARED``
columns enters both tasks, the ``OWN`` columns of each task enter only its own:

    logit_k = bias_k + sum_{c in SHARED} w_c[C_c] + sum_{c in OWN[k]} w_kc[C_c],   label_k ~ Bernoulli(sigmoid(logit_k))

so the two labels are correlated through the shared part, as MMoE's experts and shared-bottom's trunk assume.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .metrics import SparseDesign, logistic_baseline_auc, roc_auc, suggested_min_auc

VALID_FRACTION = 0.2
HISTORY = 10                      # the samples' ten history positions; position 10 is the target
P_FAVOURITE = 0.8
GAMMA = 3.0
ITEM_BIAS_SD = 0.8
N_CENSUS_COLUMNS = 32
CENSUS_LABELS = ("50k_label", "married_label")   # samples/mmoe's label columns
SHARED = tuple(f"C{i}" for i in (1, 3, 6, 7, 14, 20))
OWN = {"50k_label": tuple(f"C{i}" for i in (2, 4, 9)), "married_label": tuple(f"C{i}" for i in (5, 12, 19))}


@dataclass(frozen=True)
class Planted:
    frame: pd.DataFrame                    # id columns, then continuous, then labels
    logits: dict[str, np.ndarray]          # label -> planted logit per row
    categorical: tuple[str, ...]
    model: str


def behaviour(seed: int, rows: int = 6_000, users: int = 400, items: int = 300, categories: int = 12) -> Planted:
    """A Taobao-shaped behaviour log with the planted history signal (module docstring)."""
    rng = np.random.default_rng([seed, 0xD1B])
    item_category = rng.integers(0, categories, items)
    by_category = [np.flatnonzero(item_category == c) for c in range(categories)]
    # a category without items (only when items are few) draws some item, whose own category is what CID records
    by_category = [ids if len(ids) else np.array([c % items]) for c, ids in enumerate(by_category)]
    favourites = np.stack([rng.choice(categories, 2, replace=False) for _ in range(users)])
    item_bias = rng.normal(0.0, ITEM_BIAS_SD, items)

    def draw(user: int, p_favourite: float) -> int:
        c = favourites[user, rng.integers(0, 2)] if rng.random() < p_favourite else rng.integers(0, categories)
        return int(rng.choice(by_category[c]))

    uid = rng.integers(0, users, rows)
    slen = rng.integers(3, HISTORY + 1, rows)
    mids = np.zeros((rows, HISTORY + 1), np.int64)        # item id + 1; 0 pads the history
    share = np.zeros(rows)
    for r in range(rows):
        history = [draw(uid[r], P_FAVOURITE) for _ in range(slen[r])]
        target = draw(uid[r], 0.5)
        mids[r, :slen[r]] = np.array(history) + 1
        mids[r, HISTORY] = target + 1
        share[r] = np.mean(item_category[history] == item_category[target])
    cids = np.where(mids > 0, item_category[np.maximum(mids - 1, 0)] + 1, 0)
    logit = item_bias[mids[:, HISTORY] - 1] + GAMMA * share
    logit += -logit.mean()
    label = (rng.random(rows) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float32)
    frame = pd.DataFrame({"UID": uid.astype(np.int64) + 1,
                          **{f"MID{i}": mids[:, i] for i in range(HISTORY + 1)},
                          **{f"CID{i}": cids[:, i].astype(np.int64) for i in range(HISTORY + 1)},
                          "SLEN": slen.astype(np.float32), "LABEL": label})
    categorical = ("UID", *(f"MID{i}" for i in range(HISTORY + 1)), *(f"CID{i}" for i in range(HISTORY + 1)))
    return Planted(frame, {"LABEL": logit}, categorical,
                   "LABEL ~ Bernoulli(sigmoid(b[MID10] + gamma * share of CID0..CID{SLEN-1} equal to CID10 + bias))")


def two_labels(seed: int, rows: int = 6_000) -> Planted:
    """A census-shaped table of 32 categorical columns and two correlated labels (module docstring)."""
    rng = np.random.default_rng([seed, 0xCE25])
    columns = tuple(f"C{i}" for i in range(1, N_CENSUS_COLUMNS + 1))
    cards = {c: int(rng.integers(2, 41)) for c in columns}
    codes = {c: rng.integers(0, cards[c], rows) for c in columns}
    shared = sum(rng.normal(0.0, 0.8, cards[c])[codes[c]] for c in SHARED)
    logits = {}
    for k, label in enumerate(CENSUS_LABELS):
        own = sum(rng.normal(0.0, 0.8, cards[c])[codes[c]] for c in OWN[label])
        z = shared + own
        logits[label] = z - z.mean() + (-1.0 if k == 0 else 0.0)
    frame = pd.DataFrame({**{c: codes[c].astype(np.int64) + 1 for c in columns},
                          **{label: (rng.random(rows) < 1.0 / (1.0 + np.exp(-z))).astype(np.float32)
                             for label, z in logits.items()}})
    return Planted(frame, logits, columns,
                   "label_k ~ Bernoulli(sigmoid(bias_k + sum_shared w_c[C_c] + sum_own(k) w_kc[C_c]))")


def write(planted: Planted, folder: Path, *, seed: int, dataset: str) -> dict[str, Path]:
    """train.parquet / valid.parquet (the last VALID_FRACTION of the rows) and truth.json under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {name: folder / name for name in ("train.parquet", "valid.parquet", "truth.json")}
    n_valid = int(len(planted.frame) * VALID_FRACTION)
    train_rows = np.arange(len(planted.frame) - n_valid)
    valid_rows = np.arange(len(planted.frame) - n_valid, len(planted.frame))
    planted.frame.iloc[train_rows].to_parquet(paths["train.parquet"], index=False)
    planted.frame.iloc[valid_rows].to_parquet(paths["valid.parquet"], index=False)
    truth = planted_truth(planted, train_rows, valid_rows, seed=seed, dataset=dataset)
    paths["truth.json"].write_text(json.dumps(truth, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return paths


def planted_truth(planted: Planted, train_rows: np.ndarray, valid_rows: np.ndarray, *, seed: int,
                  dataset: str) -> dict:
    f = planted.frame
    cards = {c: int(f[c].max()) + 1 for c in planted.categorical}

    def design(rows: np.ndarray) -> SparseDesign:
        d = SparseDesign(len(rows))
        for c in planted.categorical:
            d.add_onehot(f[c].to_numpy()[rows], cards[c])
        return d

    labels = {}
    for label, logit in planted.logits.items():
        y = f[label].to_numpy().astype(np.float64)
        baseline = logistic_baseline_auc(design(train_rows), y[train_rows], design(valid_rows), y[valid_rows])
        labels[label] = {"oracle_auc_valid": round(roc_auc(y[valid_rows], logit[valid_rows]), 4),
                         "baseline_auc_valid": {"onehot": round(baseline, 4)},
                         "suggested_min_auc": suggested_min_auc(baseline),
                         "positive_rate": {"train": round(float(y[train_rows].mean()), 4),
                                           "valid": round(float(y[valid_rows].mean()), 4)}}
    return {"dataset": dataset, "seed": seed, "model": planted.model, "cardinalities": cards,
            "rows": {"train": int(len(train_rows)), "valid": int(len(valid_rows))}, "labels": labels}
