"""Embedding tables sharded across ranks (--shard-tables): where each table lives, and how one SparseEmbedding's
ids and rows travel between ranks.

A table is one slot of a SparseEmbedding: the rows of one categorical column (HugeCTR's slot_size_array entry).
A SparseEmbedding is split one of two ways (Placement.split):
- by columns (ColumnShard): every rank holds every row of every slot, its own vec_size / ranks columns of them
  and their optimizer state. Every forward sends each rank's ids to every rank, each looks up its columns of every
  rank's rows and sends each rank its own; backward sends the gradients of those columns back. Lookups, memory and
  bytes exchanged are the same on every rank whatever the tables' sizes.
- by tables (TableShard): each slot is owned by one rank, which alone holds its rows; ids go to the owner, rows
  come back. For a vec_size the ranks do not divide, or asked.
Either way the small slots may be replicated instead (Replicas, Placement.replicated): every rank holds them whole.
In training every exchange has a size known before the step (each rank's batch x slots x hotness ids, each rank's
batch x slots rows): one all_to_all_single each way, which a CUDA graph captures with the rest of the step. The
owner updates the rows it looked up (RowSparseOptimizer); the dense layers are data parallel (GradientSync)."""

from __future__ import annotations

import numpy as np
import torch

from .distributed import all_reduce, all_to_all
from .kernels import RowKernels

class Placement:
    """Which rank owns each table: owners[embedding name][slot] -> rank. `sizes`: every rank's batch size of the next
    forward (None: the same as this rank's, as in training; evaluation sets it, its last batches differ)."""

    def __init__(self, owners: dict, rank: int, size: int, tables: list, load: list, split: dict | None = None,
                 lookups: list | None = None, replicated: dict | None = None):
        self.owners, self.rank, self.size, self.tables, self.load = owners, rank, size, tables, load
        self.split = split or {name: "tables" for name in owners}    # embedding name -> "columns" | "tables"
        self.lookups = lookups or [0.0] * size          # per rank: ids looked up per sample of the global batch
        # embedding name -> its slots every rank holds whole (of an embedding split by columns)
        self.replicated = replicated or {name: [] for name in owners}
        self.sizes = None


def slot_starts(cardinalities: list[int]) -> list[int]:
    """Where each slot starts in a table of all the slots (HugeCTR's offsets of a slot's ids)."""
    return np.concatenate([[0], np.cumsum(cardinalities)[:-1]]).astype(np.int64).tolist()


def make_shard(placement: Placement, name: str, cardinalities: list[int], vec_size: int):
    if placement.split.get(name) == "columns":
        return ColumnShard(placement, cardinalities, vec_size, placement.replicated.get(name, []))
    return TableShard(placement, name, cardinalities, vec_size, placement.replicated.get(name, []))


def describe_placement(placement: Placement) -> list[str]:
    lines = []
    for r in range(placement.size):
        mine = [t for t in placement.tables if t["rank"] in (r, "all")]
        parts = [f"{t['embedding']}[{t['slot']}]" for t in mine if t["rank"] == r]
        columns = {t["embedding"]: t["columns"][r] for t in mine if t["rank"] == "all" and t["columns"]}
        whole = sorted({t["embedding"] for t in mine if t["rank"] == "all" and not t["columns"]})
        parts += [f"{e}: " + ("the other slots" if e in whole else "every slot") + f", columns {a}-{b - 1}"
                  for e, (a, b) in sorted(columns.items())]
        for e in whole:     # the replicas' gradient: one all_reduce of their whole rows (fp32) a step
            copies = [t for t in mine if t["embedding"] == e and t["rank"] == "all" and not t["columns"]]
            gradient = sum(t["rows"] + 1 for t in copies[:1]) + sum(t["rows"] for t in copies[1:])
            parts.append(f"{e}: slot(s) {', '.join(str(s) for s in placement.replicated[e])} whole (replicated; "
                         f"gradient: all_reduce of {byte_size(gradient * copies[0]['vec'] * 4)} a step)")
        lines.append(f"rank {r}: {len(mine)} table(s), {byte_size(placement.load[r])} with optimizer state, "
                     f"{placement.lookups[r]:g} lookups per sample: {', '.join(parts) or 'none'}")
    return lines


def byte_size(nbytes: int) -> str:
    return (f"{nbytes / 2 ** 30:.2f} GiB" if nbytes >= 2 ** 30 else f"{nbytes / 2 ** 20:.1f} MiB" if nbytes >= 2 ** 20
            else f"{nbytes / 2 ** 10:.1f} KiB")


class Replicas:
    """A shard's replicated slots (small ones, whose rows cost less to keep on every rank than to exchange): every
    rank holds them whole and looks up its own ids of them; their gradient is one all_reduce a step.

    In the rank's weight they start at row `replica_base`: the slots' rows in slot order, then a padding row of
    theirs, each whole row as `copies` consecutive rows of the weight (a ColumnShard's weight is 1 / ranks of a row
    wide), so `replica` is a contiguous (rows, vec_size) view and the row optimizer's state has the same layout."""

    placement: Placement
    vec_size: int
    cardinalities: list[int]
    global_start: list[int]
    order: list[int]
    cache: dict

    def _place_replicas(self, cardinalities: list[int], replicated: list[int] | None, base: int, copies: int) -> int:
        """Lay the replicated slots out from row `base`; returns the row after them."""
        self.replicated = sorted(replicated or [])
        self.replica_base, self.replica_rows, self.replica_start = base, 0, {}   # replica_rows: whole rows
        for s in self.replicated:
            self.replica_start[s], self.replica_rows = self.replica_rows, self.replica_rows + cardinalities[s]
        self.replica_copies = copies
        return base + ((self.replica_rows + 1) * copies if self.replicated else 0)

    def replica(self, local: torch.Tensor) -> torch.Tensor:
        """The replicated slots' whole rows (then their padding row) of a tensor shaped like this rank's weight."""
        region = local[self.replica_base:self.replica_base + (self.replica_rows + 1) * self.replica_copies]
        return region.view(self.replica_rows + 1, self.vec_size)

    def _replica_targets(self, weight: torch.Tensor):
        for s in self.replicated:
            yield s, self.replica(weight)[self.replica_start[s]:self.replica_start[s] + self.cardinalities[s]], None

    def _own_replicas(self, full: torch.Tensor) -> list[torch.Tensor]:
        """The replicated slots' rows of a whole table's tensor (their padding row takes the table's), as laid out."""
        if not self.replicated:
            return []
        whole = [full[self.global_start[s]:self.global_start[s] + self.cardinalities[s]] for s in self.replicated]
        return [torch.cat(whole + [full[-1:]]).reshape(-1, full.shape[1] // self.replica_copies)]

    def _index(self, key: str, device: torch.device) -> torch.Tensor:
        if (key, device) not in self.cache:
            values = {"replicated": self.replicated,
                      "replica_offsets": [self.replica_start[s] for s in self.replicated], **self._indices()}[key]
            self.cache[key, device] = torch.tensor(values, dtype=torch.int64, device=device)
        return self.cache[key, device]

    def _indices(self) -> dict:
        return {}

    def replica_lookup(self, table: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:   # a layers.SparseEmbedding
        """(batch, replicated slots, vec): this rank's ids of the replicated slots, looked up in the replica."""
        mine = ids.index_select(1, self._index("replicated", ids.device))
        batch, slots, nnz = mine.shape
        offsets = self._index("replica_offsets", ids.device)
        rows = (mine[..., 0] + offsets if nnz == 1 else
                torch.where(mine >= 0, mine + offsets[:, None], self.replica_rows)).reshape(-1)
        return table.rows_lookup(rows, nnz, replica=True, slots=slots)

    def replica_gradient(self, rows: torch.Tensor, grads: torch.Tensor, kernels: bool = False,
                         counted: bool = True):
        """The replicated rows' gradient of the global batch, on every rank, once settle("replicas") ran: returns
        what gives (whether any rank looked a row up, or None unless `counted`; the gradient), one entry per whole
        row of the replica (its padding row: never looked up, zero). Each rank adds its lookups' gradients (by
        RowKernels' run-length sum on the compiled GPU path), each divided by the ranks (the average, as of the dense
        gradients and the exchanged rows'), and, if `counted`, a count per row into one buffer; one all_reduce sums
        the ranks'."""
        n, vec = self.replica_rows + 1, self.vec_size
        flat = torch.zeros(n * (vec + 1) if counted else n * vec, device=grads.device)
        summed = flat[:n * vec].view(n, vec)
        share = 1.0 / self.placement.size
        if kernels:      # adds each row's sum, times the share
            RowKernels.sgd(summed, rows, grads, torch.full((), -share, device=grads.device))
        else:
            summed.index_add_(0, rows, grads.reshape(rows.numel(), -1).float(), alpha=share)
        if counted:
            flat[n * vec:].index_add_(0, rows, torch.ones(rows.numel(), device=grads.device))
        all_reduce(flat, later="replicas")

        def gradient() -> tuple[torch.Tensor | None, torch.Tensor]:
            if not counted:
                return None, summed
            looked_up = flat[n * vec:] > 0
            looked_up[-1:].fill_(False)      # (a fill: no host-to-device copy inside a CUDA graph)
            return looked_up, summed.mul_(looked_up[:, None])

        return gradient

    def _in_order(self, table: torch.nn.Module, others: torch.Tensor | None, replicated: torch.Tensor | None,
                  slot_order: bool = True) -> torch.Tensor:
        """(batch, slots, vec) from the other slots' vectors (in `order`) and the replicated ones': in slot order, or
        with `slot_order` False in `order` (the other slots, then the replicated ones; no gather either way)."""
        if others is None or replicated is None:
            assert others is not None or replicated is not None, "a lookup of at least one slot"
            one = others if others is not None else replicated
            return one if not slot_order or list(self.order) == sorted(self.order) else \
                SlotOrder.apply(one, table.slot_inverse, table.slot_order, 1)
        both = torch.cat([others, replicated], dim=1)
        return both if not slot_order else SlotOrder.apply(both, table.slot_inverse, table.slot_order, 1)


class TableShard(Replicas):
    """A SparseEmbedding's part on this rank: the slots it owns, stacked in slot order, then the replicated slots
    (`Replicas`), then the padding row; and how ids and rows travel between ranks."""

    def __init__(self, placement: Placement, name: str, cardinalities: list[int], vec_size: int,
                 replicated: list[int] | None = None):
        self.placement, self.width, self.vec_size = placement, vec_size, vec_size
        owners = placement.owners[name]
        kept = set(replicated or [])
        self.by_rank = [[s for s, o in enumerate(owners) if o == r and s not in kept] for r in range(placement.size)]
        self.slots = self.by_rank[placement.rank]
        self.cardinalities = cardinalities
        self.global_start = slot_starts(cardinalities)
        self.local_start = [0] * len(cardinalities)     # where each slot starts in its owner's table
        for slots in self.by_rank:
            start = 0
            for s in slots:
                self.local_start[s] = start
                start += cardinalities[s]
        owned = sum(cardinalities[s] for s in self.slots)
        self.rows = self._place_replicas(cardinalities, replicated, owned, 1)    # this rank's rows, then padding
        self.exchanged = [s for slots in self.by_rank for s in slots]    # the other slots, grouped by owner
        self.order = self.exchanged + self.replicated         # the slots as `lookup` yields them
        self.cache: dict = {}

    def _indices(self) -> dict:
        return {"exchanged": self.exchanged}

    def slot_targets(self, weight: torch.Tensor):
        """(slot, its rows in `weight`, None: every column) per slot this rank holds."""
        for s in self.slots:
            yield s, weight[self.local_start[s]:self.local_start[s] + self.cardinalities[s]], None
        yield from self._replica_targets(weight)

    def own(self, full: torch.Tensor) -> torch.Tensor:
        """This rank's rows of a tensor shaped like the whole table (a checkpoint's weight or optimizer state)."""
        if full.shape[0] == self.rows + 1:
            return full
        parts = [full[self.global_start[s]:self.global_start[s] + self.cardinalities[s]] for s in self.slots]
        return torch.cat(parts + self._own_replicas(full) + [full[-1:]])

    def _offsets(self, sizes: tuple, nnz: int, device: torch.device) -> torch.Tensor:
        """Per received id, the local start of its slot (blocks per source rank, each slot-major)."""
        key = (sizes, nnz, device)
        if key not in self.cache:
            starts = torch.tensor([self.local_start[s] for s in self.slots], dtype=torch.int64, device=device)
            self.cache[key] = torch.cat([starts.repeat_interleave(b * nnz) for b in sizes]) if sizes else starts[:0]
        return self.cache[key]

    def lookup(self, table: torch.nn.Module, ids: torch.Tensor) -> tuple:   # a layers.SparseEmbedding
        """This rank's ids' vectors: (the exchanged slots' (slots, batch, vec), each looked up by its owner, in
        owner order, or None; the replicated slots' (batch, slots, vec) or None). `assemble` makes them one."""
        exchanged = self.exchange(table, ids) if self.exchanged else None
        return exchanged, self.replica_lookup(table, ids) if self.replicated else None

    def exchange(self, table: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
        batch, _, nnz = ids.shape
        slots = len(self.exchanged)
        size, mine = self.placement.size, len(self.slots)
        sizes = tuple(self.placement.sizes or [batch] * size)
        counts = [len(s) for s in self.by_rank]
        # 1. ids to their owners: slot-major blocks, one per owner
        send = ids.transpose(0, 1).index_select(0, self._index("exchanged", ids.device)).reshape(-1)
        received = ids.new_empty(sum(sizes) * mine * nnz)
        all_to_all(received, send, [b * mine * nnz for b in sizes], [batch * c * nnz for c in counts])
        # 2. the owner looks up every rank's rows; in training they are the leaf RowSparseOptimizer updates
        rows = torch.where(received >= 0, received + self._offsets(sizes, nnz, ids.device), table.padding_row)
        # (sizes explicit: a rank that owns no slot has no rows; one-hot: (rows, 1, vec), KeepGrad's leaf)
        vectors = table.rows_lookup(rows, nnz, slots=1 if nnz == 1 else None)
        # 3. each rank gets its rows back (their gradients go to the owner, averaged over the ranks as the dense
        # gradients are: `assemble` scales them)
        back = ExchangeRows.apply(vectors, [batch * c for c in counts], [b * mine for b in sizes], nnz == 1)
        return back.reshape(slots, batch, -1)

    def assemble(self, table: torch.nn.Module, parts: tuple, slot_order: bool = True) -> torch.Tensor:
        """(batch, slots, vec) in slot order (or, `slot_order` False, in `order`) from `lookup`'s parts (in the
        compiled graph: gathers fused into the layer that reads the vectors, both ways)."""
        exchanged, replicated = parts
        if exchanged is not None:
            exchanged = ScaledGradient.apply(exchanged, 1.0 / self.placement.size).transpose(0, 1)
        return self._in_order(table, exchanged, replicated, slot_order)


class ColumnShard(Replicas):
    """A SparseEmbedding split by columns: this rank holds every row of every slot, columns
    [rank * width, (rank + 1) * width) of them, and the replicated slots whole (`Replicas`).

    The rank's weight, `width` columns: the split slots' rows (slot order), then the replicated slots' rows and a
    padding row of theirs (each whole row as `ranks` rows of the weight), then the padding row."""

    def __init__(self, placement: Placement, cardinalities: list[int], vec_size: int, replicated: list[int] | None = None):
        size = placement.size
        self.placement, self.vec_size = placement, vec_size
        self.width = vec_size // size
        self.columns = (placement.rank * self.width, (placement.rank + 1) * self.width)
        self.cardinalities = cardinalities
        kept = set(replicated or [])
        self.split_slots = [s for s in range(len(cardinalities)) if s not in kept]
        self.global_start = slot_starts(cardinalities)
        self.split_start, start = {}, 0
        for s in self.split_slots:
            self.split_start[s], start = start, start + cardinalities[s]
        self.rows = self._place_replicas(cardinalities, replicated, start, size)
        self.order = self.split_slots + self.replicated      # the slots as `lookup` yields them
        self.cache: dict = {}

    def _indices(self) -> dict:
        return {"split": self.split_slots, "split_offsets": [self.split_start[s] for s in self.split_slots]}

    def slot_targets(self, weight: torch.Tensor):
        """(slot, its rows in `weight` (a replicated slot's whole rows), the columns kept or None) per slot."""
        for s in self.split_slots:
            yield s, weight[self.split_start[s]:self.split_start[s] + self.cardinalities[s]], self.columns
        yield from self._replica_targets(weight)

    def own(self, full: torch.Tensor) -> torch.Tensor:
        """This rank's part of a tensor shaped like the whole table (a checkpoint's weight or row state)."""
        if full.shape == (self.rows + 1, self.width):
            return full
        a, b = self.columns
        parts = [full[self.global_start[s]:self.global_start[s] + self.cardinalities[s], a:b] for s in self.split_slots]
        return torch.cat(parts + self._own_replicas(full) + [full[-1:, a:b]]).contiguous()

    def lookup(self, table: torch.nn.Module, ids: torch.Tensor) -> tuple:   # a layers.SparseEmbedding
        """This rank's ids' vectors: (the split slots' columns from every rank as exchanged or None, the replicated
        slots' vectors (batch, slots, vec) or None). Every rank looks up its columns of every rank's ids of the split
        slots; the replicated slots' rows are looked up here. `assemble` makes them one (batch, slots, vec)."""
        split = replicated = None
        if self.split_slots:
            split = self.split_lookup(table, ids if not self.replicated else
                                      ids.index_select(1, self._index("split", ids.device)))
        if self.replicated:
            replicated = self.replica_lookup(table, ids)
        return split, replicated

    def split_lookup(self, table: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
        """(ranks x batch x split slots, width): this rank's columns of every rank's ids of the split slots."""
        batch, slots, nnz = ids.shape
        size = self.placement.size
        sizes = tuple(self.placement.sizes or [batch] * size)
        # 1. every rank's ids to every rank
        send = ids.reshape(1, -1).expand(size, -1).reshape(-1)
        received = ids.new_empty(sum(sizes) * slots * nnz)
        all_to_all(received, send, [b * slots * nnz for b in sizes], [batch * slots * nnz] * size)
        # 2. this rank's columns of every rank's rows, pooled (as one rank with the whole table; in training the
        # looked-up rows are the leaf RowSparseOptimizer updates)
        offsets = self._index("split_offsets", ids.device) if self.replicated else None
        local = table.local_lookup(received.reshape(sum(sizes), slots, nnz), offsets)
        # 3. each rank gets its rows' columns from every rank (gradients go back, averaged over the ranks:
        # `assemble` scales them)
        return ExchangeRows.apply(local.reshape(-1, self.width), [batch * slots] * size, [b * slots for b in sizes],
                                  nnz == 1)

    def assemble(self, table: torch.nn.Module, parts: tuple, slot_order: bool = True) -> torch.Tensor:
        """(batch, slots, vec) in slot order (or, `slot_order` False, in `order`) from `lookup`'s parts. In the
        compiled graph the column interleave and the slot order are gathers fused into the layer that reads the
        vectors, both ways (eager, a 2-rank Criteo-Kaggle step spent 0.7 ms in their two gather kernels)."""
        split, replicated = parts
        if split is not None:
            n = len(self.split_slots)
            split = ScaledGradient.apply(split, 1.0 / self.placement.size)
            split = split.reshape(self.placement.size, -1, n, self.width).permute(1, 2, 0, 3).reshape(-1, n, self.vec_size)
        return self._in_order(table, split, replicated, slot_order)


class SlotOrder(torch.autograd.Function):
    """x.index_select(dim, index) for a permutation `index` of the slots; backward is a gather too, by `inverse`
    (index_select's own backward is an index_add, atomic adds of bf16 that took 1 ms of a 2-rank Criteo-Kaggle
    step). torch.compile traces it whole."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor, dim: int) -> torch.Tensor:
        ctx.save_for_backward(inverse)
        ctx.dim = dim
        return x.index_select(dim, index)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (inverse,) = ctx.saved_tensors
        return grad.index_select(ctx.dim, inverse), None, None, None


class ScaledGradient(torch.autograd.Function):
    """x unchanged; backward: the gradient times `scale`, contiguous. Exchanged rows' gradients go back averaged
    over the ranks, in the layout ExchangeRows sends. Inside the compiled graph (a shard's `assemble`) inductor can
    write them so where it makes them; outside it they were a copy of the (slots, batch, vec) gradient and a
    multiplication after it (0.09 + 0.03 ms of a 2-rank Criteo-Kaggle step)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return (grad * ctx.scale).contiguous(), None


class ExchangeRows(torch.autograd.Function):
    """all_to_all of looked-up rows (owner -> the rank whose batch they belong to); backward sends the gradients
    the other way (averaged before, by ScaledGradient). `later` (one-hot lookups, whose looked-up rows take the
    gradient as it comes: no kernel reads it before the row update): the backward exchange is done at
    settle("rows"), which RowSparseOptimizer calls once the replicas' gradient is on its way, so the two transfers
    overlap its work."""

    @staticmethod
    def forward(ctx, rows: torch.Tensor, out_splits: list, in_splits: list, later: bool = False) -> torch.Tensor:
        ctx.splits, ctx.later = (out_splits, in_splits), later
        out = rows.new_empty((sum(out_splits), *rows.shape[1:]))
        all_to_all(out, rows.contiguous(), out_splits, in_splits)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        out_splits, in_splits = ctx.splits
        back = grad.new_empty((sum(in_splits), *grad.shape[1:]))
        all_to_all(back, grad.contiguous(), in_splits, out_splits, later="rows" if ctx.later else None)
        return back, None, None, None
