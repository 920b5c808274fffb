"""What a generated train_torch.py tells the runtime about its model (plain data: no torch here)."""

from __future__ import annotations

from dataclasses import dataclass, field


# <float.h>'s FLT_EPSILON, which HugeCTR's Ftrl adds under its square roots from 23.04 (Ftrl's dense_hyper["eps"]:
# the renderer writes it or 0, runtime/ftrl.py reads it)
FLT_EPSILON = 2.0 ** -23


@dataclass(frozen=True)
class Optimizer:
    """The spec's optimizer as the runtime runs it.

    ``hugectr``: CreateOptimizer's type (named in messages). ``dense``, ``dense_hyper``: the same optimizer as torch.optim
    names it and its keyword arguments (DenseOptimizer). ``rows``: the RowSparseOptimizer kind whose table update is
    HugeCTR's exactly (None: the tables train with the dense step); ``rows_hyper``: its hyper-parameters (also
    PassOptimizer's). ``sparse_form``: continuous training's sparse form of the optimizer (torch's name, for
    messages). ``graph_safe``: the step can be captured as a CUDA graph."""

    hugectr: str
    dense: str
    dense_hyper: dict = field(default_factory=dict)
    rows: str | None = None
    rows_hyper: dict = field(default_factory=dict)
    sparse_form: str | None = None
    graph_safe: bool = True


@dataclass(frozen=True)
class Job:
    """One generated model: its name, docstring (the command line's help), the columns its code was written for
    (``layout``), the spec's solver and fit values (``defaults``), learning-rate ``schedule``, ``optimizer``, for
    continuous training its ``passes`` ([{"train": [...], "eval": ...}]) and, where the graph does not end in one
    BinaryCrossEntropyLoss of one label, its loss layers (``losses``: runtime.losses.LossTerm)."""

    name: str
    doc: str
    layout: dict
    defaults: dict
    schedule: dict
    optimizer: Optimizer
    passes: list | None = None
    losses: tuple | None = None


def learning_rate(schedule: dict, step: int, base: float) -> float:
    """CreateSolver's learning-rate schedule: linear warmup, then polynomial decay from decay_start (0: no decay)."""
    s = schedule
    if s["warmup_steps"] > 1 and step < s["warmup_steps"]:
        return base * (step + 1) / s["warmup_steps"]
    if s["decay_start"] > 0 and s["decay_steps"] > 0 and step >= s["decay_start"]:
        done = min(step - s["decay_start"], s["decay_steps"]) / s["decay_steps"]
        end = s["end_lr"] * base / s["lr"]
        return end + (base - end) * (1.0 - done) ** s["decay_power"]
    return base
