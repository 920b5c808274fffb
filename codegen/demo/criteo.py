"""A small Criteo-shaped click log with planted structure, and Merlin's scaling-criteo NVTabular ETL run on it.

Columns as in Criteo's display-advertising logs (seed 004): ``label``, 13 integer features ``I1``-``I13`` (heavy-tailed
counts, some missing, ``I2`` may be negative) and 26 categorical features ``C1``-``C26`` (8-hex-digit hashes, some
missing, cardinalities from a handful to about a thousand).

Planted model (a logistic click model):

    logit = BIAS + Σ_{c in INFORMATIVE_CATS} w_c[C_c] + Σ_{i in INFORMATIVE_CONTS} v_i · z(log1p(max(I_i, 0)))
                 + <p[C1], q[C2]>                                  (one second-order term, as FM-style models learn)
    label ~ Bernoulli(sigmoid(logit))

Missing categorical values have their own weight (they map to NVTabular's null id 1). The rest of the columns are
noise. ``oracle_auc_valid`` in ``truth.json`` is the AUC of the true logit on the validation rows (the Bayes ceiling),
``baseline_auc_valid`` that of logistic regression on one-hot C* and standardised log I* (metrics.py). With the
default sizes: oracle ≈ 0.87-0.89, baseline ≈ 0.80-0.83 (measured values are in ``truth.json``).

:func:`run_etl` is Merlin's ``examples/scaling-criteo/02-ETL-with-NVTabular``: Categorify the C columns (plus one
combo-encoded cross column ``C1_C2`` first in slot order, the wide input of Wide&Deep),
``FillMissing >> Clip(min_value=0) >> Normalize(out_dtype="float32")`` for the I columns, the label tagged
``binary_classification``/``target`` with AddMetadata; ``to_parquet`` with int64 categories and float32 continuous
columns and label (the notebook stores the label as int32 for HugeCTR; float32 matches the MovieLens notebooks).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from .metrics import SparseDesign, logistic_baseline_auc, roc_auc, suggested_min_auc

CONTINUOUS = [f"I{i}" for i in range(1, 14)]
CATEGORICAL = [f"C{i}" for i in range(1, 27)]
# The wide part of Wide&Deep reads crossed columns (HugeCTR's WDL notebooks cross C1 x C2 and C3 x C4); the planted
# second-order term is exactly C1 x C2, so one cross is what a wide model can learn here.
CROSSED = [["C1", "C2"]]
CROSSED_NAMES = ["_".join(pair) for pair in CROSSED]   # Categorify(encode_type="combo") names its output "C1_C2"
LABELS = ["label"]
BIAS = -1.3
INFORMATIVE_CATS = ("C1", "C2", "C3", "C5", "C8", "C11", "C14", "C20")
INFORMATIVE_CONTS = ("I1", "I3", "I5", "I7")
VALID_FRACTION = 0.2


@dataclass(frozen=True)
class Sizes:
    n_rows: int = 6_000


@dataclass(frozen=True)
class CriteoRaw:
    frame: pd.DataFrame          # label, I1..I13, C1..C26 in Criteo's column order
    logit: np.ndarray            # the planted logit per row


def synthesize(seed: int, sizes: Sizes = Sizes()) -> CriteoRaw:
    rng = np.random.default_rng([seed, 0xC817E0])
    n = sizes.n_rows
    logit = np.zeros(n)
    data: dict[str, np.ndarray] = {}

    for name in CONTINUOUS:
        counts = np.floor(rng.lognormal(rng.uniform(0.0, 2.5), rng.uniform(0.5, 1.5), n))
        if name == "I2":                               # Criteo's I2 has small negative values
            counts -= rng.integers(0, 3, n)
        missing = rng.random(n) < rng.uniform(0.0, 0.3)
        values = np.where(missing, np.nan, counts)
        if name in INFORMATIVE_CONTS:
            x = np.log1p(np.clip(np.nan_to_num(values, nan=0.0), 0, None))
            logit += rng.choice([-1.0, 1.0]) * rng.uniform(0.3, 0.6) * (x - x.mean()) / (x.std() + 1e-9)
        data[name] = values

    codes_of: dict[str, np.ndarray] = {}
    for j, name in enumerate(CATEGORICAL):
        card = int(np.clip(np.round(np.exp(rng.uniform(np.log(3), np.log(1200)))), 3, 1200))
        vocab = np.array([f"{h:08x}" for h in rng.choice(2**32, size=card, replace=False)], dtype=object)
        popularity = rng.lognormal(0.0, 1.5, card)
        codes = rng.choice(card, n, p=popularity / popularity.sum())
        missing = rng.random(n) < (rng.uniform(0.0, 0.4) if j % 3 == 0 else 0.0)
        codes = np.where(missing, card, codes)        # code ``card`` = missing
        codes_of[name] = codes
        if name in INFORMATIVE_CATS:
            weight = rng.normal(0.0, 0.8, card + 1)
            logit += weight[codes]
        values = np.append(vocab, None)[codes]
        data[name] = values

    # One pairwise interaction between C1 and C2.
    card1, card2 = codes_of["C1"].max() + 1, codes_of["C2"].max() + 1
    p, q = rng.normal(0.0, 0.7, (card1, 2)), rng.normal(0.0, 0.7, (card2, 2))
    logit += np.einsum("ij,ij->i", p[codes_of["C1"]], q[codes_of["C2"]])

    logit += BIAS - logit.mean()                     # about Criteo's click rate of one in four
    label = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)
    frame = pd.DataFrame({"label": label, **{c: data[c] for c in CONTINUOUS}, **{c: data[c] for c in CATEGORICAL}})
    return CriteoRaw(frame=frame, logit=logit)


def write_raw(raw: CriteoRaw, raw_dir: Path, *, seed: int) -> dict[str, Path]:
    """Split by position (later rows validate, like Criteo's later days) into train/valid parquet + truth.json."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    paths = {name: raw_dir / name for name in ("train.parquet", "valid.parquet", "truth.json")}
    n_valid = int(len(raw.frame) * VALID_FRACTION)
    train, valid = raw.frame.iloc[:-n_valid], raw.frame.iloc[-n_valid:]
    train.to_parquet(paths["train.parquet"], index=False)
    valid.to_parquet(paths["valid.parquet"], index=False)
    truth = planted_truth(raw, np.arange(len(train)), np.arange(len(train), len(raw.frame)), seed=seed)
    paths["truth.json"].write_text(json.dumps(truth, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return paths


def planted_truth(raw: CriteoRaw, train_rows: np.ndarray, valid_rows: np.ndarray, *, seed: int) -> dict:
    f = raw.frame
    y = f["label"].to_numpy().astype(np.float64)
    vocab = {c: {v: i + 1 for i, v in enumerate(pd.unique(f[c].iloc[train_rows].fillna("<null>")))}
             for c in CATEGORICAL}
    logs = np.log1p(np.clip(f[CONTINUOUS].fillna(0.0).to_numpy(np.float64), 0, None))
    mean, sd = logs[train_rows].mean(axis=0), logs[train_rows].std(axis=0) + 1e-9

    def design(rows: np.ndarray) -> SparseDesign:
        d = SparseDesign(len(rows))
        for c in CATEGORICAL:
            values = f[c].iloc[rows].fillna("<null>")
            d.add_onehot(np.array([vocab[c].get(v, 0) for v in values]), len(vocab[c]) + 1)
        d.add_dense((logs[rows] - mean) / sd)
        return d

    baseline = logistic_baseline_auc(design(train_rows), y[train_rows], design(valid_rows), y[valid_rows])
    return {
        "dataset": "criteo (synthetic, Criteo display-advertising shaped)",
        "seed": seed,
        "model": "label ~ Bernoulli(sigmoid(bias + sum w_c[C_c] + sum v_i z(log1p I_i) + <p[C1], q[C2]>))",
        "informative": {"categorical": list(INFORMATIVE_CATS), "continuous": list(INFORMATIVE_CONTS)},
        "rows": {"train": int(len(train_rows)), "valid": int(len(valid_rows))},
        "positive_rate": {"train": round(float(y[train_rows].mean()), 4),
                          "valid": round(float(y[valid_rows].mean()), 4)},
        "oracle_auc_valid": round(roc_auc(y[valid_rows], raw.logit[valid_rows]), 4),
        "baseline_auc_valid": {"onehot": round(baseline, 4)},
        "suggested_min_auc": suggested_min_auc(baseline),
    }


def run_etl(raw_dir: Path, out_dir: Path, *, seed: int, step: Callable[[str], None] | None = None) -> dict[str, Path]:
    """Merlin's Criteo ETL as an ``etl:`` section run by ctrgen's generated etl.py."""
    from . import etl

    section = {
        "inputs": {"train": [str(raw_dir / "train.parquet")], "valid": [str(raw_dir / "valid.parquet")],
                   "columns": {"label": "int64", **{c: "float64" for c in CONTINUOUS}, **{c: "str" for c in CATEGORICAL}}},
        # Combo encoding gives each (C1, C2) pair seen in training its own id (the wide input, first in slot order).
        "cross": [{"columns": pair} for pair in CROSSED],
        "groups": [{"columns": CATEGORICAL, "ops": ["Categorify"]},
                   {"columns": CONTINUOUS, "ops": ["FillMissing", {"Clip": {"min_value": 0}},
                                                   {"Normalize": {"out_dtype": "float32"}}]},
                   {"columns": LABELS, "ops": [], "role": "label"}],
        "output": {"dir": str(out_dir), "out_files_per_proc": etl.OUT_FILES_PER_PROC, "shuffle": True, "seed": seed,
                   "reader": "hugectr"},
    }
    return etl.run_section("criteo", section, raw_dir, step=step)
