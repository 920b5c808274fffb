"""The losses a generated Model trains with when its graph does not end in one BinaryCrossEntropyLoss of one label:
several loss layers (one per label, MMoE-style), CrossEntropyLoss and MultiCrossEntropyLoss, as HugeCTR's
src/loss.cu computes them (3.2 - 25.03). The model's output is the loss layers' inputs side by side, (B, N).

Two HugeCTR facts shape the objective: a loss's label weight (Model.compile's loss_weights, 1 by default) scales the
loss value it reports and not its gradient (no kernel multiplies the gradient by it), so the gradient is that of the
unweighted sum; and MultiCrossEntropyLoss ignores the label weight altogether.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

BCE, CE, MULTI = "BinaryCrossEntropyLoss", "CrossEntropyLoss", "MultiCrossEntropyLoss"
# MultiCrossEntropy_Kernel skips a target whose label is below this (a missing label: no loss, no gradient)
MISSING_LABEL = -0.5


@dataclass(frozen=True)
class LossTerm:
    """One loss layer: its ``kind``, the columns [start, end) of the model's output it reads, those of the label
    tensor, the label names (per target: the keys of auc_per_label), its label ``weight`` and
    MultiCrossEntropyLoss's ``target_weights``."""

    kind: str
    outputs: tuple[int, int]
    labels: tuple[int, int]
    names: tuple[str, ...]
    weight: float = 1.0
    target_weights: tuple[float, ...] = field(default_factory=tuple)


def binary_cross_entropy(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """BinaryCrossEntropy_Kernel: the mean over the batch of log(1 + e^-x) + x (1 - y); dx = (σ(x) - y) / B."""
    return F.binary_cross_entropy_with_logits(x, y)


def cross_entropy(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """CrossEntropy_Kernel: x (B, 2), softmax over the two columns; sample i's class is 1 where element i of the
    label tensor, read flat, is >= 0.5 (the kernel reads label[i]: for a (B, 2) label, the first B elements in
    row-major order); the mean over the batch of -log(softmax[class]); dx = (softmax - one-hot) / B."""
    target = (y.reshape(-1)[:x.shape[0]] >= 0.5).long()
    return F.cross_entropy(x, target)


def multi_cross_entropy(x: torch.Tensor, y: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """MultiCrossEntropy_Kernel: per element w_j * BCE(x, y) (w_j the target weight of column j), 0 where the label
    is below -0.5; the sum divided by all B * N elements (the skipped ones counted); dx = w_j (σ(x) - y) / (B N)."""
    kept = (y >= MISSING_LABEL).to(x.dtype)
    each = F.binary_cross_entropy_with_logits(x, y, reduction="none")
    return (each * weights * kept).sum() / x.numel()


def term_loss(term: LossTerm, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The loss of one loss layer as HugeCTR computes it (without its label weight)."""
    x = logits[:, term.outputs[0]:term.outputs[1]]
    y = labels[:, term.labels[0]:term.labels[1]]
    if term.kind == CE:
        return cross_entropy(x, y)
    if term.kind == MULTI:
        return multi_cross_entropy(x, y, torch.tensor(term.target_weights, dtype=x.dtype, device=x.device))
    return binary_cross_entropy(x, y)


def objective(terms: tuple[LossTerm, ...], logits: torch.Tensor,
              labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(what backward() differentiates: the sum of the losses, the loss HugeCTR reports: each times its label
    weight, MultiCrossEntropyLoss's unweighted)."""
    losses = [term_loss(t, logits, labels) for t in terms]
    total = torch.stack(losses).sum()
    reported = torch.stack([x if t.kind == MULTI else x * t.weight for t, x in zip(terms, losses)]).sum()
    return total, reported.detach()


def probabilities(terms: tuple[LossTerm, ...], logits: torch.Tensor,
                  labels: torch.Tensor) -> list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Per label of every loss layer: (name, probability, label 0/1, rows that count) for its AUC. A
    CrossEntropyLoss's probability is its softmax's class 1 (against the class the kernel reads); a
    MultiCrossEntropyLoss target skips the rows whose label is missing."""
    out = []
    for t in terms:
        x = logits[:, t.outputs[0]:t.outputs[1]].float()
        y = labels[:, t.labels[0]:t.labels[1]].float()
        if t.kind == CE:
            target = (y.reshape(-1)[:x.shape[0]] >= 0.5).float()
            out.append((t.names[0], torch.softmax(x, dim=1)[:, 1], target, torch.ones_like(target, dtype=torch.bool)))
            continue
        for j, name in enumerate(t.names):
            out.append((name, torch.sigmoid(x[:, j]), y[:, j], y[:, j] >= MISSING_LABEL))
    return out
