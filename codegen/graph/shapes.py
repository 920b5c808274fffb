"""Output shapes of HugeCTR dense layers and the construction checks HugeCTR runs on them.

Shapes follow ``calculate_tensor_dimensions`` and the layer constructors (shared/reference/hugectr.md §3, §4.4).
A :class:`Shape` keeps the per-sample dimensions plus a row multiplier, because a Reshape may move elements into the
batch dimension (DeepFM reshapes (B, 26, 11) to (B*26, 11)); ``rows`` is that multiplier as a fraction of the batch.
Check messages quote HugeCTR's own error texts so a user can search for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import prod


@dataclass(frozen=True)
class Shape:
    dims: tuple[int, ...]          # per row, without the batch dimension
    rows: Fraction = Fraction(1)   # rows per sample (1 unless a Reshape changed the batch dimension)
    # What model.summary() prints in place of the batch ("None", or the batch size) comes from the renderer.

    @property
    def ndim(self) -> int:      # HugeCTR's view, batch dimension included
        return len(self.dims) + 1

    @property
    def width(self) -> int:
        return self.dims[-1]

    def elements(self) -> Fraction:
        return self.rows * prod(self.dims)

    def show(self) -> tuple[int, ...]:
        return self.dims


class LayerCheckError(ValueError):
    """A HugeCTR construction check failed; the message carries HugeCTR's text and our explanation."""


def _need(cond: bool, text: str, why: str = "") -> None:
    if not cond:
        raise LayerCheckError(f'HugeCTR rejects this: "{text}"' + (f" ({why})" if why else ""))


def _same_rows(shapes: list[Shape], text: str) -> None:
    rows = {s.rows for s in shapes}
    _need(len(rows) == 1, text, "inputs have different batch heights: " + ", ".join(_fmt(s) for s in shapes))


def _fmt(s: Shape) -> str:
    batch = "B" if s.rows == 1 else f"B*{s.rows}"
    return "(" + ", ".join([batch, *map(str, s.dims)]) + ")"


def fmt_shape(s: Shape) -> str:
    return _fmt(s)


def _arity(bottoms: list[Shape], n: int | tuple[int, ...], layer: str) -> None:
    ok = len(bottoms) in (n if isinstance(n, tuple) else (n,))
    _need(ok, f"{layer} needs {n} input tensor(s)", f"got {len(bottoms)}")


def infer(layer: str, p: dict, bottoms: list[Shape], n_tops: int) -> list[Shape]:
    """Return the shapes of the layer's tops; raise LayerCheckError with HugeCTR's message when a check fails."""
    fn = _RULES.get(layer)
    if fn is None:
        raise LayerCheckError(f"ctrgen has no shape rule for layer type {layer!r}")
    return fn(p, bottoms, n_tops)


def _same(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _need(len(b) == 1, "this layer takes one input tensor", f"got {len(b)}")
    return [b[0]]


def _reshape(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _arity(b, 1, "Reshape")
    (x,) = b
    if p.get("selected"):
        slots = list(p.get("selected_slots") or [])
        _need(len(x.dims) == 2 and 0 < len(slots) <= x.dims[0] and all(0 <= s < x.dims[0] for s in slots),
              "selected is invalid", f"input {_fmt(x)}, selected_slots {slots}")
        return [Shape((len(slots) * x.dims[1],), x.rows)]
    lead = int(p.get("leading_dim", 1))
    step = int(p.get("time_step", 0))
    per_sample = x.elements()
    if step > 0:
        _need(lead * step <= per_sample, "leading_dim and time_step cannot be bigger than n_in_elems",
              f"input {_fmt(x)} has {per_sample} elements per sample, leading_dim*time_step = {lead * step}")
        _need(per_sample % (lead * step) == 0, "n_in_elems % leading_dim != 0",
              f"input {_fmt(x)} has {per_sample} elements per sample, not a multiple of {lead}*{step}")
        return [Shape((step, lead), per_sample / (lead * step))]
    _need(lead <= per_sample, "leading_dim cannot be bigger than n_in_elems",
          f"input {_fmt(x)} has {per_sample} elements per sample, leading_dim = {lead}")
    _need(per_sample % lead == 0 or (per_sample / lead).denominator == 1, "n_in_elems % leading_dim != 0",
          f"input {_fmt(x)} has {per_sample} elements per sample, which leading_dim={lead} does not divide")
    return [Shape((lead,), per_sample / lead)]


def _concat(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _need(len(b) > 0, "Empty input tensors")
    ndims = {s.ndim for s in b}
    _need(len(ndims) == 1, "Only 2D tensors can be concatenated",
          "inputs mix ranks: " + ", ".join(_fmt(s) for s in b))
    _same_rows(b, "All the input tensors must have the same height")
    axis = int(p.get("axis", 1))
    if b[0].ndim == 2:
        _need(axis == 1, "Only 2D tensors can be concatenated", f"axis {axis} on 2D inputs")
        return [Shape((sum(s.width for s in b),), b[0].rows)]
    _need(b[0].ndim == 3, "Only 2D tensors can be concatenated")
    if axis == 1:
        _need(len({s.dims[1] for s in b}) == 1, "All the input tensors must have the same height",
              "3D concat on axis 1 needs equal widths")
        return [Shape((sum(s.dims[0] for s in b), b[0].dims[1]), b[0].rows)]
    _need(axis == 2 and len({s.dims[0] for s in b}) == 1, "All the input tensors must have the same height",
          "3D concat on axis 2 needs equal slot counts")
    return [Shape((b[0].dims[0], sum(s.dims[1] for s in b)), b[0].rows)]


def _slice(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _arity(b, 1, "Slice")
    (x,) = b
    ranges = [tuple(r) for r in (p.get("ranges") or [])]
    _need(len(ranges) > 0, "Empty slice ranges is not allowed")
    _need(len(ranges) == n, "Slice needs one top per range", f"{len(ranges)} ranges, {n} tops")
    prev_start, prev_end = -1, -1
    for start, end in ranges:
        _need(start >= 0 and end >= 0, "Negative ranges cannot be allowed", f"range ({start}, {end})")
        _need(start < end, "Reverse range is not allowed", f"range ({start}, {end})")
        _need(start < x.width and end <= x.width, "Ranges cannot be bigger than the input width",
              f"range ({start}, {end}) on input {_fmt(x)}")
        # Overlapping copies of the same range are allowed (graph_analysis emits them); nested or out-of-order not.
        if (start, end) != (prev_start, prev_end):
            _need(start >= prev_start and end >= prev_end, "A range cannot be out-order nor included in another",
                  f"range ({start}, {end}) after ({prev_start}, {prev_end})")
        prev_start, prev_end = start, end
    return [Shape((*x.dims[:-1], end - start), x.rows) for start, end in ranges]


def _fc(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _need(len(b) >= 1, "InnerProductLayer needs 2D or 3D input tensor")
    x = b[0]
    _need(x.ndim in (2, 3), "InnerProductLayer needs 2D or 3D input tensor", f"input {_fmt(x)}")
    return [Shape((*x.dims[:-1], int(p.get("num_output", 1))), x.rows) for _ in range(max(n, 1))]


def _mlp(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _need(n == 1, "MLP layer can only have one output.")
    outs = list(p.get("num_outputs") or [])
    acts = p.get("activations") or []
    biases = p.get("biases") or []
    _need(not acts or len(acts) == len(outs), "The number of activations should be equal to the number of layers.")
    _need(not biases or len(biases) == len(outs), "The number of biases should be equal to the number of layers.")
    # Recorded as the num_output argument, not num_outputs[-1] (hugectr.md §3).
    return [Shape((int(p.get("num_output", 1)),), b[0].rows)]


def _multicross(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _arity(b, 1, "MultiCross")
    _need(int(p.get("num_layers", 0)) >= 1, "num_layers < 1", "MultiCross needs num_layers >= 1")
    _need(b[0].ndim == 2, "input or output tensor doesn't has two dimensions", f"input {_fmt(b[0])}")
    return [b[0]]


def _elementwise(name: str):
    def rule(p: dict, b: list[Shape], n: int) -> list[Shape]:
        _need(len(b) >= 2, f"{name}Layer needs at least 2 input tensors", f"got {len(b)}")
        _need(len({s.ndim for s in b}) == 1, "All the input tensors must have the same num of dims",
              ", ".join(_fmt(s) for s in b))
        _need(len({(s.dims, s.rows) for s in b}) == 1, "All the input tensors must have the same dims",
              ", ".join(_fmt(s) for s in b))
        return [b[0]]
    return rule


def _interaction(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _need(len(b) == 2, "InteractionLayer needs two input tensors ", f"got {len(b)}")
    mlp, emb = b
    _need(mlp.ndim == 2, "Input Bottom MLP must be a 2D tensor", f"got {_fmt(mlp)}")
    _need(emb.ndim == 3, "Input Embeddings must be a 3D tensor", f"got {_fmt(emb)}")
    _need(mlp.rows == emb.rows, "the input tensors' batch sizes must be the same")
    _need(mlp.width == emb.width, "the input tensors' widths must be the same",
          f"bottom MLP width {mlp.width} must equal the embedding vector size {emb.width}")
    s = emb.dims[0]
    return [Shape((mlp.width + s * (s + 1) // 2 + 1,), mlp.rows) for _ in range(max(n, 1))]


def _fm_order2(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _arity(b, 1, "FmOrder2")
    x = b[0]
    _need(x.ndim == 2, "only 2D tensors can be used as input for FmOrder2Layer", f"got {_fmt(x)}")
    out = int(p.get("out_dim", 0))
    _need(out > 0 and x.width % out == 0, "(in_dims[1] % out_dims[1]) != 0", f"input width {x.width}, out_dim {out}")
    return [Shape((out,), x.rows)]


def _weight_multiply(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _arity(b, 1, "WeightMultiply")
    x = b[0]
    _need(x.ndim == 2, "Only 2D tensors can be multiplied", f"got {_fmt(x)}")
    dims = list(p.get("weight_dims") or [])
    _need(len(dims) == 2, "Only 2D weights is allowed for weight_multiply layer", f"weight_dims {dims}")
    _need(dims[0] == x.width, "weight_dims[0] must be equal to in_dims[1]", f"weight_dims {dims}, input {_fmt(x)}")
    return [Shape((dims[0] * dims[1],), x.rows)]


def _reduce(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _arity(b, 1, "ReduceSum")
    x = b[0]
    axis = int(p.get("axis", 1))
    _need(axis >= 1 and axis < x.ndim, "The axis is overflow", f"axis {axis} on {_fmt(x)}")
    dims = list(x.dims)
    dims[axis - 1] = 1
    return [Shape(tuple(dims), x.rows)]


def _loss(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _need(len(b) == 2, "bottom of BinaryCrossEntropyLoss must be two dim", "bottoms must be [prediction, label]")
    pred, label = b
    _need(pred.dims == label.dims and pred.rows == label.rows,
          f"predition tensor and label tensor should have the same shape, got: {_fmt(pred)} and {_fmt(label)}")
    return [Shape((1,), Fraction(0))]  # a scalar loss; the summary prints no shape


def _multi_loss(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _need(len(b) == 2, "bottom of MultiCrossEntropyLoss must be two dim")
    return [Shape((1,), Fraction(0))]


def _gather(p: dict, b: list[Shape], n: int) -> list[Shape]:
    x = b[0]
    return [Shape((len(p.get("indices") or []), *x.dims[1:]), x.rows)]


def _matrix_multiply(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _arity(b, 2, "MatrixMultiply")
    a, c = b
    _need(a.dims[-1] == c.dims[-2] if c.ndim == 3 else a.dims[-1] == c.dims[0], "MatrixMultiply dims mismatch",
          f"{_fmt(a)} x {_fmt(c)}")
    return [Shape((*a.dims[:-1], c.dims[-1]), a.rows)]


def _dot_product(p: dict, b: list[Shape], n: int) -> list[Shape]:
    return _elementwise("DotProduct")(p, b, n)


def _fused_reshape_concat(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _need(all(s.ndim == 3 for s in b), "FusedReshapeConcat needs 3D inputs")
    width = sum(s.width for s in b)
    return [Shape((width,), b[0].rows * b[0].dims[0])]


def _mha(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _need(len(b) == 2 and b[0].ndim in (3, 4), "MultiHeadAttentionLayer needs two 4D or 3D input tensors ")
    return [b[0]]


def _sequence_mask(p: dict, b: list[Shape], n: int) -> list[Shape]:
    length = int(p.get("max_sequence_len_to", p.get("max_sequence_len", 1)))
    frm = int(p.get("max_sequence_len_from", length))
    return [Shape((1, frm, length), b[0].rows)]


def _select(p: dict, b: list[Shape], n: int) -> list[Shape]:
    x = b[0]
    return [Shape((len(p.get("index") or []), *x.dims[1:]), x.rows)]


_RULES = {
    "Reshape": _reshape, "Concat": _concat, "Slice": _slice,
    "InnerProduct": _fc, "FusedInnerProduct": _fc, "MLP": _mlp, "MultiCross": _multicross,
    "ReLU": _same, "ReLUHalf": _same, "Sigmoid": _same, "Dropout": _same, "BatchNorm": _same, "LayerNorm": _same,
    "ELU": _same, "PReLU_Dice": _same, "Cast": _same, "Softmax": _same, "Scale": _same,
    "Add": _elementwise("Add"), "ElementwiseMultiply": _elementwise("ElementwiseMultiply"),
    "Sub": _elementwise("Sub"), "DotProduct": _dot_product,
    "Interaction": _interaction, "FmOrder2": _fm_order2, "WeightMultiply": _weight_multiply,
    "ReduceSum": _reduce, "ReduceMean": _reduce, "Gather": _gather, "MatrixMultiply": _matrix_multiply,
    "BinaryCrossEntropyLoss": _loss, "CrossEntropyLoss": _loss, "MultiCrossEntropyLoss": _multi_loss,
    "FusedReshapeConcat": _fused_reshape_concat, "FusedReshapeConcatGeneral": _fused_reshape_concat,
    "MultiHeadAttention": _mha, "SequenceMask": _sequence_mask, "Select": _select,
    "GRU": lambda p, b, n: [Shape((int(p.get("num_output", 1)),), b[0].rows)],
}

LOSS_LAYERS = frozenset({"BinaryCrossEntropyLoss", "CrossEntropyLoss", "MultiCrossEntropyLoss"})
