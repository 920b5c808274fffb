"""metrics.json's data statistics, for ``ctrgen report``: the rows of the training and evaluation splits over every
rank, each label's mean (the observed CTR of a click label) and the iterations of one epoch."""

from __future__ import annotations

import torch

from .data import Columns
from .distributed import all_reduce


def data_facts(train_cols, valid_cols: Columns, steps_per_epoch: int, features: dict, device: torch.device) -> dict:
    """Every rank calls it (one all_reduce). A streamed training split (no Columns) has no label mean: its rows are
    not all in memory, and a guess is not written."""
    labels = [c["name"] for c in features["labels"]]
    width = len(labels)
    whole = isinstance(train_cols, Columns)
    train_sum = train_cols.tensors[0].double().sum(0).to(device) if whole else torch.zeros(width, device=device,
                                                                                              dtype=torch.float64)
    totals = torch.cat([torch.tensor([train_cols.n, valid_cols.n], dtype=torch.float64, device=device), train_sum,
                        valid_cols.tensors[0].double().sum(0).to(device)])
    totals = all_reduce(totals).tolist()
    train_rows, eval_rows = int(totals[0]), int(totals[1])
    facts: dict = {"train_rows": train_rows, "eval_rows": eval_rows, "steps_per_epoch": steps_per_epoch}
    if whole and train_rows:
        facts["train_label_mean"] = {name: round(totals[2 + i] / train_rows, 6) for i, name in enumerate(labels)}
    if eval_rows:
        facts["eval_label_mean"] = {name: round(totals[2 + width + i] / eval_rows, 6)
                                    for i, name in enumerate(labels)}
    return facts
