"""Tensor shapes and the checks of Model.add(DenseLayer) (docs/hugectr.md §3, §4.4).

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
SAME_SHAPE = {"ReLU", "ReLUHalf", "Sigmoid", "Dropout", "BatchNorm", "LayerNorm", "ELU", "PReLU_Dice", "Cast",
              "MultiCross"}


class Tensor:
    __slots__ = ("name", "dims", "built")

    def __init__(self, name: str, dims: tuple, built: tuple):
        self.name, self.dims, self.built = name, tuple(dims), tuple(built)


def _fail(text: str) -> None:
    raise HugeCTRError(text)


def infer(layer, ins: list[Tensor], mixed_precision: bool = False) -> list[tuple[tuple, tuple]]:
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
            if n_in % (ld * ts):  # the 3D check's own text (upstream src/layers/reshape_layer.cu, 3.2-23.06)
                _fail("n_in_elems % (vector_length_ * n_slot_) != 0")
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
        # the last dimension is sliced, the others kept (SliceLayer, src/layers/slice_layer.cu of 4.3.1 / 23.06.01)
        return [(x.dims[:-1] + (b - a,), x.built[:-1] + (b - a,)) for a, b in layer.ranges]
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
    if t in ("Add", "ElementwiseMultiply", "DotProduct"):
        # DotProduct (3.2-3.4, upstream src/layers/dot_product_layer.cu): the elementwise product, same checks
        if len(ins) < 2:
            _fail(f"{t if t == 'DotProduct' else 'ElementwiseMultiply' if t != 'Add' else 'Add'}Layer needs at least "
                  "2 input tensors")
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
    if t == "Sub":
        if len(ins) != 2:
            _fail("SubLayer needs 2 input tensors")
        if len(ins[1].built) != len(x.built):
            _fail("All the input tensors must have the same num of dims")
        if ins[1].built != x.built:
            _fail("All the input tensors must have the same dims")
        return [(x.dims, x.built)]
    if t == "Scale":
        return [_scale(layer, x)]
    if t in ("FusedReshapeConcat", "FusedReshapeConcatGeneral"):
        return _fused_reshape_concat(t, ins, n_tops)
    if t == "Softmax":
        return [_softmax(layer, ins, mixed_precision)]
    if t == "SequenceMask":
        if n_tops != 1:
            _fail(f"hugectr stand-in: SequenceMask has one output, {n_tops} top names given")
        if len(x.built) != 2:
            _fail("hugectr stand-in: SequenceMask reads a 2D tensor of sequence lengths (the layer asserts it)")
        length = layer.max_sequence_len  # (B, 1, 1, max_sequence_len) up to 23.06
        return [((1, 1, length), (rows, 1, 1, length))]
    if t == "MultiHeadAttention":
        return _attention(layer, ins, n_tops)
    if t == "MatrixMultiply":
        return [_matmul(ins)]
    raise HugeCTRError(f"hugectr stand-in (HugeCTR {NAME}): no shape rule for Layer_t.{t}; the reference gives none "
                       "(extend tests/standin/hugectr/_shapes.py from docs/hugectr.md §3)")


def _scale(layer, x: Tensor) -> tuple[tuple, tuple]:
    """ScaleLayer (upstream src/layers/scale_layer.cu, 3.2-23.06): the 2D input is copied ``factor`` (an int) times,
    axis 0 side by side (w*factor columns), any other axis below each other (rows*factor rows). The add()-time shape
    (calculate_tensor_dimensions) grows the same dimension."""
    if len(x.built) != 2:
        _fail("hugectr stand-in: ScaleLayer reads a 2D tensor (dimensions 0 and 1)")
    r, w = x.built
    k = int(layer.factor)
    built = (r, w * k) if layer.axis == 0 else (r * k, w)
    return (built[1:], built)


def _fused_reshape_concat(t: str, ins: list[Tensor], n_tops: int) -> list[tuple[tuple, tuple]]:
    """FusedReshapeConcat(General)Layer (upstream src/layers/fused_reshape_concat*_layer.cu, 3.2-23.06): 3D inputs
    (B, S, w_i) with one batch and slot count. FusedReshapeConcat: the first S-1 slots of each sample as rows and the
    last slot, (B*(S-1), Σw) and (B, Σw); General: (B*S, Σw)."""
    if not ins:
        _fail("Empty input tensors")
    first = ins[0].built
    for i, tensor in enumerate(ins):
        d = tensor.built
        if i:
            if d[0] != first[0]:
                _fail("All the input tensors must have the same batch_size")
            if len(d) > 1 and len(first) > 1 and d[1] != first[1]:
                _fail("All the input tensors must have the same slot_num")
        if len(d) != 3:
            _fail("All the input tensors must be 3D")
    batch, slots = first[0], first[1]
    w = sum(tensor.built[2] for tensor in ins)
    if t == "FusedReshapeConcatGeneral":
        return [((w,), (batch * slots, w))]
    if n_tops != 2:
        _fail(f"hugectr stand-in: FusedReshapeConcat has two outputs, {n_tops} top names given")
    return [((w,), (batch * (slots - 1), w)), ((w,), (batch, w))]


def _softmax(layer, ins: list[Tensor], mixed_precision: bool) -> tuple[tuple, tuple]:
    """Softmax; with a second input (a mask) a MaskedSoftmaxLayer from 3.9 (upstream src/layers/masked_softmax_layer.cu
    and the pybind Softmax case): FP32 only (23.06 refuses mixed precision, 4.x builds a plain Softmax from the
    first input). Before 3.9 the second input is not read."""
    x = ins[0]
    if len(ins) == 2 and at_least(3, 9) and not mixed_precision:
        mask = ins[1]
        if len(mask.built) != len(x.built):
            _fail("All the input tensors must have the same num of dims")
        if mask.built[-1] != x.built[-1]:
            _fail("The last dimension of the input tensors should be the same")
    elif len(ins) == 2 and mixed_precision and at_least(23, 6):
        _fail("MaskedSoftMaxLayer is not available for the mixed precision mode")
    return (x.dims, x.built)


def _attention(layer, ins: list[Tensor], n_tops: int) -> list[tuple[tuple, tuple]]:
    """MultiHeadAttention as 4.3 and 23.06 build it (upstream src/layers/multi_head_attention_layer.cu and the pybind
    case). 3D query, key, value (B, S, H): the scores (B, h, S, S) and the value in heads (B, h, S, H/h), h =
    num_attention_heads. 4D (B, h, m, n) with a second 4D tensor: transpose_b -> (B, h, m, second[2]); otherwise
    (B, m, h * second[3])."""
    if not at_least(4, 3):
        _fail(f"hugectr stand-in (HugeCTR {NAME}): MultiHeadAttention is modelled from 4.3 (the release with "
              "transpose_b)")
    if len(ins) > 0 and len(ins[0].built) not in (3, 4):
        _fail("MultiHeadAttentionLayer needs two 4D or 3D input tensors ")
    if len(ins) < 2:
        _fail("MultiHeadAttentionLayer needs at lease two input tensors ")
    a, b = ins[0].built, ins[1].built
    if len(a) != 4 and len(b) != 3:
        _fail("MultiHeadAttentionLayer needs 3D or 4D input tensors ")
    if len(a) == 4:
        if len(b) != 4:
            _fail("All the input tensors must have the same num of dims")
        if a[0] != b[0]:
            _fail("input tensors must have the same batch_size")
        if b[3] != a[3] and a[3] != b[2]:
            _fail("The last two dimension of 4D the input tensors should be m x n, k x n or m x n, n x k")
        if n_tops != 1:
            _fail(f"hugectr stand-in: MultiHeadAttention of 4D tensors has one output, {n_tops} top names given")
        built = (a[0], a[1], a[2], b[2]) if layer.transpose_b else (a[0], a[2], a[1] * b[3])
        return [(built[1:], built)]
    if len(ins) < 3:
        _fail("MultiHeadAttentionLayer needs 3 input tensors: query, key and value")
    c = ins[2].built
    if len(b) != 3 or len(c) != 3:
        _fail("All the input tensors must have the same num of dims")
    if not a[2] == b[2] == c[2]:
        _fail("3D input tensors must have the same hidden_dim")
    if not a[1] == b[1] == c[1]:
        _fail("3D input tensors must have the same seq_len")
    if n_tops != 2:
        _fail(f"hugectr stand-in: MultiHeadAttention of 3D tensors has two outputs, {n_tops} top names given")
    h = layer.num_attention_heads
    score = (a[0], h, a[1], b[1])
    value = (a[0], h, a[1], a[2] // h)
    return [(score[1:], score), (value[1:], value)]


def _matmul(ins: list[Tensor]) -> tuple[tuple, tuple]:
    """MatrixMultiplyLayer (upstream src/layers/matrix_multiply_layer.cu): (..., m, n) x (..., n, k) -> (..., m, k);
    2D is a plain product of the built tensors, 3D batched over dimension 0, 4D (4.3+) over dimensions 0 and 1.
    23.06 builds the core23 layer: 2D x 3D as well, and other rank mismatches are an "invalid input shape"."""
    if len(ins) < 2:
        _fail("MatrixMultiplyLayer needs at least 2 input tensors")
    a, b = ins[0].built, ins[1].built
    if len(a) not in (2, 3, 4):
        _fail("MatrixMultiplyLayer needs two 2D, 3D or 4D input tensors ")
    if at_least(23, 6):
        if len(a) == 2 and len(b) == 3:
            if b[0] != a[1]:
                _fail("MatrixMultiplyLayer 2Dx3D invalid shape")
            built = (a[0], b[1], b[2])
            return (built[1:], built)
        if len(a) != len(b):
            _fail("MatrixMultiplyLayer invalid input shape")
    elif len(a) != len(b):
        _fail("All the input tensors must have the same num of dims")
    if len(a) == 4 and not at_least(4, 3):
        _fail(f"hugectr stand-in (HugeCTR {NAME}): 4D MatrixMultiply is built from 4.3")
    if b[-2] != a[-1]:
        _fail("The last two dimension of the input tensors should be m x n, n x k")
    if len(a) >= 3 and a[0] != b[0]:
        _fail(f"{len(a)}D input tensors must have the same batch size")
    if len(a) == 4 and a[1] != b[1]:
        _fail("4D input tensors must have the same second dim")
    built = a[:-1] + (b[-1],)
    return (built[1:], built)
