"""Evaluation: AUC and the mean loss over every rank's evaluation rows."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from .data import Columns
from .distributed import gather
from .losses import LossTerm, objective, probabilities
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
def _outputs(model: nn.Module, columns: Columns, batch_size: int, precision: str,
             progress: Callable[[int], None] | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits (N, outputs), labels (N, labels)) of the evaluation rows of every rank."""
    model.eval()
    scores, labels, width = [], [], 1
    for done, (start, _) in enumerate(eval_sizes(model, columns.n, batch_size, columns.device), 1):
        if progress is not None:
            progress(done)
        if start >= columns.n:    # sharded tables: no rows left here, but this rank's lookups take part
            with autocast(columns.device, precision):
                width = model(*[torch.zeros((1, *t.shape[1:]), dtype=t.dtype, device=columns.device)
                                for t in columns.tensors[1:]]).shape[1]
            continue
        index = torch.arange(start, min(start + batch_size, columns.n), device=columns.tensors[0].device)
        label, *inputs = columns.batch(index)
        with autocast(columns.device, precision):
            scores.append(model(*inputs).float())
        labels.append(label)
    model.train()
    device, labels_width = columns.device, columns.tensors[0].shape[1]
    width = scores[0].shape[1] if scores else width
    score = gather(torch.cat(scores).reshape(-1) if scores else torch.zeros(0, device=device))
    label = gather(torch.cat(labels).reshape(-1) if labels else torch.zeros(0, device=device))
    return score.reshape(-1, width), label.reshape(-1, labels_width)


def evaluate(model: nn.Module, columns: Columns, batch_size: int, precision: str = "fp32",
             progress: Callable[[int], None] | None = None) -> tuple[float, float]:
    """(AUC, mean BCE) over the evaluation rows of every rank; ``progress`` is told the batches done after each."""
    score, label = _outputs(model, columns, batch_size, precision, progress)
    score, label = score[:, 0], label[:, 0]
    loss = F.binary_cross_entropy_with_logits(score, label).item()
    return roc_auc(label, torch.sigmoid(score)), loss


def evaluate_labels(model: nn.Module, columns: Columns, batch_size: int, terms: tuple[LossTerm, ...],
                    precision: str = "fp32", progress: Callable[[int], None] | None = None
                    ) -> tuple[float, float, dict[str, float]]:
    """(mean AUC over the labels, the loss HugeCTR reports, AUC per label) of a model with several labels or
    another loss than BinaryCrossEntropyLoss (runtime.losses)."""
    score, label = _outputs(model, columns, batch_size, precision, progress)
    _, loss = objective(terms, score, label)
    per_label = {name: roc_auc(y[keep], p[keep]) for name, p, y, keep in probabilities(terms, score, label)}
    return sum(per_label.values()) / len(per_label), loss.item(), per_label



def evaluate_job(model: nn.Module, columns: Columns, batch_size: int, terms: tuple[LossTerm, ...] | None,
                 precision: str = "fp32", progress: Callable[[int], None] | None = None
                 ) -> tuple[float, float, dict[str, float] | None]:
    """evaluate() for one BinaryCrossEntropyLoss of one label (no AUC per label), else evaluate_labels()."""
    if terms is None:
        return (*evaluate(model, columns, batch_size, precision, progress), None)
    return evaluate_labels(model, columns, batch_size, terms, precision, progress)


def per_label_text(per_label: dict[str, float] | None) -> str:
    """The log line's AUC of each label: ' (label a 0.7012, label b 0.6543)', or nothing for one label."""
    if not per_label:
        return ""
    return " (" + ", ".join(f"{name} {auc:.4f}" for name, auc in per_label.items()) + ")"
