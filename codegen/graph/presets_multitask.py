"""The multi-task models of HugeCTR's samples/mmoe: MMoE (mmoe_parquet.py) and shared-bottom (shared_bottom.py), one
task per label (tasks A, B, ... in label order), one BinaryCrossEntropyLoss each (lossA, lossB, ...). The samples
write their Slices out on every release, so these presets do too."""

from __future__ import annotations

from string import ascii_uppercase

from typing import cast

from ..specfile.graph import MMoEPreset, SharedBottomPreset
from .ir import Embedding
from .presets import Ctx, preset_error


def _flat_input(c: Ctx, preset: str) -> tuple[Embedding, int]:
    if len(c.embeddings) != 1:
        raise preset_error(("embeddings",), f"the {preset} preset reads one embedding over all categorical slots",
                          fix="use a single embedding")
    if not 2 <= len(c.labels) <= len(ascii_uppercase):
        raise preset_error(("features", "label"), f"{preset} trains one task per label and needs 2 to 26 labels, "
                          f"got {len(c.labels)}", fix="list the task labels under features.label")
    e = c.embeddings[0]
    c.reshape_flat(e, "reshape_embedding")
    return e, e.slot_num * e.vec_size


def _fan_out(c: Ctx, x: str, tops: list[str], width: int) -> list[str]:
    c.add("Slice", x, tops, ranges=[(0, width)] * len(tops))
    return tops


def _stack(c: Ctx, x: str, units: list[int], dropout: float | None, fc: str, pre: str) -> str:
    """{fc}{i} -> {pre}relu{i} (-> {pre}dropout{i}) per width (e0_fc1, e0_relu1, e0_dropout1; shared1, relu1, ...)."""
    for i, width in enumerate(units, start=1):
        c.add("InnerProduct", x, f"{fc}{i}", num_output=width)
        x = c.add("ReLU", f"{fc}{i}", f"{pre}relu{i}")
        if dropout is not None:
            x = c.add("Dropout", x, f"{pre}dropout{i}", dropout_rate=dropout)
    return x


def _towers(c: Ctx, inputs: list[str], units: list[int], dropout: float | None, out: str) -> None:
    """One tower and one loss per task: {T}_fc1 .. -> {T}_{out} (1) -> loss{T}, towers first, then the losses."""
    outs = []
    for t, x in zip(ascii_uppercase, inputs):
        y = _stack(c, x, units, dropout, f"{t}_fc", f"{t}_")
        outs.append(c.add("InnerProduct", y, f"{t}_{out.format(len(units) + 1)}", num_output=1))
    for t, y, label in zip(ascii_uppercase, outs, c.labels):
        c.add("BinaryCrossEntropyLoss", (y, label), f"loss{t}")


def _mmoe(c: Ctx) -> None:
    """Experts over the embeddings; per task a softmax gate weighs the experts' outputs (Scale spreads each gate
    weight across the expert width) and sums them into the task's tower."""
    s = cast(MMoEPreset, c.spec)
    _, width = _flat_input(c, "mmoe")
    tasks, n, last = ascii_uppercase[:len(c.labels)], s.experts, s.expert_units[-1]
    _fan_out(c, "reshape_embedding", ["expert_emb", "gating_emb"], width)
    expert_in = _fan_out(c, "expert_emb", [f"expert{k}_in" for k in range(n)], width)
    for k, x in enumerate(expert_in):
        y = _stack(c, x, s.expert_units, s.dropout, f"e{k}_fc", f"e{k}_")
        _fan_out(c, y, [f"e{k}_out_{t}" for t in tasks], last)
    gates = _fan_out(c, "gating_emb", [f"gate{t}_in" for t in tasks], width)
    for t, g in zip(tasks, gates):
        c.add("InnerProduct", g, f"g{t}_dense", num_output=n)
        c.add("Softmax", f"g{t}_dense", f"g{t}_softmax")
        c.add("Slice", f"g{t}_softmax", [f"g{t}_e{k}" for k in range(n)], ranges=[(k, k + 1) for k in range(n)])
        for k in range(n):
            c.add("Scale", f"g{t}_e{k}", f"g{t}_e{k}_scaled", axis=0, factor=last)
            c.add("ElementwiseMultiply", [f"e{k}_out_{t}", f"g{t}_e{k}_scaled"], f"e{k}_{t}_gated")
        c.add("Add", [f"e{k}_{t}_gated" for k in range(n)], f"tower_{t}_input")
    _towers(c, [f"tower_{t}_input" for t in tasks], s.tower_units, s.dropout, "fc{}")


def _shared_bottom(c: Ctx) -> None:
    s = cast(SharedBottomPreset, c.spec)
    _flat_input(c, "shared_bottom")
    x = _stack(c, "reshape_embedding", s.units, s.dropout, "shared", "")
    tasks = ascii_uppercase[:len(c.labels)]
    # shared_bottom.py feeds A_dropout1 from A_fc1 (its A_relu1 is left unused) but B_dropout1 from B_relu1; every
    # tower here is wired like B's, fc -> relu -> dropout.
    _towers(c, _fan_out(c, x, [f"slice{t}" for t in tasks], s.units[-1]), s.tower_units, s.dropout, "out")


PRESETS = {"mmoe": _mmoe, "shared_bottom": _shared_bottom}
