"""NumPy references (float64) of the layers of HugeCTR's attention models (DIN, BST): forward and backward, written
from the CPU references of HugeCTR's layer unit tests (test/utest/layers/*_test.cpp of NVIDIA-Merlin/HugeCTR) and,
where the test is thin, from the layer's kernels (HugeCTR/src/layers/*.cu). Each docstring names its file and
release. Written for ctrgen (loops over HugeCTR's flat indices where the upstream reference indexes so), no upstream
code copied; tests/test_layer_parity_seq.py holds the translated torch layers to them.

Arrays are in HugeCTR's layout: dimension 0 is HugeCTR's batch dimension.
"""

from __future__ import annotations

import numpy as np

MASKED_SCORE = 10000.0   # masked_softmax_layer.cu: (1 - mask) * 10000 is subtracted from a score


def dice_forward(x: np.ndarray, alpha: float, eps: float) -> np.ndarray:
    """PReLU_Dice forward: prelu_dice_layer_test.cpp (dice_fprop / get_mean / get_variance) of v23.06.01; per column
    of x seen as (dim 0, rest): mean E and biased variance V over dim 0, p = 1 / (1 + exp((E - x) / sqrt(V + eps))),
    y = p x + (1 - p) alpha x."""
    s = x.reshape(x.shape[0], -1)
    mean = s.mean(axis=0)
    var = ((s - mean) ** 2).mean(axis=0)
    p = 1.0 / (1.0 + np.exp((mean - s) / np.sqrt(var + eps)))
    return (p * s + (1 - p) * alpha * s).reshape(x.shape)


def dice_backward(x: np.ndarray, dy: np.ndarray, alpha: float, eps: float) -> np.ndarray:
    """PReLU_Dice backward: dice_bprop of prelu_dice_layer_test.cpp (v23.06.01) and Dice_bprop_kernel of
    prelu_dice_layer.cu (same at 3.3, 4.3.1, 23.06.01, 25.03.00), whose 1/sqrt(V + eps) is 0 where V + eps < 1e-8:
    ys = (E - s)/sqrt(V+eps); ys_s = (1/N - 1)/sqrt(V+eps) - (1/N)(E - s)(s - E)/sqrt((V+eps)^3);
    ps = 1/(1+e^ys); ps_s = -e^ys ys_s/(1+e^ys)^2; dx = ((ps_s s + ps)(1 - alpha) + alpha) dy."""
    s = x.reshape(x.shape[0], -1)
    g = dy.reshape(s.shape)
    n = s.shape[0]
    mean = s.mean(axis=0)
    var = ((s - mean) ** 2).mean(axis=0)
    tiny = var + eps < 1e-8
    inv = np.where(tiny, 0.0, 1.0 / np.sqrt(var + eps))
    inv3 = np.where(tiny, 0.0, 1.0 / np.sqrt((var + eps) ** 3))
    ys_s = (1.0 / n - 1) * inv - (1.0 / n) * (mean - s) * inv3 * (s - mean)
    ys = (mean - s) * inv
    ps_s = -np.exp(ys) * ys_s / (1.0 + np.exp(ys)) ** 2
    ps = 1.0 / (1.0 + np.exp(ys))
    return (((ps_s * s + ps) * (1.0 - alpha) + alpha) * g).reshape(x.shape)


def scale_forward(x: np.ndarray, axis: int, factor: int) -> np.ndarray:
    """Scale forward: upscale_cpu of scale_layer_test.cpp (v23.06.01), x (H, W): axis 0 writes each element factor
    times in a row (H, W * factor); axis 1 each row factor times (H * factor, W)."""
    h, w = x.shape
    flat = x.reshape(-1)
    out = np.empty(h * w * factor)
    if axis == 0:
        for i in range(h * w):
            for j in range(factor):
                out[i * factor + j] = flat[i]
        return out.reshape(h, w * factor)
    for i in range(h):
        for j in range(factor):
            out[i * factor * w + j * w:i * factor * w + (j + 1) * w] = flat[i * w:(i + 1) * w]
    return out.reshape(h * factor, w)


def scale_backward(dy: np.ndarray, axis: int, factor: int) -> np.ndarray:
    """Scale backward: downscale_cpu of scale_layer_test.cpp (v23.06.01): the gradient of the first copy of each
    element (axis 0: out[i] = in[i * factor]) or row (axis 1: out row i = in row i * factor); the other copies'
    gradients are dropped."""
    if axis == 0:
        h, wf = dy.shape
        flat = dy.reshape(-1)
        return np.array([flat[i * factor] for i in range(h * wf // factor)]).reshape(h, wf // factor)
    hf, w = dy.shape
    return np.stack([dy[i * factor] for i in range(hf // factor)])


def dot_product_forward(xs: list[np.ndarray]) -> np.ndarray:
    """DotProduct forward: dot_product_cpu of dot_product_layer_test.cpp (v3.3): the elementwise product."""
    out = np.ones_like(xs[0])
    for x in xs:
        out = out * x
    return out


def dot_product_backward(xs: list[np.ndarray], dy: np.ndarray) -> list[np.ndarray]:
    """DotProduct backward: dot_product_dgrad_cpu of dot_product_layer_test.cpp (v3.3): dx_j = dy * y / x_j, 0
    where the forward output y is 0."""
    y = dot_product_forward(xs)
    zero = y == 0
    return [np.where(zero, 0.0, dy * y / np.where(zero, 1.0, x)) for x in xs]


def fused_reshape_concat_forward(xs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """FusedReshapeConcat forward: fused_reshape_concat_cpu of fused_reshape_concat_layer_test.cpp (v23.06.01):
    inputs (B, S, w_j); slot i < S-1 of sample l -> row l*(S-1)+i of the first output (B*(S-1), Σw), slot S-1 ->
    row l of the second (B, Σw); within a row the inputs' vectors in input order."""
    batch, slots = xs[0].shape[:2]
    width = sum(x.shape[2] for x in xs)
    item, ad = np.empty((batch * (slots - 1), width)), np.empty((batch, width))
    for l in range(batch):
        for i in range(slots):
            row = np.concatenate([x[l, i] for x in xs])
            if i == slots - 1:
                ad[l] = row
            else:
                item[l * (slots - 1) + i] = row
    return item, ad


def fused_reshape_concat_backward(d_item: np.ndarray, d_ad: np.ndarray, widths: list[int]) -> list[np.ndarray]:
    """FusedReshapeConcat backward: the same function's backward branch (each input element takes its output
    element's gradient)."""
    batch = d_ad.shape[0]
    slots = d_item.shape[0] // batch + 1
    grads = [np.empty((batch, slots, w)) for w in widths]
    for l in range(batch):
        for i in range(slots):
            row = d_ad[l] if i == slots - 1 else d_item[l * (slots - 1) + i]
            start = 0
            for g, w in zip(grads, widths):
                g[l, i] = row[start:start + w]
                start += w
    return grads


def fused_reshape_concat_general_forward(xs: list[np.ndarray]) -> np.ndarray:
    """FusedReshapeConcatGeneral forward: fused_reshape_concat_general_cpu of
    fused_reshape_concat_general_layer_test.cpp (v23.06.01): row i of (B*S, Σw) is slot i % S of sample i / S."""
    batch, slots = xs[0].shape[:2]
    return np.stack([np.concatenate([x[i // slots, i % slots] for x in xs]) for i in range(batch * slots)])


def fused_reshape_concat_general_backward(dy: np.ndarray, slots: int, widths: list[int]) -> list[np.ndarray]:
    """FusedReshapeConcatGeneral backward: the same function's backward branch."""
    grads = [np.empty((dy.shape[0] // slots, slots, w)) for w in widths]
    for i in range(dy.shape[0]):
        start = 0
        for g, w in zip(grads, widths):
            g[i // slots, i % slots] = dy[i, start:start + w]
            start += w
    return grads


def matmul_forward(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """MatrixMultiply forward: matmul_cpu of matrix_multiply_test.cpp (v23.06.01), batched over the leading
    dimensions (3D: (B, m, n) x (B, n, k); 4D: (B, h, m, n) x (B, h, n, k))."""
    lead = a.shape[:-2]
    m, n, k = a.shape[-2], a.shape[-1], b.shape[-1]
    fa, fb = a.reshape(-1, m, n), b.reshape(-1, n, k)
    out = np.zeros((fa.shape[0], m, k))
    for z in range(fa.shape[0]):
        for i in range(m):
            for j in range(k):
                out[z, i, j] = sum(fa[z, i, t] * fb[z, t, j] for t in range(n))
    return out.reshape(*lead, m, k)


def _t(x: np.ndarray) -> np.ndarray:
    return np.swapaxes(x, -1, -2)


def matmul_backward(a: np.ndarray, b: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MatrixMultiply backward: matmul_dgrad_cpu of matrix_multiply_test.cpp (v23.06.01): da = dy b^T,
    db = a^T dy."""
    return matmul_forward(dy, _t(b)), matmul_forward(_t(a), dy)


def sequence_mask(lengths: np.ndarray, max_len: int) -> np.ndarray:
    """SequenceMask (one input, up to 23.06): sequence_mask_cpu of sequence_mask_layer_test.cpp (v23.06.01) with
    the kernel's int length (build_sequence_mask_kernel of sequence_mask_layer.cu): sample i's length is element i
    of the input; out[i, 0, 0, j] = 1 if j < length else 0."""
    batch = lengths.shape[0]
    flat = lengths.reshape(-1)
    out = np.zeros((batch, 1, 1, max_len))
    for i in range(batch):
        for j in range(max_len):
            out[i, 0, 0, j] = 1.0 if j < int(flat[i]) else 0.0
    return out


def sequence_mask_from_to(lengths_from: np.ndarray, lengths_to: np.ndarray, max_from: int,
                          max_to: int) -> np.ndarray:
    """SequenceMask (two inputs, 23.08+): sequence_mask_cpu of core23_layer_test/sequence_mask_layer_test.cpp
    (v23.09.00): out[i, 0, j, k] = 1 if j < from[i] and k < to[i] (int lengths, as the kernel reads them)."""
    batch = lengths_from.shape[0]
    lf, lt = lengths_from.reshape(-1), lengths_to.reshape(-1)
    out = np.zeros((batch, 1, max_from, max_to))
    for i in range(batch):
        for j in range(max_from):
            for k in range(max_to):
                out[i, 0, j, k] = 1.0 if j < int(lf[i]) and k < int(lt[i]) else 0.0
    return out


def split_heads(x: np.ndarray, heads: int) -> np.ndarray:
    """transpose_qkv_cpu of multi_head_attention_layer_test.cpp (v23.06.01): [b, s, d] of (B, S, H) goes to
    [b, d / size_per_head, s, d % size_per_head]."""
    batch, seq, hidden = x.shape
    per = hidden // heads
    out = np.empty((batch, heads, seq, per))
    for b in range(batch):
        for s in range(seq):
            for d in range(hidden):
                out[b, d // per, s, d % per] = x[b, s, d]
    return out


def merge_heads(x: np.ndarray) -> np.ndarray:
    """transpose_v_back_cpu of multi_head_attention_layer_test.cpp (v23.06.01): (B, h, S, d) -> (B, S, h * d)."""
    batch, heads, seq, per = x.shape
    out = np.empty((batch, seq, heads * per))
    for b in range(batch):
        for h in range(heads):
            for s in range(seq):
                out[b, s, h * per:(h + 1) * per] = x[b, h, s]
    return out


def mha_3d_forward(q, k, v, heads: int) -> tuple[np.ndarray, np.ndarray]:
    """MultiHeadAttention of 3D query, key, value, 4.3 - 23.06 (multi_head_attention_3d_cpu of
    multi_head_attention_layer_test.cpp, v23.06.01): scores Q_h K_h^T / sqrt(H / heads) and V split into heads."""
    qh, kh = split_heads(q, heads), split_heads(k, heads)
    return matmul_forward(qh, _t(kh)) / np.sqrt(q.shape[-1] // heads), split_heads(v, heads)


def mha_3d_backward(q, k, v, heads: int, d_scores, d_value4d) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Its backward (multi_head_attention_dgrad_3d_cpu, v23.06.01): dQ_h = dS K_h / sqrt(d), dK_h = dS^T Q_h /
    sqrt(d), each merged back (transpose_qkv_back_cpu) as is dV from the value's gradient."""
    qh, kh = split_heads(q, heads), split_heads(k, heads)
    root = np.sqrt(q.shape[-1] // heads)
    dq = matmul_forward(d_scores, kh) / root
    dk = matmul_forward(_t(d_scores), qh) / root
    return merge_heads(dq), merge_heads(dk), merge_heads(d_value4d)


def mha_4d_forward(a, b, transpose_b: bool) -> np.ndarray:
    """MultiHeadAttention of 4D tensors, 4.3 - 23.06 (multi_head_attention_cpu / _cpu_noT of
    multi_head_attention_layer_test.cpp, v23.06.01): transpose_b: a b^T / sqrt(a's last dim); else a b merged
    back to (B, m, h * k)."""
    if transpose_b:
        return matmul_forward(a, _t(b)) / np.sqrt(a.shape[-1])
    return merge_heads(matmul_forward(a, b))


def mha_4d_backward(a, b, transpose_b: bool, dy) -> tuple[np.ndarray, np.ndarray]:
    """Its backward (multi_head_attention_dgrad_cpu / _cpu_noT, v23.06.01)."""
    if transpose_b:
        root = np.sqrt(a.shape[-1])
        return matmul_forward(dy, b) / root, matmul_forward(_t(dy), a) / root
    d4 = split_heads(dy, a.shape[1])
    return matmul_forward(d4, _t(b)), matmul_forward(_t(a), d4)


def masked_softmax_forward(x: np.ndarray, mask: np.ndarray | None, scalar: float = 1.0) -> np.ndarray:
    """masked_softmax_fprop_cpu of core23_layer_test/masked_softmax_layer_test.cpp (v23.09.00): x * scalar -
    (1 - mask) * 10000 (mask (B, 1, from, to) for every head), softmax over the last dimension (plain softmax
    without a mask)."""
    z = x * scalar - (0.0 if mask is None else (1.0 - mask) * MASKED_SCORE)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def mha_23_09_forward(q, k, v, heads: int, mask=None) -> np.ndarray:
    """MultiHeadAttention 23.09+ (multi_head_attention_layer.cu of v23.09.00: transpose_0213, bgemm with
    alpha = 1/sqrt(size_per_head), (masked) softmax, bgemm with the value, transpose back): (B, m, H)."""
    qh, kh, vh = split_heads(q, heads), split_heads(k, heads), split_heads(v, heads)
    probs = masked_softmax_forward(matmul_forward(qh, _t(kh)) / np.sqrt(q.shape[-1] // heads), mask)
    return merge_heads(matmul_forward(probs, vh))


def mha_23_09_backward(q, k, v, heads: int, dy, mask=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Its backward (the same file's bprop: the bgemms' gradients, the softmax's dx = y (dy - Σ dy y) of
    masked_softmax_bprop_cpu (v23.09.00), scaled by 1/sqrt(size_per_head))."""
    qh, kh, vh = split_heads(q, heads), split_heads(k, heads), split_heads(v, heads)
    root = np.sqrt(q.shape[-1] // heads)
    probs = masked_softmax_forward(matmul_forward(qh, _t(kh)) / root, mask)
    d_out = split_heads(dy, heads)
    d_probs, dvh = matmul_forward(d_out, _t(vh)), matmul_forward(_t(probs), d_out)
    d_scores = probs * (d_probs - (d_probs * probs).sum(axis=-1, keepdims=True)) / root
    dqh, dkh = matmul_forward(d_scores, kh), matmul_forward(_t(d_scores), qh)
    return merge_heads(dqh), merge_heads(dkh), merge_heads(dvh)


def masked_softmax_layer_forward(x: np.ndarray, mask: np.ndarray, scalar: float, per_row: bool) -> np.ndarray:
    """The two-input Softmax, MaskedSoftmaxLayer: masked_softmax_fprop_cpu of masked_softmax_layer_test.cpp
    (v23.06.01; mask element (i / (heads * S)) * S + j for row i of S scores, i.e. one row of S per sample) and of
    core23_layer_test/masked_softmax_layer_test.cpp (v23.09.00; a (rows, S) block per sample: ``per_row``), with the
    kernel's + 1e-6 in the denominator (masked_softmax_layer.cu, v23.06.01 and v23.09.00)."""
    n, heads, rows, width = x.shape
    block = rows if per_row else 1
    flat, out = mask.reshape(-1), np.empty_like(x)
    for b in range(n):
        for h in range(heads):
            for r in range(rows):
                start = b * block * width + (r if per_row else 0) * width
                z = x[b, h, r] * scalar - (1.0 - flat[start:start + width]) * MASKED_SCORE
                e = np.exp(z - z.max())
                out[b, h, r] = e / (e.sum() + 1e-6)
    return out


def masked_softmax_layer_backward(y: np.ndarray, dy: np.ndarray, scalar: float) -> np.ndarray:
    """masked_softmax_bprop_cpu (masked_softmax_layer_test.cpp, v23.06.01): dx = y (dy - Σ dy y) * scalar per row of
    the last dimension, y the forward output; no gradient reaches the mask."""
    return y * (dy - (dy * y).sum(axis=-1, keepdims=True)) * scalar
