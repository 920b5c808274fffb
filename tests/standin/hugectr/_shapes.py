"""Tensor shapes and the checks of Model.add(DenseLayer) (shared reference hugectr.md §3, §4.4).

A tensor has ``dims``, its shape as HugeCTR records it at add() time without the batch dimension, and ``built``,
the shape the built layer has on one GPU (rows first). They differ after a Reshape that changes the number of rows
(DeepFM's Reshape to leading_dim=11 turns (B, 27, 11) into (27·B, 11)). 3.x summaries print ``dims`` with "None";
4.x and later print ``built``.
"""

from __future__ import annotations

from math import prod

from ._api import HugeCTRError
from ._release import NAME, at_least

LOSSES = {"BinaryCrossEntropyLoss", "CrossEntropyLoss", "MultiCrossEntropyLoss"}
SAME_SHAPE = {"ReLU", "ReLUHalf", "Sigmoid", "Dropout", "BatchNorm", "LayerNorm", "ELU", "PReLU_Dice", "Softmax",
              "Cast", "MultiCross"}


class Tensor:
    __slots__ = ("name", "dims", "built")

    def __init__(self, name: str, dims: tuple, built: tuple):
        self.name, self.dims, self.built = name, tuple(dims), tuple(built)


def _fail(text: str) -> None:
    raise HugeCTRError(text)


def infer(layer, ins: list[Tensor]) -> list[tuple[tuple, tuple]]:
    """(dims, built) of each top of ``layer`` given its input tensors."""
    t = layer.type
    n_tops = len(layer.top_names)
    x = ins[0] if ins else None
    rows = x.built[0] if x else 0
    if t in LOSSES:
        if len(ins) != 2:
            _fail(f"bottom of {t} must be two dim")
        if t == "BinaryCrossEntropyLoss" and ins[0].built != ins[1].built:
            _fail("predition tensor and label tensor should have the same shape, got: "
                  f"{list(ins[0].built)} and {list(ins[1].built)}")
        return [((), ())]
    if t in SAME_SHAPE:
        if t == "MultiCross":
            if layer.num_layers < 1:
                _fail("num_layers < 1")
            if len(x.built) != 2:
                _fail("input or output tensor doesn't has two dimensions")
        return [(x.dims, x.built)]
    if t == "Reshape":
        if layer.selected:
            if len(x.built) != 3 or len(layer.selected_slots) > x.built[1] \
                    or any(s < 0 or s >= x.built[1] for s in layer.selected_slots):
                _fail("selected is invalid")
            w = len(layer.selected_slots) * x.built[2]
            return [((w,), (rows, w))]
        n_in = prod(x.built)
        ld, ts = layer.leading_dim, layer.time_step
        if ts > 0:
            if ld * ts > n_in:
                _fail("leading_dim and time_step cannot be bigger than n_in_elems")
            if n_in % (ld * ts):
                _fail("n_in_elems % leading_dim != 0")
            return [((ts, ld), (n_in // (ld * ts), ts, ld))]
        if ld > n_in:
            _fail("leading_dim cannot be bigger than n_in_elems")
        if n_in % ld:
            _fail("n_in_elems % leading_dim != 0")
        return [((ld,), (n_in // ld, ld))]
    if t == "Concat":
        if not ins:
            _fail("Empty input tensors")
        if any(i.built[0] != rows for i in ins):
            _fail("All the input tensors must have the same height")
        if all(len(i.built) == 2 for i in ins):
            w = sum(i.built[1] for i in ins)
            return [((w,), (rows, w))]
        if not at_least(3, 6) or not all(len(i.built) == 3 for i in ins):
            _fail("Only 2D tensors can be concatenated")
        if layer.axis == 1:
            if len({i.built[2] for i in ins}) != 1:
                _fail("All the input tensors must have the same width")
            s = sum(i.built[1] for i in ins)
            return [((s, x.built[2]), (rows, s, x.built[2]))]
        if len({i.built[1] for i in ins}) != 1:
            _fail("All the input tensors must have the same number of slots")
        w = sum(i.built[2] for i in ins)
        return [((x.built[1], w), (rows, x.built[1], w))]
    if t == "Slice":
        if not layer.ranges:
            _fail("Empty slice ranges is not allowed")
        if len(layer.ranges) != n_tops:
            _fail(f"Slice: {n_tops} top names for {len(layer.ranges)} ranges")
        width = x.built[-1]
        prev = (-1, 0)
        for a, b in layer.ranges:
            if a < 0 or b < 0:
                _fail("Negative ranges cannot be allowed")
            if not a < b:
                _fail("Reverse range is not allowed")
            if not (a >= prev[0] and b >= prev[1]):
                _fail("A range cannot be out-order nor included in another")
            if a >= width or b > width:
                _fail("Ranges cannot be bigger than the input width")
            prev = (a, b)
        return [((b - a,), (rows, b - a)) for a, b in layer.ranges]
    if t in ("InnerProduct", "FusedInnerProduct"):
        n = layer.num_output
        if len(x.built) == 2:
            return [((n,), (rows, n))]
        if len(x.built) == 3 and t == "InnerProduct":
            return [((x.built[1], n), (rows, x.built[1], n))]
        _fail("InnerProductLayer needs 2D or 3D input tensor")
    if t == "MLP":
        if n_tops != 1:
            _fail("MLP layer can only have one output.")
        if layer.activations and len(layer.activations) != len(layer.num_outputs):
            _fail("The number of activations should be equal to the number of layers.")
        if layer.biases and len(layer.biases) != len(layer.num_outputs):
            _fail("The number of biases should be equal to the number of layers.")
        return [((layer.num_output,), (rows, layer.num_outputs[-1] if layer.num_outputs else layer.num_output))]
    if t in ("Add", "ElementwiseMultiply"):
        if len(ins) < 2:
            _fail(f"{'AddLayer' if t == 'Add' else 'ElementwiseMultiplyLayer'} needs at least 2 input tensors")
        if len({len(i.built) for i in ins}) != 1:
            _fail("All the input tensors must have the same num of dims")
        if len({i.built for i in ins}) != 1:
            _fail("All the input tensors must have the same dims")
        return [(x.dims, x.built)]
    if t == "WeightMultiply":
        if len(x.built) != 2:
            _fail("Only 2D tensors can be multiplied")
        if len(layer.weight_dims) != 2:
            _fail("Only 2D weights is allowed for weight_multiply layer")
        if layer.weight_dims[0] != x.built[1]:
            _fail("weight_dims[0] must be equal to in_dims[1]")
        w = layer.weight_dims[0] * layer.weight_dims[1]
        return [((w,), (rows, w))]
    if t == "FmOrder2":
        if len(x.built) != 2:
            _fail("only 2D tensors can be used as input for FmOrder2Layer")
        if layer.out_dim <= 0 or x.built[1] % layer.out_dim:
            _fail("(in_dims[1] % out_dims[1]) != 0")
        return [((layer.out_dim,), (rows, layer.out_dim))]
    if t in ("ReduceSum", "ReduceMean"):
        if not x.built:
            _fail("The input dims can not be 0")
        if not 0 <= layer.axis < len(x.built):
            _fail("The axis is overflow")
        built = tuple(1 if i == layer.axis else d for i, d in enumerate(x.built))
        return [(built[1:], built)]
    if t == "Interaction":
        if len(ins) != 2:
            _fail("InteractionLayer needs two input tensors ")
        mlp, emb = ins
        if len(mlp.built) != 2:
            _fail("Input Bottom MLP must be a 2D tensor")
        if len(emb.built) != 3:
            _fail("Input Embeddings must be a 3D tensor")
        if mlp.built[0] != emb.built[0]:
            _fail("the input tensors' batch sizes must be the same")
        if mlp.built[1] != emb.built[2]:
            _fail("the input tensors' widths must be the same")
        s = emb.built[1]
        w = mlp.built[1] + s * (s + 1) // 2 + 1
        return [((w,), (rows, w))] * max(n_tops, 1)
    raise HugeCTRError(f"hugectr stand-in (HugeCTR {NAME}): no shape rule for Layer_t.{t}; the reference gives none "
                       "(extend tests/standin/hugectr/_shapes.py from shared reference hugectr.md §3)")
