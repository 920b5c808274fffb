"""Output shapes of HugeCTR dense layers and the construction checks HugeCTR runs on them.

Shapes follow ``calculate_tensor_dimensions`` and the layer constructors (docs/hugectr.md §3, §4.4).
A :class:`Shape` keeps the per-sample dimensions plus a row multiplier, because a Reshape may move elements into the
batch dimension (DeepFM reshapes (B, 26, 11) to (B*26, 11)); ``rows`` is that multiplier as a fraction of the batch.
Check messages quote HugeCTR's own error texts so a user can search for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import prod

from ..errors import Located
from .unrunnable import refusal
from ..hugectr import versions as V


@dataclass(frozen=True)
class Shape:
    dims: tuple[int, ...]          # per row, without the batch dimension
    rows: Fraction = Fraction(1)   # rows per sample (1 unless a Reshape changed the batch dimension)
    # What model.summary() prints in place of the batch ("None", or the batch size) comes from the renderer.
    # The width the built layer really outputs where HugeCTR records another (MLP: num_output is recorded, the
    # layer outputs num_outputs[-1]); checks of consuming layers see this one.
    built_width: int | None = None

    @property
    def ndim(self) -> int:      # HugeCTR's view, batch dimension included
        return len(self.dims) + 1

    @property
    def width(self) -> int:
        return self.built_width if self.built_width is not None else self.dims[-1]

    def elements(self) -> Fraction:
        return self.rows * prod(self.dims)

    def show(self) -> tuple[int, ...]:
        return self.dims


def _need(cond: bool, text: str, why: str = "") -> None:
    if not cond:
        raise Located(f'HugeCTR rejects this: "{text}"' + (f" ({why})" if why else ""))


def _own(cond: bool, why: str) -> None:
    """A check of ctrgen's own: HugeCTR would build the layer but compute something else (no HugeCTR text)."""
    if not cond:
        raise Located(f"ctrgen refuses this: {why}")


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


@dataclass(frozen=True)
class Target:
    """What a rule may depend on besides the layer: the release (its name) and the solver's precision."""
    release: str = "23.06"
    mixed_precision: bool = False


def infer(layer: str, p: dict, bottoms: list[Shape], n_tops: int, target: Target = Target()) -> list[Shape]:
    """Return the shapes of the layer's tops (one per top name); raise Located with HugeCTR's message when a
    check fails. ``p`` holds every argument in effect, HugeCTR's defaults included (graph.ir.dense_values): the
    rules read it and write no default of their own."""
    if (why := refusal(layer, target.release)) is not None:
        raise Located(why)
    if layer in _TARGET_RULES:
        outs = _TARGET_RULES[layer](p, bottoms, n_tops, target)
    else:
        fn = _RULES.get(layer)
        if fn is None:
            raise Located(f"ctrgen has no shape rule for layer type {layer!r}")
        outs = fn(p, bottoms, n_tops)
    _own(len(outs) == n_tops, f"{layer} makes {len(outs)} output tensor(s) here and the layer names {n_tops} top(s) "
                              f"(HugeCTR registers one top name per output tensor)")
    return outs


def _tops(n: int, want: int, layer: str, why: str) -> None:
    _own(n == want, f"{layer} makes {want} output tensor(s) here ({why}); the layer names {n} top(s)")


def _same(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _need(len(b) == 1, "this layer takes one input tensor", f"got {len(b)}")
    return [b[0]]


def _reshape(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _arity(b, 1, "Reshape")
    (x,) = b
    if p["selected"]:
        slots = list(p["selected_slots"])
        _need(len(x.dims) == 2 and 0 < len(slots) <= x.dims[0] and all(0 <= s < x.dims[0] for s in slots),
              "selected is invalid", f"input {_fmt(x)}, selected_slots {slots}")
        return [Shape((len(slots) * x.dims[1],), x.rows)]
    lead, step = int(p["leading_dim"]), int(p["time_step"])
    if "shape" in p and lead <= 0:   # 23.08 and later: no leading_dim (0, its default there) builds ReshapeLayerV2
        return [_reshape_v2(list(p["shape"]), x)]   # from shape (add_dense_layer_helpers.cpp, 23.08.00 - 25.03.00)
    per_sample = x.elements()
    if step > 0:
        _need(lead * step <= per_sample, "leading_dim and time_step cannot be bigger than n_in_elems",
              f"input {_fmt(x)} has {per_sample} elements per sample, leading_dim*time_step = {lead * step}")
        # ReshapeLayer (src/layers/reshape_layer.cu, 3.2 - 23.06.01) names the 3D check by its members
        _need(per_sample % (lead * step) == 0, "n_in_elems % (vector_length_ * n_slot_) != 0",
              f"input {_fmt(x)} has {per_sample} elements per sample, not a multiple of {lead}*{step}")
        return [Shape((step, lead), per_sample / (lead * step))]
    # HugeCTR checks leading_dim against the elements of the whole tensor, batch included (reshape_layer.cu): a row
    # wider than one sample folds several samples together and builds only for some batch sizes.
    _own(lead <= per_sample, f"Reshape(leading_dim={lead}) is wider than the {per_sample} elements of one sample of "
                             f"{_fmt(x)}: its rows would mix samples (HugeCTR builds it only where the batch size "
                             "makes the total divisible)")
    _need(per_sample % lead == 0 or (per_sample / lead).denominator == 1, "n_in_elems % leading_dim != 0",
          f"input {_fmt(x)} has {per_sample} elements per sample, which leading_dim={lead} does not divide")
    return [Shape((lead,), per_sample / lead)]


def _reshape_v2(shape: list[int], x: Shape) -> Shape:
    # Reshape(shape=[...]) of 23.08 and later (ReshapeLayerV2, reshape_layer_utils::calc_output_shape in
    # src/layers/reshape_layer_v2.cu of 23.08.00 up to 25.03.00): one -1 placeholder takes what the other dimensions
    # leave of all the input's elements, batch included.
    known = prod(d for d in shape if d >= 0)
    _need(known > 0, "out dimension in Reshape Layer is illegal.", f"shape {shape}")
    _need(sum(1 for d in shape if d < 0) == 1, "The placeholder in reshape layer should equal to 1.", f"shape {shape}")
    _own(shape[0] < 0, f"Reshape(shape={shape}): a fixed first dimension ties the model to one batch size; put the "
                       "-1 placeholder first (the batch dimension)")
    rows = x.elements() / known
    _need(rows.numerator > 0, "Illegal Reshape out dimension.", f"input {_fmt(x)}, shape {shape}")
    return Shape(tuple(int(d) for d in shape[1:]), rows)


def _concat(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _need(len(b) > 0, "Empty input tensors")
    ndims = {s.ndim for s in b}
    _need(len(ndims) == 1, "Only 2D tensors can be concatenated",
          "inputs mix ranks: " + ", ".join(_fmt(s) for s in b))
    _same_rows(b, "All the input tensors must have the same height")
    axis = int(p["axis"])
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
    ranges = [tuple(r) for r in p["ranges"]]
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
    return [Shape((*x.dims[:-1], int(p["num_output"])), x.rows) for _ in range(max(n, 1))]


def _mlp(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _need(n == 1, "MLP layer can only have one output.")
    outs, acts, biases = list(p["num_outputs"]), p["activations"], p["biases"]
    _need(not acts or len(acts) == len(outs), "The number of activations should be equal to the number of layers.")
    _need(not biases or len(biases) == len(outs), "The number of biases should be equal to the number of layers.")
    # Recorded as the num_output argument, not num_outputs[-1] (hugectr.md §3); the layer outputs num_outputs[-1].
    return [Shape((int(p["num_output"]),), b[0].rows, int(outs[-1]) if outs else None)]


def _multicross(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _arity(b, 1, "MultiCross")
    _need(int(p["num_layers"]) >= 1, "num_layers < 1", "MultiCross needs num_layers >= 1")
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
    out = int(p["out_dim"])
    _need(out > 0 and x.width % out == 0, "(in_dims[1] % out_dims[1]) != 0", f"input width {x.width}, out_dim {out}")
    return [Shape((out,), x.rows)]


def _weight_multiply(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _arity(b, 1, "WeightMultiply")
    x = b[0]
    _need(x.ndim == 2, "Only 2D tensors can be multiplied", f"got {_fmt(x)}")
    dims = list(p["weight_dims"])
    _need(len(dims) == 2, "Only 2D weights is allowed for weight_multiply layer", f"weight_dims {dims}")
    _need(dims[0] == x.width, "weight_dims[0] must be equal to in_dims[1]", f"weight_dims {dims}, input {_fmt(x)}")
    return [Shape((dims[0] * dims[1],), x.rows)]


def _reduce(p: dict, b: list[Shape], n: int) -> list[Shape]:
    _arity(b, 1, "ReduceSum")
    x = b[0]
    axis = int(p["axis"])
    # ReduceSumLayer / ReduceMeanLayer (src/layers/reduce_sum_layer.cu, reduce_mean_layer.cu): 0 <= axis < dims.
    _need(0 <= axis < x.ndim, "The axis is overflow", f"axis {axis} on {_fmt(x)}")
    _own(axis >= 1, "a reduction over axis 0 sums the whole batch into one row; ctrgen does not model it")
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


def _matrix_multiply(p: dict, b: list[Shape], n: int, t: Target) -> list[Shape]:
    # MatrixMultiplyLayer (src/layers/matrix_multiply_layer.cu): lhs (..., m, n) x rhs (..., n, k) -> (..., m, k),
    # batched over dimension 0 for 3D (3.2+) and over dimensions 0, 1 for 4D (4.3+). 23.06.01 builds the core23 layer,
    # which also takes 2D x 3D and says "invalid input shape" where older releases say "same num of dims". A 2D lhs
    # multiplies by a tensor whose rows are the batch (rhs (n, k) needs n == the lhs width), valid for one batch size
    # only, which ctrgen does not accept.
    _need(len(b) >= 2, "MatrixMultiplyLayer needs at least 2 input tensors", f"got {len(b)}")
    a, c = b[0], b[1]
    _need(a.ndim in (2, 3, 4), "MatrixMultiplyLayer needs two 2D, 3D or 4D input tensors ", f"first input {_fmt(a)}")
    if a.ndim != c.ndim:
        if V.holds("matmul_2d_by_3d_check", t.release):
            _own(not (a.ndim == 2 and c.ndim == 3),
                 f"a 2D x 3D MatrixMultiply needs the rhs batch to equal the lhs width ({_fmt(a)} x {_fmt(c)}); it "
                 "holds for one batch size only")
            _need(False, "MatrixMultiplyLayer invalid input shape", f"{_fmt(a)} x {_fmt(c)}")
        _need(False, "All the input tensors must have the same num of dims", f"{_fmt(a)} x {_fmt(c)}")
    _own(a.ndim > 2, f"a 2D MatrixMultiply multiplies by a tensor whose rows are the batch ({_fmt(a)} x {_fmt(c)}); "
                     "it is valid for one batch size only")
    _own(a.ndim < 4 or V.holds("matmul_4d", t.release), "4D MatrixMultiply is built from HugeCTR 4.3")
    _need(c.dims[-2] == a.dims[-1], "The last two dimension of the input tensors should be m x n, n x k",
          f"{_fmt(a)} x {_fmt(c)}")
    d = a.ndim
    _need(a.rows == c.rows, f"{d}D input tensors must have the same batch size", f"{_fmt(a)} x {_fmt(c)}")
    if d == 4:
        _need(a.dims[0] == c.dims[0], "4D input tensors must have the same second dim", f"{_fmt(a)} x {_fmt(c)}")
    return [Shape((*a.dims[:-1], c.dims[-1]), a.rows)]


def _dot_product(p: dict, b: list[Shape], n: int) -> list[Shape]:
    return _elementwise("DotProduct")(p, b, n)


def _fused_reshape_concat(p: dict, b: list[Shape], n: int) -> list[Shape]:
    # FusedReshapeConcatLayer (HugeCTR/src/layers/fused_reshape_concat_layer.cu, same at 3.2, 3.3, 4.3.1 and
    # 23.06.01; calculate_tensor_dimensions in src/pybind/add_dense_layer.cpp agrees): inputs (B, S, w_i), all 3D with
    # the same batch and slot count; two outputs, the first S-1 slots of every sample as rows (B*(S-1), Σw) and the
    # last slot (B, Σw) -- DIN's history items and its target item.
    _check_fused_reshape_inputs(b)
    x = b[0]
    _tops(n, 2, "FusedReshapeConcat", "(B*(slots-1), Σ widths) and (B, Σ widths)")
    _own(x.dims[0] >= 2, f"FusedReshapeConcat needs at least 2 slots (history + target), got {_fmt(x)}")
    width = sum(s.width for s in b)
    return [Shape((width,), x.rows * (x.dims[0] - 1)), Shape((width,), x.rows)]


def _fused_reshape_concat_general(p: dict, b: list[Shape], n: int) -> list[Shape]:
    # FusedReshapeConcatGeneralLayer (same files as above): one output (B*S, Σw).
    _check_fused_reshape_inputs(b)
    _tops(n, 1, "FusedReshapeConcatGeneral", "(B*slots, Σ widths)")
    return [Shape((sum(s.width for s in b),), b[0].rows * b[0].dims[0])]


def _check_fused_reshape_inputs(b: list[Shape]) -> None:
    _need(len(b) > 0, "Empty input tensors")
    for i, s in enumerate(b):   # the layer's order of checks: batch, slots (against the first), then 3D
        if i:
            _need(s.rows == b[0].rows, "All the input tensors must have the same batch_size",
                  ", ".join(_fmt(t) for t in b))
            _need(s.ndim < 2 or b[0].ndim < 2 or s.dims[0] == b[0].dims[0],
                  "All the input tensors must have the same slot_num", ", ".join(_fmt(t) for t in b))
        _need(s.ndim == 3, "All the input tensors must be 3D", f"input {i} is {_fmt(s)}")


def _scale(p: dict, b: list[Shape], n: int) -> list[Shape]:
    # ScaleLayer (HugeCTR/src/layers/scale_layer.cu at 3.2 - 23.06.01): a 2D input (rows, w) is repeated `factor`
    # times, axis 0 along the width -> (rows, w*factor), axis 1 along the rows -> (rows*factor, w).
    # calculate_tensor_dimensions (src/pybind/add_dense_layer.cpp, 3.3 - 23.06.01) records the same. HugeCTR has no
    # runtime check here (only a debug assert axis < 2), so ctrgen checks what the kernel assumes.
    _arity(b, 1, "Scale")
    x = b[0]
    axis, factor = int(p["axis"]), p["factor"]
    _own(x.ndim == 2, f"Scale needs a 2D input (ScaleLayer reads dimensions 0 and 1 only), got {_fmt(x)}")
    _own(axis in (0, 1), f"Scale axis must be 0 (repeat along the width) or 1 (along the rows), got {axis}")
    _own(float(factor) == int(factor) and int(factor) >= 1,
         f"Scale factor must be a whole number >= 1 (ScaleLayer takes it as int), got {factor}")
    k = int(factor)
    if axis == 0:
        return [Shape((x.width * k,), x.rows)]
    return [Shape(x.dims, x.rows * k)]


def _softmax(p: dict, b: list[Shape], n: int, t: Target) -> list[Shape]:
    # Softmax (src/pybind/add_dense_layer.cpp): one input -> same shape. Two inputs (scores, mask) build a
    # MaskedSoftmaxLayer from 3.9 (src/layers/masked_softmax_layer.cu, 4.3.1 / 23.06.01): same number of dims and the
    # same last dimension; FP32 only (23.06.01 throws in mixed precision, 4.3.1 drops the mask). Before 3.9 the
    # second input is ignored, which ctrgen refuses rather than drop a mask silently.
    _need(len(b) >= 1, "Softmax needs an input tensor")
    x = b[0]
    if len(b) == 1:
        return [x]
    _need(len(b) == 2, "Softmax takes one input, or two (scores and mask)", f"got {len(b)}")
    _own(V.holds("softmax_mask", t.release), "before HugeCTR 3.9 Softmax ignores a second input (masked softmax came in 3.9)")
    if t.mixed_precision:
        _need(not V.holds("masked_softmax_mixed_refused", t.release), "MaskedSoftMaxLayer is not available for the mixed precision mode")
        _own(False, "in mixed precision HugeCTR before 23.06 builds a plain Softmax and drops the mask input")
    mask = b[1]
    _need(mask.ndim == x.ndim, "All the input tensors must have the same num of dims", f"{_fmt(x)}, mask {_fmt(mask)}")
    _need(mask.width == x.width, "The last dimension of the input tensors should be the same",
          f"{_fmt(x)}, mask {_fmt(mask)}")
    return [x]


def _sub(p: dict, b: list[Shape], n: int) -> list[Shape]:
    # SubLayer (src/layers/sub_layer.cu, 3.2 - 23.06.01): exactly two inputs of equal dims.
    _need(len(b) == 2, "SubLayer needs 2 input tensors", f"got {len(b)}")
    return _elementwise("Sub")(p, b, n)


def _mha(p: dict, b: list[Shape], n: int, t: Target) -> list[Shape]:
    # MultiHeadAttention, 4.3 - 23.06 (calculate_tensor_dimensions in src/pybind/add_dense_layer.cpp, the checks of
    # Model::add_dense_layer_internal / add_dense_layer_impl, src/layers/multi_head_attention_layer.cu of 4.3.1 and
    # 23.06.01). Two forms:
    #   * 3D query, key, value (B, S, H) with num_attention_heads h: outputs the scores (B, h, S, S) and the value
    #     split into heads (B, h, S, H/h) -- two tops (the 3-input form came with num_attention_heads in 4.1).
    #   * 4D (B, h, m, n) and a second 4D tensor: transpose_b=True -> Q·K^T (B, h, m, k) with k = key[-2];
    #     transpose_b=False -> scores·V merged back (B, m, h * V[-1]) -- one top.
    if V.holds("mha_23_09", t.release):
        return _mha_23_09(p, b, n)
    _need(len(b) >= 2, "MultiHeadAttentionLayer needs at lease two input tensors ", f"got {len(b)}")
    q, k = b[0], b[1]
    _need(q.ndim in (3, 4), "MultiHeadAttentionLayer needs two 4D or 3D input tensors ", f"first input {_fmt(q)}")
    _own(V.holds("mha_as_4_3", t.release), "ctrgen models MultiHeadAttention as HugeCTR 4.3 and later build it")
    _need(q.ndim == 4 or k.ndim == 3, "MultiHeadAttentionLayer needs 3D or 4D input tensors ",
          f"{_fmt(q)}, {_fmt(k)}")
    if q.ndim == 4:
        _need(k.ndim == 4, "All the input tensors must have the same num of dims", f"{_fmt(q)}, {_fmt(k)}")
        _need(q.rows == k.rows, "input tensors must have the same batch_size", f"{_fmt(q)}, {_fmt(k)}")
        _need(k.dims[-1] == q.dims[-1] or q.dims[-1] == k.dims[-2],
              "The last two dimension of 4D the input tensors should be m x n, k x n or m x n, n x k",
              f"{_fmt(q)}, {_fmt(k)}")
        _tops(n, 1, "MultiHeadAttention", "4D inputs")
        heads, m = q.dims[0], q.dims[1]
        if p["transpose_b"]:
            return [Shape((heads, m, k.dims[-2]), q.rows)]
        return [Shape((m, heads * k.dims[-1]), q.rows)]
    _need(len(b) >= 3, "MultiHeadAttentionLayer needs 3 input tensors: query, key and value", f"got {len(b)}")
    v = b[2]
    _need(k.ndim == 3 and v.ndim == 3, "All the input tensors must have the same num of dims",
          ", ".join(_fmt(s) for s in b))
    _need(q.width == k.width == v.width, "3D input tensors must have the same hidden_dim",
          ", ".join(_fmt(s) for s in b))
    _need(q.dims[0] == k.dims[0] == v.dims[0], "3D input tensors must have the same seq_len",
          ", ".join(_fmt(s) for s in b))
    heads = int(p["num_attention_heads"])
    _own(heads >= 1 and q.width % heads == 0,
         f"num_attention_heads={heads} must divide the hidden_dim {q.width} (HugeCTR divides without checking)")
    _tops(n, 2, "MultiHeadAttention", "3D query/key/value: attention scores and the 4D value")
    seq = q.dims[0]
    return [Shape((heads, seq, k.dims[0]), q.rows), Shape((heads, seq, q.width // heads), q.rows)]


def _mha_23_09(p: dict, b: list[Shape], n: int) -> list[Shape]:
    # 23.09 and later (add_dense_layer_helpers.cpp and src/layers/multi_head_attention_layer.cu of 23.09.00 up to
    # 25.03.00): the whole attention in one layer. Query (B, m, H), key and value (B, k, H), optionally a 4D mask
    # (B, 1, m, k) for the masked softmax; one top (B, m, H / h * h), the heads merged back.
    _need(len(b) >= 3, "MultiHeadAttentionLayer needs at lease 3 input tensors ", f"got {len(b)}")
    q, k, v = b[0], b[1], b[2]
    _need(q.ndim == 3 and k.ndim == 3 and v.ndim == 3, "MultiHeadAttentionLayer needs 3D Q,K,V input tensors",
          ", ".join(_fmt(s) for s in b[:3]))
    _need(len(b) < 4 or b[3].ndim == 4, "mask should be 4D tensor", _fmt(b[3]) if len(b) > 3 else "")
    _need(len(b) <= 4, "Query, Key, Value should be 3D tensor", f"{len(b)} inputs")
    _need(q.rows == k.rows == v.rows, "The first dim of Query, Key, Value should be batchsize ",
          ", ".join(_fmt(s) for s in b[:3]))
    _need(q.width == k.width == v.width, " Query, Key, Value should have the same hidden dimension",
          ", ".join(_fmt(s) for s in b[:3]))
    _need(k.dims == v.dims, "Key, Value should have the same shape", f"{_fmt(k)}, {_fmt(v)}")
    heads = int(p["num_attention_heads"])
    _own(heads >= 1 and q.width % heads == 0,
         f"num_attention_heads={heads} must divide the hidden_dim {q.width} (HugeCTR divides without checking)")
    _tops(n, 1, "MultiHeadAttention", "HugeCTR 23.09 and later: the attended query, heads merged")
    return [Shape((q.dims[0], q.width // heads * heads), q.rows)]


def _sequence_mask(p: dict, b: list[Shape], n: int, t: Target) -> list[Shape]:
    # SequenceMask: up to 23.06 one input of sequence lengths (B, 1) -> (B, 1, 1, max_sequence_len)
    # (src/pybind/add_dense_layer.cpp and add_dense_layer_helpers.cpp, 4.3.1 / 23.06.01; the layer asserts a 2D
    # input). 23.08 takes max_sequence_len_from / _to and outputs (B, 1, from, to).
    _own(len(b) >= 1, "SequenceMask needs an input tensor (the sequence lengths)")
    _own(b[0].ndim == 2, f"SequenceMask reads a 2D tensor of lengths (the layer asserts it), got {_fmt(b[0])}")
    _tops(n, 1, "SequenceMask", "the mask")
    if V.holds("sequence_mask_from_to", t.release):
        return [Shape((1, int(p["max_sequence_len_from"]), int(p["max_sequence_len_to"])), b[0].rows)]
    return [Shape((1, 1, int(p["max_sequence_len"])), b[0].rows)]


def _select(p: dict, b: list[Shape], n: int) -> list[Shape]:
    # SelectLayer (src/layers/select_layer.cu, 23.08.00 - 25.03.00): entries `index` of dimension `dim` (0: the batch)
    x, dim, index = b[0], int(p["dim"]), [int(i) for i in p["index"]]
    _need(bool(index), "Select Layer does not support empty index")
    _need(0 < dim < x.ndim, "Dim is beyond range in Select Layer" if dim else "Dim 0 is not allowed to do select "
          "because it's batch dim.", f"dim {dim} on {_fmt(x)}")
    _need(0 <= min(index) and max(index) < x.dims[dim - 1], "Value in index is beyond range of specified dim in Select Layer.")
    return [Shape(x.dims[:dim - 1] + (len(index),) + x.dims[dim:], x.rows)]


_RULES = {
    "Reshape": _reshape, "Concat": _concat, "Slice": _slice,
    "InnerProduct": _fc, "FusedInnerProduct": _fc, "MLP": _mlp, "MultiCross": _multicross,
    "ReLU": _same, "ReLUHalf": _same, "Sigmoid": _same, "Dropout": _same, "BatchNorm": _same, "LayerNorm": _same,
    "ELU": _same, "PReLU_Dice": _same, "Cast": _same, "Scale": _scale,
    "Add": _elementwise("Add"), "ElementwiseMultiply": _elementwise("ElementwiseMultiply"),
    "Sub": _sub, "DotProduct": _dot_product,
    "Interaction": _interaction, "FmOrder2": _fm_order2, "WeightMultiply": _weight_multiply,
    "ReduceSum": _reduce, "ReduceMean": _reduce,
    "BinaryCrossEntropyLoss": _loss, "CrossEntropyLoss": _loss, "MultiCrossEntropyLoss": _multi_loss,
    "FusedReshapeConcat": _fused_reshape_concat, "FusedReshapeConcatGeneral": _fused_reshape_concat_general,
    "Select": _select,
}

_TARGET_RULES = {"MultiHeadAttention": _mha, "SequenceMask": _sequence_mask, "Softmax": _softmax,
                 "MatrixMultiply": _matrix_multiply}

LOSS_LAYERS = frozenset({"BinaryCrossEntropyLoss", "CrossEntropyLoss", "MultiCrossEntropyLoss"})
