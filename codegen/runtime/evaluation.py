"""Evaluation: AUC and the mean loss over every rank's evaluation rows."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from .data import Columns
from .distributed import gather
from .precision import autocast
from .sharding import eval_sizes


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


@torch.no_grad()
def evaluate(model: nn.Module, columns: Columns, batch_size: int, precision: str = "fp32",
             progress: Callable[[int], None] | None = None) -> tuple[float, float]:
    """(AUC, mean BCE) over the evaluation rows of every rank; ``progress`` is told the batches done after each."""
    model.eval()
    scores, labels = [], []
    for done, (start, _) in enumerate(eval_sizes(model, columns.n, batch_size, columns.device), 1):
        if progress is not None:
            progress(done)
        if start >= columns.n:    # sharded tables: no rows left here, but this rank's lookups take part
            with autocast(columns.device, precision):
                model(*[torch.zeros((1, *t.shape[1:]), dtype=t.dtype, device=columns.device)
                        for t in columns.tensors[1:]])
            continue
        index = torch.arange(start, min(start + batch_size, columns.n), device=columns.tensors[0].device)
        label, *inputs = columns.batch(index)
        with autocast(columns.device, precision):
            scores.append(model(*inputs)[:, 0].float())
        labels.append(label[:, 0])
    model.train()
    device = columns.device
    score = gather(torch.cat(scores) if scores else torch.zeros(0, device=device))
    label = gather(torch.cat(labels) if labels else torch.zeros(0, device=device))
    loss = F.binary_cross_entropy_with_logits(score, label).item()
    return roc_auc(label, torch.sigmoid(score)), loss

