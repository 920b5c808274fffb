"""Evaluation: the loss and the metrics of each label (runtime.metrics) over every rank's evaluation rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .data import Columns
from .distributed import gather
from .losses import LossTerm, objective, probabilities
from .metrics import NAMES, label_metrics, mean_metrics, metrics_text, roc_auc
from .precision import autocast
from .sharding import eval_sizes

__all__ = ["Evaluation", "evaluate", "evaluate_job", "evaluate_labels", "roc_auc"]


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


@dataclass(frozen=True)
class Evaluation:
    """One evaluation: the loss, each metric of runtime.metrics (the mean over the labels where there are several)
    and, for several labels, each label's metrics."""

    loss: float
    values: dict[str, float]
    per_label: dict[str, dict[str, float]] | None = None

    @property
    def auc(self) -> float:
        return self.values["auc"]

    def text(self) -> str:
        """The log line's part: 'eval AUC 0.7012 (label a 0.7012, ...), eval loss 0.4512, NE 0.95, ...'."""
        labels = "" if not self.per_label else \
            " (" + ", ".join(f"{name} {m['auc']:.4f}" for name, m in self.per_label.items()) + ")"
        return f"eval AUC {self.auc:.4f}{labels}, eval loss {self.loss:.4f}, {metrics_text(self.values)}"

    def record(self, recorder, metrics: dict, it: int) -> None:
        """Every value as an ``eval/...`` scalar point (``eval/<metric>/<label>`` per label) and in ``metrics``
        (metrics.json: auc, eval_loss, each metric, and per label auc_per_label and eval_per_label)."""
        recorder.scalar("eval/loss", it, self.loss)
        for name in NAMES:
            recorder.scalar(f"eval/{name}", it, self.values[name])
            metrics[name] = round(self.values[name], 6)
        for label, values in (self.per_label or {}).items():
            for name in NAMES:
                recorder.scalar(f"eval/{name}/{label}", it, values[name])
            metrics.setdefault("auc_per_label", {})[label] = round(values["auc"], 6)
            metrics.setdefault("eval_per_label", {})[label] = {k: round(v, 6) for k, v in values.items()}
        metrics["eval_loss"] = round(self.loss, 6)


def evaluate_one(model: nn.Module, columns: Columns, batch_size: int, precision: str = "fp32",
                 progress: Callable[[int], None] | None = None) -> Evaluation:
    """The metrics and mean BCE of a model with one BinaryCrossEntropyLoss of one label."""
    score, label = _outputs(model, columns, batch_size, precision, progress)
    score, label = score[:, 0], label[:, 0]
    loss = F.binary_cross_entropy_with_logits(score, label).item()
    return Evaluation(loss, label_metrics(label, torch.sigmoid(score.double())))


def evaluate(model: nn.Module, columns: Columns, batch_size: int, precision: str = "fp32",
             progress: Callable[[int], None] | None = None) -> tuple[float, float]:
    """(AUC, mean BCE) over the evaluation rows of every rank; ``progress`` is told the batches done after each."""
    result = evaluate_one(model, columns, batch_size, precision, progress)
    return result.auc, result.loss


def evaluate_labels(model: nn.Module, columns: Columns, batch_size: int, terms: tuple[LossTerm, ...],
                    precision: str = "fp32", progress: Callable[[int], None] | None = None) -> Evaluation:
    """The metrics of each label, their means and the loss HugeCTR reports, of a model with several labels or
    another loss than BinaryCrossEntropyLoss (runtime.losses)."""
    score, label = _outputs(model, columns, batch_size, precision, progress)
    _, loss = objective(terms, score, label)
    per_label = {name: label_metrics(y[keep], p[keep]) for name, p, y, keep in probabilities(terms, score, label)}
    return Evaluation(loss.item(), mean_metrics(per_label), per_label)


def evaluate_job(model: nn.Module, columns: Columns, batch_size: int, terms: tuple[LossTerm, ...] | None,
                 precision: str = "fp32", progress: Callable[[int], None] | None = None) -> Evaluation:
    """evaluate_one() for one BinaryCrossEntropyLoss of one label (no metrics per label), else evaluate_labels()."""
    if terms is None:
        return evaluate_one(model, columns, batch_size, precision, progress)
    return evaluate_labels(model, columns, batch_size, terms, precision, progress)
