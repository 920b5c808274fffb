"""The layers a generated Model is built from, where HugeCTR has no torch equivalent: SparseEmbedding (HugeCTR's
embedding over all slots of a sparse input; sharded across ranks with --shard-tables), MultiCross, Interaction,
WeightMultiply and fm_order2 (and, from attention.py, the helpers of the attention models' layers; from
initializers.py, hugectr_init: HugeCTR's initial parameter values)."""

from __future__ import annotations

import types
import zlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# The layers of the attention models (DIN, BST) live in attention.py; a generated file imports every helper from here
from .attention import (attention_4d, attention_scores, dot_product, fused_reshape_concat,  # noqa: F401
                        fused_reshape_concat_general, masked_softmax, multi_head_attention, prelu_dice, scale,
                        sequence_mask, sequence_mask_from_to)
from .collection import CollectionTable  # noqa: F401  (a generated file imports every layer from here)
from .distributed import all_gather_rows
from .initializers import hugectr_init
from .kernels import GatherRows, RowKernels, table_gradient
from .shards import Placement, make_shard, slot_starts

# A slot's initial rows come from generators of their own, one per INIT_ROWS rows: a table split by columns draws
# its rows' every column and keeps its own, chunk by chunk (a whole Criteo slot is never drawn at once).
INIT_ROWS = 1 << 20


class SparseEmbedding(nn.Module):
    """HugeCTR's SparseEmbedding: one table over all slots of a sparse input (slot s's ids offset by the cardinalities
    of the slots before it, as HugeCTR's Parquet reader does), output (batch, slots, vec_size). A slot's ids are
    combined by `combiner` (sum or mean); -1 pads multi-hot lists and maps to a padding row that never trains."""

    def __init__(self, cardinalities: list[int], vec_size: int, combiner: str, name: str = "",
                 placement: Placement | None = None, init: str = "uniform"):
        super().__init__()
        self.register_buffer("slot_offsets", torch.tensor(slot_starts(cardinalities), dtype=torch.int64),
                             persistent=False)
        self.name, self.cardinalities = name, [int(c) for c in cardinalities]
        self.init = init                   # the initial rows: uniform (-0.05, 0.05) or normal N(0, 1)
        # With a placement (--shard-tables) this rank holds only the slots it owns (TableShard) or its columns of
        # every slot (ColumnShard).
        self.shard = make_shard(placement, name, self.cardinalities, vec_size) if placement is not None else None
        if self.shard is not None:     # the slots as a shard's lookup yields them, and back to slot order
            order = self.shard.order
            self.register_buffer("slot_order", torch.tensor(order, dtype=torch.int64), persistent=False)
            self.register_buffer("slot_inverse", torch.tensor(np.argsort(order).tolist(), dtype=torch.int64),
                                 persistent=False)
        self.padding_row = int(sum(cardinalities)) if self.shard is None else self.shard.rows
        self.vec_size = vec_size
        self.combiner = combiner
        self.row_updates = False           # set by the trainer: RowSparseOptimizer updates the looked-up rows
        self.lookup: tuple[torch.Tensor, torch.Tensor] | None = None   # (rows, looked-up vectors) of the last
        # training forward, for RowSparseOptimizer
        self.replica_lookup: tuple[torch.Tensor, torch.Tensor] | None = None   # the same of replicated slots
        self.kernels = False               # set by the trainer (compiled GPU runs): RowKernels look up (and update)
        # set by the trainer: a table every rank holds whole and updates whole takes its gradient from every rank's
        # looked-up rows (SharedRowsGrad) instead of GradientSync's all_reduce of the whole table
        self.shared_grad = False
        # set by the trainer (feature_order.take_shard_orders): a sharded table read only by Interactions that take
        # its slots in the shard's order (shard.order) yields them so, not gathered into slot order
        self.shard_order = False
        self.weight = nn.Parameter(torch.empty(self.padding_row + 1, vec_size if self.shard is None else self.shard.width))
        self._init_rows()

    @torch.no_grad()
    def _init_rows(self) -> None:
        """Uniform(-0.05, 0.05) rows (N(0, 1) with init "normal", as torch's nn.Embedding), each INIT_ROWS rows of a
        slot from a generator of their own (seeded by torch's seed, the table's name, the slot and the chunk), so a
        slot starts the same whichever rank holds it, its columns or a replica of it; the padding rows are zero."""
        if self.weight.is_meta:
            return
        seed = torch.initial_seed()
        for s, target, columns in self._slot_targets():
            rows = self.cardinalities[s]
            for a in range(0, rows, INIT_ROWS):
                b = min(rows, a + INIT_ROWS)
                key = [seed, zlib.crc32(self.name.encode()), s] + ([a // INIT_ROWS] if a else [])
                generator = torch.Generator(device=self.weight.device)
                generator.manual_seed(int(np.random.SeedSequence(key).generate_state(1, np.uint64)[0] >> np.uint64(1)))
                if columns is None:
                    self._draw(target[a:b], generator)
                else:
                    drawn = torch.empty(b - a, self.vec_size, device=self.weight.device)
                    target[a:b] = self._draw(drawn, generator)[:, columns[0]:columns[1]]
        self.weight[self.padding_row].zero_()
        if self.shard is not None and self.shard.replicated:
            self.shard.replica(self.weight)[-1].zero_()

    def _draw(self, rows: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        if self.init == "normal":
            return rows.normal_(0.0, 1.0, generator=generator)
        return rows.uniform_(-0.05, 0.05, generator=generator)

    def _slot_targets(self):
        """(slot, its rows in this rank's weight, the columns drawn rows keep or None) per slot this rank holds."""
        if self.shard is not None:
            yield from self.shard.slot_targets(self.weight)
            return
        for s, start in enumerate(slot_starts(self.cardinalities)):
            yield s, self.weight[start:start + self.cardinalities[s]], None

    def _load_from_state_dict(self, state_dict, prefix, *args) -> None:
        key = prefix + "weight"
        if self.shard is not None and key in state_dict:   # a whole table (checkpoint): this rank's slots of it
            state_dict[key] = self.shard.own(state_dict[key])
        super()._load_from_state_dict(state_dict, prefix, *args)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.shard is not None:
            return self.shard.assemble(self, self.fetch(ids), slot_order=not self.shard_order)
        return self.local_lookup(ids)

    def fetch(self, ids: torch.Tensor):
        """A sharded table's lookups and exchanges (the trainer keeps them, as local_lookup, out of torch.compile;
        the shard's `assemble` of their result is compiled with the layers that read it)."""
        assert self.shard is not None, "fetch: a sharded table"
        return self.shard.lookup(self, ids)

    def local_lookup(self, ids: torch.Tensor, offsets: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, slots, width) of the rows this rank holds: the whole table, or a ColumnShard's columns of it
        (`offsets`: where each of the ids' slots starts in the weight; the table's slot offsets by default)."""
        batch, slots, nnz = ids.shape
        offsets = self.slot_offsets if offsets is None else offsets
        if self.row_updates and torch.is_grad_enabled():
            rows = ((ids[..., 0] + offsets).reshape(-1) if nnz == 1 else
                    torch.where(ids >= 0, ids + offsets[:, None], self.padding_row).reshape(-1))
            return self.rows_lookup(rows, nnz, slots=slots)
        if nnz == 1:   # one id per slot: a gather; its backward is one index_add (no sort, unlike F.embedding)
            rows = (ids[..., 0] + offsets).reshape(-1)
            if self.shared_grad and torch.is_grad_enabled():
                return SharedRowsGrad.apply(self.weight, rows, self.kernels).reshape(batch, slots, -1)
            if self.kernels:
                return GatherRows.apply(self.weight, rows).reshape(batch, slots, -1)
            return self.weight.index_select(0, rows).reshape(batch, slots, -1)
        keys = torch.where(ids >= 0, ids + offsets[:, None], self.padding_row)
        if torch.onnx.is_in_onnx_export():     # ONNX has no embedding_bag with a padding row (ctrgen export)
            return self.pooled(F.embedding(keys, self.weight), ids >= 0)
        bags = F.embedding_bag(keys.reshape(batch * slots, nnz), self.weight, mode=self.combiner,
                               padding_idx=self.padding_row)
        return bags.reshape(batch, slots, -1)

    def pooled(self, vectors: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """(batch, slots, width) of each slot's looked-up vectors (batch, slots, nnz, width) pooled by the combiner
        over the ``valid`` ids (not padding), as embedding_bag with its padding_idx pools them (a slot of no valid id:
        zeros)."""
        mask = valid.unsqueeze(-1).to(vectors.dtype)
        bags = (vectors * mask).sum(dim=2)
        return bags / mask.sum(dim=2).clamp(min=1) if self.combiner == "mean" else bags

    def rows_lookup(self, rows: torch.Tensor, nnz: int, replica: bool = False,
                    slots: int | None = None) -> torch.Tensor:
        """(rows.numel() / nnz, width), or (rows.numel() / nnz / slots, slots, width) given `slots`: this rank's
        `rows` (offset; the padding row where an id is -1) looked up and, with nnz > 1, pooled by the combiner. With
        gradients on, the looked-up rows become a leaf whose gradient RowSparseOptimizer applies row by row: the table
        itself gets no (dense) gradient. `replica`: rows of the shard's replicated slots, whole rows of its replica
        view (their leaf is `replica_lookup`)."""
        weight = self.shard.replica(self.weight) if replica and self.shard is not None else self.weight
        padding = weight.shape[0] - 1 if replica else self.padding_row
        kind = rows.device.type
        # Under bf16 autocast one-hot vectors are looked up in bf16 (what the layers reading them cast to; HugeCTR's
        # mixed precision also emits half-precision embeddings), their gradient too.
        low = nnz == 1 and torch.is_autocast_enabled(kind) and torch.get_autocast_dtype(kind) == torch.bfloat16
        if self.kernels and nnz == 1 and rows.numel():   # (a rank may own no slot of a table split by tables)
            vectors = RowKernels.gather(weight, rows, torch.bfloat16 if low else weight.dtype)
        else:
            vectors = weight.detach().index_select(0, rows)
            vectors = vectors.to(torch.bfloat16) if low else vectors
        shaped = nnz == 1 and slots is not None
        if shaped:
            vectors = vectors.view(-1, slots, vectors.shape[-1])
        if torch.is_grad_enabled():
            leaf = (rows, vectors.requires_grad_())
            if replica:
                self.replica_lookup = leaf
            else:
                self.lookup = leaf
            if shaped:
                return KeepGrad.apply(vectors)
        if nnz == 1:
            return vectors
        valid = (rows != padding).reshape(-1, nnz, 1)
        bags = (vectors.reshape(-1, nnz, vectors.shape[-1]) * valid).sum(dim=1)
        bags = bags / valid.sum(dim=1).clamp(min=1) if self.combiner == "mean" else bags
        return bags if slots is None else bags.reshape(-1, slots, bags.shape[-1])


class SharedRowsGrad(torch.autograd.Function):
    """weight[rows] of a table every rank holds whole and updates whole (the spec's optimizer steps every row).
    Backward gathers every rank's looked-up rows and their gradients (one all_gather each: every rank's batch has
    the same size in training) and adds them into the table's gradient, divided by the ranks. That is the average
    GradientSync's all_reduce of every rank's dense gradient gives, for fewer bytes where the batch's lookups are
    fewer than the table's rows (the trainer decides by size and logs it)."""

    @staticmethod
    def forward(ctx, weight: torch.Tensor, rows: torch.Tensor, kernels: bool) -> torch.Tensor:
        ctx.save_for_backward(rows)
        ctx.table_shape = weight.shape
        return RowKernels.gather(weight, rows, weight.dtype) if kernels else weight.index_select(0, rows)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (rows,) = ctx.saved_tensors
        table = table_gradient(ctx.table_shape, all_gather_rows(rows), all_gather_rows(grad))
        return table.div_(torch.distributed.get_world_size()), None, None


class KeepGrad(torch.autograd.Function):
    """The looked-up vectors, unchanged; backward hands their leaf the gradient as autograd made it, whatever its
    strides (the row optimizer and RowKernels read rows by strides), where AccumulateGrad would copy it into the
    leaf's layout: the compiled Interaction's gradient of the vectors is a slice of its (batch, slots + 1, vec) one,
    and those copies took 0.53 ms of a Criteo-Kaggle step on one GPU."""

    @staticmethod
    def forward(ctx, leaf: torch.Tensor) -> torch.Tensor:
        ctx.leaf = leaf
        return leaf.view_as(leaf)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        overlapping = any(st == 0 and n > 1 for st, n in zip(grad.stride(), grad.shape))   # (an expanded gradient)
        ctx.leaf.grad = grad.contiguous() if overlapping or grad.stride(-1) != 1 else grad
        del ctx.leaf
        return None


class MultiCross(nn.Module):
    """HugeCTR's MultiCross (DCN): x_{l+1} = x0 * (x_l . w_l) + b_l + x_l; with projection_dim the DCNv2 form
    x_{l+1} = x0 * (V_l U_l x_l + b_l) + x_l."""

    def __init__(self, width: int, num_layers: int, projection_dim: int | None = None):
        super().__init__()
        self.projection_dim = projection_dim
        if projection_dim is None:
            self.weight = nn.Parameter(torch.empty(num_layers, width))
        else:
            self.u = nn.Parameter(torch.empty(num_layers, width, projection_dim))
            self.weight = nn.Parameter(torch.empty(num_layers, projection_dim, width))
        self.bias = nn.Parameter(torch.empty(num_layers, width))
        hugectr_init(self, "MultiCross")     # (the generated Model draws them again with the layer's init types)

    def forward(self, x0: torch.Tensor) -> torch.Tensor:
        x = x0
        for layer in range(self.bias.shape[0]):
            if self.projection_dim is None:
                x = x0 * (x @ self.weight[layer]).unsqueeze(-1) + self.bias[layer] + x
            else:
                x = x0 * ((x @ self.u[layer]) @ self.weight[layer] + self.bias[layer]) + x
        return x


# Widths cuBLAS reads with its widest loads (16 bytes of bf16): the Interaction's features are padded with zero
# vectors to a multiple of this (it ran the batched products of DLRM's 28 features with 4-byte loads, 'align2'
# kernels: 0.7 ms of a 6.6 ms Criteo-Kaggle step on one H100), and so are, in the compiled graph, the inputs of a
# linear layer (padded_linear).
FEATURES_MULTIPLE = 8


def padded_linear(layer: nn.Linear):
    """`layer`'s forward on its input and weight padded with zero columns to a multiple of FEATURES_MULTIPLE: the
    same values (the zeros add nothing to a product), its parameters and their gradients keep their shapes. cuBLAS
    ran DLRM's fc4 (507 inputs) with 2-byte loads ('align1' kernels: 0.13 ms of a 2.0 ms step of 4 ranks at
    Criteo-Kaggle scale); in the compiled graph the input's padding is written where the input is made. (A method
    of `layer`: a copy of the layer multiplies its own weight.)"""
    return types.MethodType(_padded_forward, layer)


def _padded_forward(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    pad = -layer.in_features % FEATURES_MULTIPLE
    return F.linear(F.pad(x, (0, pad)), F.pad(layer.weight, (0, pad)), layer.bias)


class Interaction(nn.Module):
    """HugeCTR's (DLRM) Interaction: the bottom MLP output, then the dot products of every pair of [bottom MLP output,
    slot embeddings] (strict lower triangle, in slot order), then one zero of padding."""

    pairs: torch.Tensor      # buffers (_place_pairs)
    inverse: torch.Tensor

    def __init__(self, num_features: int):
        super().__init__()
        self.num_features = num_features
        self.padded = -(-num_features // FEATURES_MULTIPLE) * FEATURES_MULTIPLE
        self.order: list[int] | None = None    # the slot at each position of the embeddings (take_order)
        self.register_buffer("pairs", torch.empty(0, dtype=torch.int64), persistent=False)
        self.register_buffer("inverse", torch.empty(0, dtype=torch.int64), persistent=False)
        self._place_pairs(list(range(num_features - 1)))

    def take_order(self, order: list[int]) -> None:
        """Its embeddings come with slot order[k] at position k (a sharded table's order, as its lookup yields the
        slots): the same pairs are multiplied and the output is the same, so the embeddings need no gather into slot
        order. That gather's backward wrote the replicated slots' whole gradient (106 µs of a 2-rank Criteo-Kaggle
        step); without it their gradient is a slice of SelfDots' and the row update reads it in place."""
        if sorted(order) != list(range(self.num_features - 1)):
            raise ValueError(f"Interaction.take_order: {order} is not an order of {self.num_features - 1} slots")
        self.order = list(order)
        self._place_pairs(self.order)

    def _place_pairs(self, order: list[int]) -> None:
        # feature f of slot order (0: the bottom MLP output, 1 + s: slot s) sits at position[f] of SelfDots' input
        position = [0] * self.num_features
        for k, slot in enumerate(order):
            position[1 + slot] = 1 + k
        # On the CPU whatever the default device: on the meta device (place_tables' model) tril_indices is a
        # reference implementation whose first use imports torch._dynamo and sympy (seconds of a rank's start-up)
        cpu = torch.device("cpu")
        rows, cols = torch.tril_indices(self.num_features, self.num_features, offset=-1, device=cpu)
        where = torch.tensor(position, dtype=torch.int64, device=cpu)
        pairs = where[rows] * self.padded + where[cols]      # flat positions in the (padded x padded) dot matrix
        inverse = torch.full((self.padded * self.padded,), len(pairs), dtype=torch.int64, device=cpu)
        inverse[pairs] = torch.arange(len(pairs), device=cpu)  # each position's pair, or the zero column past the last
        device = self.pairs.device
        self.pairs, self.inverse = pairs.to(device), inverse.to(device)

    def forward(self, bottom_mlp: torch.Tensor, embeddings: torch.Tensor) -> torch.Tensor:
        batch, slots, vec = embeddings.shape
        parts = [bottom_mlp.unsqueeze(1), embeddings]
        if self.padded > slots + 1:
            parts.append(embeddings.new_zeros(batch, self.padded - slots - 1, vec))
        dots = SelfDots.apply(torch.cat(parts, dim=1)).reshape(batch, -1)
        pad = bottom_mlp.new_zeros(batch, 1)
        return torch.cat([bottom_mlp, PairSelect.apply(dots, self.pairs, self.inverse), pad], dim=1)


class SelfDots(torch.autograd.Function):
    """x @ x^T of each sample (batch, features, vec); backward: (g + g^T) @ x, one batched product, where autograd's
    bmm backward makes two (g @ x and g^T @ x), a transposed copy and their sum (1.1 ms of the Criteo-Kaggle step on
    one H100)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        dots = torch.bmm(x, x.transpose(1, 2))     # (autocast: in its precision)
        ctx.save_for_backward(x.to(dots.dtype))
        return dots

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (x,) = ctx.saved_tensors
        return torch.bmm((grad + grad.transpose(1, 2)).to(x.dtype), x)


class PairSelect(torch.autograd.Function):
    """dots[:, pairs]; the backward is a gather too (each position's pair, zero elsewhere): index_select's own backward
    is an index_add, a scatter with atomic adds (the compiled DLRM backward's only scatter; a 2-rank Criteo-Kaggle
    profile's largest compute item was a scatter kernel, 0.71 ms a step). The same values; torch.compile traces it
    whole."""

    @staticmethod
    def forward(ctx, dots: torch.Tensor, pairs: torch.Tensor, inverse: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(inverse)
        return dots.index_select(1, pairs)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (inverse,) = ctx.saved_tensors
        return F.pad(grad, (0, 1)).index_select(1, inverse), None, None


class WeightMultiply(nn.Module):
    """HugeCTR's WeightMultiply: out[b, d * cols + k] = x[b, d] * W[d, k] (each dense feature scales its own
    vector)."""

    def __init__(self, rows: int, cols: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(rows, cols))
        hugectr_init(self, "WeightMultiply")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x.unsqueeze(-1) * self.weight).reshape(x.shape[0], -1)


def fm_order2(x: torch.Tensor, out_dim: int) -> torch.Tensor:
    """HugeCTR's FmOrder2: x holds slots of out_dim factors; 0.5 * ((sum of vectors)^2 - sum of squares)."""
    v = x.reshape(x.shape[0], -1, out_dim)
    return 0.5 * (v.sum(dim=1) ** 2 - (v * v).sum(dim=1))
