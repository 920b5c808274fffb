"""Triton kernels for embedding rows on the compiled GPU path: a gather (every one-hot lookup; straight into the
autocast precision) and the SGD row update. Built on first use: neither start-up nor a CPU run imports Triton."""

from __future__ import annotations

import torch

# Two kernels, used where the dense layers are compiled (--compile: Triton is already there, and its compile time
# already paid). The gather serves every one-hot lookup: torch's index_select moves about 1.5 G rows of a table a
# second whatever their width (82 us of a 0.67 ms MovieLens step at batch 65536 went to its lookup, 28 us with the
# kernel); for tables updated row by row it gathers straight into the autocast precision (one pass instead of a
# gather and a cast). SGD adds -lr times each row's summed
# gradient, read in whatever precision autograd left it, with one atomic add per run of equal rows (lookups sorted by
# row) instead of one per lookup: small tables are hit by thousands of lookups a batch. Elsewhere (CPU, eager
# runs, no Triton) the same arithmetic runs as torch ops. `tl` is bound when the kernels are first built, so that
# neither start-up nor a CPU run imports Triton.
tl = None   # triton.language, once RowKernels.get() ran


def _gather_rows_kernel(weight, rows, out, n, dim, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    d = tl.arange(0, BLOCK_D)
    inside = (r < n)[:, None] & (d < dim)[None, :]
    row = tl.load(rows + r, mask=r < n, other=0)
    values = tl.load(weight + row[:, None] * dim + d[None, :], mask=inside)
    tl.store(out + r[:, None].to(tl.int64) * dim + d[None, :], values.to(out.dtype.element_ty), mask=inside)


def _add_in_run(total, starts, value, value_starts):
    # the combine of a segmented sum: the running total restarts where a run of equal rows starts
    return tl.where(value_starts, value, total + value), starts | value_starts


def _sgd_rows_kernel(weight, rows, order, grads, lr, n, dim, slots, stride_b, stride_s, BLOCK_N: tl.constexpr,
                     BLOCK_D: tl.constexpr):
    # rows sorted; order[i]: the lookup at sorted position i, whose gradient is row (order[i] // slots,
    # order[i] % slots) of grads (strides stride_b, stride_s). A program loads BLOCK_N positions' gradients at once,
    # sums each run of equal rows among them (a segmented scan) and adds each run's sum with one atomic add (a run
    # that crosses into the next program is added by both).
    k = tl.arange(0, BLOCK_N)
    i = tl.program_id(0) * BLOCK_N + k
    d = tl.arange(0, BLOCK_D)
    valid = i < n
    row = tl.load(rows + i, mask=valid, other=-1).to(tl.int64)
    before = tl.load(rows + i - 1, mask=valid & (k > 0), other=-1).to(tl.int64)
    after = tl.load(rows + i + 1, mask=i + 1 < n, other=-1).to(tl.int64)
    source = tl.load(order + i, mask=valid, other=0)
    at = (source // slots) * stride_b + (source % slots) * stride_s
    columns = (d < dim)[None, :]
    grad = tl.load(grads + at[:, None] + d[None, :], mask=valid[:, None] & columns, other=0.0).to(tl.float32)
    starts = tl.broadcast_to(((k == 0) | (before != row))[:, None], (BLOCK_N, BLOCK_D))
    sums, _ = tl.associative_scan((grad, starts), 0, _add_in_run)
    last = valid & ((k == BLOCK_N - 1) | (after != row))
    scale = -tl.load(lr).to(tl.float32)
    tl.atomic_add(weight + row[:, None] * dim + d[None, :], sums * scale, mask=last[:, None] & columns,
                  sem="relaxed")


GATHER_ELEMENTS = 512   # values a gather program moves (at least 32 rows)
SGD_ROWS = 32           # sorted lookups an SGD program sums at once


class RowKernels:
    """The two kernels, built with triton.jit on first use."""

    built = None

    @classmethod
    def get(cls):
        if cls.built is None:
            import triton
            import triton.language
            globals()["tl"] = triton.language
            globals()["_add_in_run"] = triton.jit(_add_in_run)     # (the kernel's scan calls it by this name)
            cls.built = (triton, triton.jit(_gather_rows_kernel), triton.jit(_sgd_rows_kernel))
        return cls.built

    @classmethod
    def gather(cls, weight: torch.Tensor, rows: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """weight[rows] in dtype (weight: contiguous rows, at least one column)."""
        triton, gather, _ = cls.get()
        n, dim = rows.numel(), weight.shape[1]
        out = torch.empty(n, dim, dtype=dtype, device=weight.device)
        block_d = triton.next_power_of_2(dim)
        block_r = max(32, GATHER_ELEMENTS // block_d)   # narrow rows: more rows a program
        gather[(triton.cdiv(n, block_r),)](weight, rows, out, n, dim, BLOCK_R=block_r, BLOCK_D=block_d)
        return out

    @classmethod
    def sgd(cls, weight: torch.Tensor, rows: torch.Tensor, grads: torch.Tensor, lr: torch.Tensor) -> None:
        """weight[row] -= lr * (sum of the grads of its lookups), for every looked-up row. `grads`: (lookups, dim)
        or (batch, slots, dim), in lookup order, any strides but a unit one along dim (read in place: the looked-up
        vectors' gradient is a slice of the Interaction's)."""
        triton, _, sgd = cls.get()
        n, dim = rows.numel(), weight.shape[1]
        grads = grads if grads.dim() == 3 else grads.reshape(n, 1, dim)
        if grads.stride(-1) != 1:
            grads = grads.contiguous()
        # int32 keys where the rows fit: the radix sort makes half the passes of int64 keys
        ordered, order = torch.sort(rows.int() if weight.shape[0] < 2 ** 31 else rows)
        sgd[(triton.cdiv(n, SGD_ROWS),)](weight, ordered, order, grads, lr, n, dim, grads.shape[1], grads.stride(0),
                                         grads.stride(1), BLOCK_N=SGD_ROWS, BLOCK_D=triton.next_power_of_2(dim))


class GatherRows(torch.autograd.Function):
    """weight[rows] by RowKernels.gather; the backward is index_select's: the rows' gradients added into a zero
    gradient of the table."""

    @staticmethod
    def forward(ctx, weight: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(rows)
        ctx.table_shape = weight.shape
        return RowKernels.gather(weight, rows, weight.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (rows,) = ctx.saved_tensors
        return table_gradient(ctx.table_shape, rows, grad), None


def table_gradient(shape, rows: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """A table's dense gradient from its looked-up rows' gradients (rows looked up several times add up)."""
    return torch.zeros(shape, dtype=grads.dtype, device=grads.device).index_add_(0, rows, grads)
