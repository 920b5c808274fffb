"""The layers of HugeCTR's attention models (DIN, BST) a generated Model is built from: PReLU_Dice, Scale,
DotProduct, FusedReshapeConcat(General), SequenceMask, MultiHeadAttention and the two-input (masked) Softmax
(MatrixMultiply is ``torch.matmul``).

Each follows its HugeCTR layer's arithmetic (src/layers/<name>_layer.cu and its unit test, cited per function),
backward included where HugeCTR's hand-written backward is not the gradient of its forward (PReLU_Dice, Scale,
DotProduct: an autograd.Function of their own). Tensors keep HugeCTR's layout: dimension 0 is HugeCTR's batch
dimension (batch * rows after a Reshape moved rows into it).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# MaskedSoftmaxLayer subtracts this from a masked-out score (masked_softmax_layer.cu, 3.9 - 25.03)
MASKED_SCORE = 10000.0
# ... and adds this to the sum of exponentials before dividing by it (the same kernel)
MASKED_SOFTMAX_EPS = 1e-6
# PRelu_Dice_Layer's backward sets 1/sqrt(var + eps) to 0 below this (prelu_dice_layer.cu, 3.3 - 25.03)
DICE_TINY_VARIANCE = 1e-8


class PReluDice(torch.autograd.Function):
    """HugeCTR's PReLU_Dice (prelu_dice_layer.cu): per column of the input seen as (dim 0, everything else), the
    batch mean E and biased variance V; p = sigmoid((x - E) / sqrt(V + eps)); y = p * x + (1 - p) * alpha * x.
    The backward is HugeCTR's: each element's own derivative (E and V differentiated through that element only,
    not through the rest of the batch), with 1/sqrt(V + eps) taken as 0 where V + eps < 1e-8."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, alpha: float, eps: float) -> torch.Tensor:   # type: ignore[override]
        s = x.reshape(x.shape[0], -1).float()
        var, mean = torch.var_mean(s, dim=0, correction=0)
        p = torch.sigmoid((s - mean) / torch.sqrt(var + eps))
        ctx.save_for_backward(s, mean, var)
        ctx.alpha, ctx.eps = alpha, eps
        return (p * s + (1 - p) * alpha * s).reshape(x.shape).to(x.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):   # type: ignore[override]
        s, mean, var = ctx.saved_tensors
        alpha, n = ctx.alpha, s.shape[0]
        tiny = var + ctx.eps < DICE_TINY_VARIANCE
        inv = torch.where(tiny, 0.0, torch.rsqrt(var + ctx.eps))
        ys = (mean - s) * inv
        ys_s = (1.0 / n - 1) * inv - (1.0 / n) * (mean - s) * inv ** 3 * (s - mean)
        p = torch.sigmoid(-ys)                  # 1 / (1 + e^ys)
        p_s = -ys_s * p * (1 - p)               # -e^ys * ys_s / (1 + e^ys)^2
        local = (p_s * s + p) * (1 - alpha) + alpha
        return (local * grad.reshape(s.shape).float()).reshape(grad.shape).to(grad.dtype), None, None


def prelu_dice(x: torch.Tensor, alpha: float, eps: float) -> torch.Tensor:
    return PReluDice.apply(x, alpha, eps)


class ScaleRepeat(torch.autograd.Function):
    """HugeCTR's Scale (scale_layer.cu): a 2D input repeated `factor` times, each element `factor` times in a row
    along the width (axis 0: (n, w) -> (n, w * factor)) or each row `factor` times (axis 1: (n * factor, w)).
    Its backward takes the gradient of the first copy only (downscale_kernel), not the sum over the copies."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, axis: int, factor: int) -> torch.Tensor:   # type: ignore[override]
        ctx.axis, ctx.factor = axis, factor
        return x.repeat_interleave(factor, dim=1 if axis == 0 else 0)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):   # type: ignore[override]
        first = grad[:, ::ctx.factor] if ctx.axis == 0 else grad[::ctx.factor]
        return first.contiguous(), None, None


def scale(x: torch.Tensor, axis: int, factor: int) -> torch.Tensor:
    return ScaleRepeat.apply(x, axis, factor)


class DotProduct(torch.autograd.Function):
    """HugeCTR's DotProduct (dot_product_layer.cu, 3.2 - 3.4): the elementwise product of the inputs. Backward as
    HugeCTR computes it: input i's gradient is grad * y / x_i, and 0 wherever y is 0."""

    @staticmethod
    def forward(ctx, *xs: torch.Tensor) -> torch.Tensor:   # type: ignore[override]
        y = xs[0]
        for x in xs[1:]:
            y = y * x
        ctx.save_for_backward(y, *xs)
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor):   # type: ignore[override]
        y, *xs = ctx.saved_tensors
        zero = y == 0
        return tuple(torch.where(zero, 0.0, grad * y / torch.where(zero, 1.0, x)).to(grad.dtype) for x in xs)


def dot_product(*xs: torch.Tensor) -> torch.Tensor:
    return DotProduct.apply(*xs)


def fused_reshape_concat(*xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """HugeCTR's FusedReshapeConcat (fused_reshape_concat_layer.cu): inputs (n, S, w_i) concatenated per slot ->
    the first S - 1 slots of every sample as rows (n * (S - 1), Σw) and the last slot (n, Σw)."""
    x = torch.cat(xs, dim=-1)
    return x[:, :-1].reshape(-1, x.shape[-1]), x[:, -1]


def fused_reshape_concat_general(*xs: torch.Tensor) -> torch.Tensor:
    """HugeCTR's FusedReshapeConcatGeneral (fused_reshape_concat_general_layer.cu): (n, S, w_i) -> (n * S, Σw)."""
    x = torch.cat(xs, dim=-1)
    return x.reshape(-1, x.shape[-1])


def _lengths(x: torch.Tensor) -> torch.Tensor:
    # The kernel reads element i of the flat tensor as sample i's length (a (n, 1) tensor: its column) and converts
    # it to int (truncation toward zero)
    return x.reshape(-1)[:x.shape[0]].to(torch.int64)


def sequence_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """HugeCTR's SequenceMask up to 23.06 (sequence_mask_layer.cu): (n, 1, 1, max_len), 1 where position < length."""
    positions = torch.arange(max_len, device=lengths.device)
    mask = positions < _lengths(lengths)[:, None]
    return mask.to(lengths.dtype).reshape(-1, 1, 1, max_len)


def sequence_mask_from_to(lengths_from: torch.Tensor, lengths_to: torch.Tensor, max_from: int,
                          max_to: int) -> torch.Tensor:
    """HugeCTR's SequenceMask from 23.08 (sequence_mask_layer.cu): (n, 1, max_from, max_to), 1 where the row is
    below the `from` length and the column below the `to` length."""
    rows = torch.arange(max_from, device=lengths_from.device) < _lengths(lengths_from)[:, None]
    cols = torch.arange(max_to, device=lengths_to.device) < _lengths(lengths_to)[:, None]
    return (rows[:, :, None] & cols[:, None, :]).to(lengths_from.dtype).unsqueeze(1)


class MaskedSoftmax(torch.autograd.Function):
    """HugeCTR's two-input Softmax, MaskedSoftmaxLayer (masked_softmax_layer.cu, 3.9 - 25.03) of 4D scores
    (n, heads, rows, S): y = exp(z - max z) / (Σ exp(z - max z) + 1e-6), z = x * factor - (1 - mask) * 10000, over
    the last dimension. The kernel reads the mask flat, sample-major: up to 23.06 one row of S per sample for every
    head and row ((n, 1, 1, S), SequenceMask's form then); from 23.08 a (rows, S) block per sample (``per_row``).
    Backward as the kernel: dx = (y dy - y Σ dy y) * factor, y the output; the mask gets no gradient."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, mask: torch.Tensor, factor: float, per_row: bool) -> torch.Tensor:   # type: ignore[override]
        n, rows, width = x.shape[0], x.shape[-2] if per_row else 1, x.shape[-1]
        m = mask.reshape(-1)[:n * rows * width].reshape(n, 1, rows, width).float()
        z = x.float() * factor - (1.0 - m) * MASKED_SCORE
        e = torch.exp(z - z.amax(dim=-1, keepdim=True))
        y = e / (e.sum(dim=-1, keepdim=True) + MASKED_SOFTMAX_EPS)
        ctx.save_for_backward(y)
        ctx.factor = factor
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):   # type: ignore[override]
        (y,) = ctx.saved_tensors
        g = grad.float()
        dx = (y * g - y * (g * y).sum(dim=-1, keepdim=True)) * ctx.factor
        return dx.to(grad.dtype), None, None, None


def masked_softmax(x: torch.Tensor, mask: torch.Tensor, factor: float, per_row: bool) -> torch.Tensor:
    return MaskedSoftmax.apply(x, mask, factor, per_row)


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(n, S, H) -> (n, heads, S, H / heads): hidden unit d goes to head d // (H / heads) (transpose_QKV)."""
    n, seq, hidden = x.shape
    return x.reshape(n, seq, heads, hidden // heads).transpose(1, 2)


def _merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(n, heads, S, d) -> (n, S, heads * d), the inverse of _heads."""
    n, heads, seq, d = x.shape
    return x.transpose(1, 2).reshape(n, seq, heads * d)


def attention_scores(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """HugeCTR 4.3 - 23.06 MultiHeadAttention of 3D query, key, value (multi_head_attention_layer.cu): the scores
    Q K^T / sqrt(d) per head (n, heads, S, S), d = H / heads, and the value split into heads (n, heads, S, d)."""
    q, k = _heads(query, heads), _heads(key, heads)
    return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), _heads(value, heads)


def attention_4d(a: torch.Tensor, b: torch.Tensor, transpose_b: bool) -> torch.Tensor:
    """HugeCTR 4.3 - 23.06 MultiHeadAttention of two 4D tensors: transpose_b -> a b^T / sqrt(a's last dimension)
    (n, heads, m, k); otherwise a b with the heads merged back, (n, m, heads * b's last dimension)."""
    if transpose_b:
        return a @ b.transpose(-1, -2) / math.sqrt(a.shape[-1])
    return _merge_heads(a @ b)


def multi_head_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, heads: int,
                         mask: torch.Tensor | None = None) -> torch.Tensor:
    """HugeCTR 23.09+ MultiHeadAttention (multi_head_attention_layer.cu): softmax(Q K^T / sqrt(d)) V per head, the
    heads merged back (n, m, H); with a mask (n, 1, m, k) the softmax is MaskedSoftmaxLayer's (scale 1):
    a score where the mask is 0 has 10000 subtracted."""
    q, k, v = _heads(query, heads), _heads(key, heads), _heads(value, heads)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores - (1.0 - mask) * MASKED_SCORE
    return _merge_heads(F.softmax(scores, dim=-1) @ v)
