"""Embedding tables sharded across ranks (--shard-tables): where each table lives, and how one SparseEmbedding's
ids and rows travel between ranks.

A table is one slot of a SparseEmbedding: the rows of one categorical column (HugeCTR's slot_size_array entry).
A SparseEmbedding is split one of two ways (Placement.split):
- by columns (ColumnShard): every rank holds every row of every slot, its own vec_size / ranks columns of them
  and their optimizer state. Every forward sends each rank's ids to every rank, each looks up its columns of every
  rank's rows and sends each rank its own; backward sends the gradients of those columns back. Lookups, memory and
  bytes exchanged are the same on every rank whatever the tables' sizes.
- by tables (TableShard): each slot is owned by one rank, which alone holds its rows; ids go to the owner, rows
  come back. For a vec_size the ranks do not divide.
In training every exchange has a size known before the step (each rank's batch x slots x hotness ids, each rank's
batch x slots rows): one all_to_all_single each way, which a CUDA graph captures with the rest of the step. The
owner updates the rows it looked up (RowSparseOptimizer); the dense layers are data parallel (GradientSync)."""

from __future__ import annotations

import numpy as np
import torch

from .distributed import all_to_all

class Placement:
    """Which rank owns each table: owners[embedding name][slot] -> rank. `sizes`: every rank's batch size of the next
    forward (None: the same as this rank's, as in training; evaluation sets it, its last batches differ)."""

    def __init__(self, owners: dict, rank: int, size: int, tables: list, load: list, split: dict | None = None,
                 lookups: list | None = None):
        self.owners, self.rank, self.size, self.tables, self.load = owners, rank, size, tables, load
        self.split = split or {name: "tables" for name in owners}    # embedding name -> "columns" | "tables"
        self.lookups = lookups or [0.0] * size          # per rank: ids looked up per sample of the global batch
        self.sizes = None


def make_shard(placement: Placement, name: str, cardinalities: list[int], vec_size: int):
    if placement.split.get(name) == "columns":
        return ColumnShard(placement, cardinalities, vec_size)
    return TableShard(placement, name, cardinalities, vec_size)


def describe_placement(placement: Placement) -> list[str]:
    lines = []
    for r in range(placement.size):
        mine = [t for t in placement.tables if t["rank"] in (r, "all")]
        parts = [f"{t['embedding']}[{t['slot']}]" for t in mine if t["rank"] == r]
        columns = {t["embedding"]: t["columns"][r] for t in mine if t["rank"] == "all"}
        parts += [f"{e}: every slot, columns {a}-{b - 1}" for e, (a, b) in sorted(columns.items())]
        size = placement.load[r]
        size_text = f"{size / 2 ** 30:.2f} GiB" if size >= 2 ** 30 else f"{size / 2 ** 20:.1f} MiB"
        lines.append(f"rank {r}: {len(mine)} table(s), {size_text} with optimizer state, "
                     f"{placement.lookups[r]:g} lookups per sample: {', '.join(parts) or 'none'}")
    return lines


class TableShard:
    """A SparseEmbedding's part on this rank: the slots it owns, stacked in slot order (then the padding row), and
    how ids and rows travel between ranks."""

    def __init__(self, placement: Placement, name: str, cardinalities: list[int], vec_size: int):
        self.placement, self.width, self.vec_size = placement, vec_size, vec_size
        owners = placement.owners[name]
        self.by_rank = [[s for s, o in enumerate(owners) if o == r] for r in range(placement.size)]
        self.slots = self.by_rank[placement.rank]
        self.cardinalities = cardinalities
        self.global_start = np.concatenate([[0], np.cumsum(cardinalities)[:-1]]).astype(np.int64).tolist()
        self.local_start = [0] * len(cardinalities)     # where each slot starts in its owner's table
        for slots in self.by_rank:
            start = 0
            for s in slots:
                self.local_start[s] = start
                start += cardinalities[s]
        self.rows = sum(cardinalities[s] for s in self.slots)      # this rank's rows (the padding row follows)
        order = [s for slots in self.by_rank for s in slots]
        self.order = torch.tensor(order, dtype=torch.int64)             # slots grouped by owner
        self.inverse = torch.from_numpy(np.argsort(order)).to(torch.int64)
        self.cache: dict = {}

    def own(self, full: torch.Tensor) -> torch.Tensor:
        """This rank's rows of a tensor shaped like the whole table (a checkpoint's weight or optimizer state)."""
        if full.shape[0] == self.rows + 1:
            return full
        parts = [full[self.global_start[s]:self.global_start[s] + self.cardinalities[s]] for s in self.slots]
        return torch.cat(parts + [full[-1:]])

    def _orders(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        if device not in self.cache:
            self.cache[device] = (self.order.to(device), self.inverse.to(device))
        return self.cache[device]

    def _offsets(self, sizes: tuple, nnz: int, device: torch.device) -> torch.Tensor:
        """Per received id, the local start of its slot (blocks per source rank, each slot-major)."""
        key = (sizes, nnz, device)
        if key not in self.cache:
            starts = torch.tensor([self.local_start[s] for s in self.slots], dtype=torch.int64, device=device)
            self.cache[key] = torch.cat([starts.repeat_interleave(b * nnz) for b in sizes]) if sizes else starts[:0]
        return self.cache[key]

    def lookup(self, table: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:   # a layers.SparseEmbedding
        """(batch, slots, vec) for this rank's ids, every table looked up by its owner."""
        batch, slots, nnz = ids.shape
        size, mine = self.placement.size, len(self.slots)
        sizes = tuple(self.placement.sizes or [batch] * size)
        counts = [len(s) for s in self.by_rank]
        # 1. ids to their owners: slot-major blocks, one per owner
        order, inverse = self._orders(ids.device)
        send = ids.transpose(0, 1).index_select(0, order).reshape(-1)
        received = ids.new_empty(sum(sizes) * mine * nnz)
        all_to_all(received, send, [b * mine * nnz for b in sizes], [batch * c * nnz for c in counts])
        # 2. the owner looks up every rank's rows; in training they are the leaf RowSparseOptimizer updates
        rows = torch.where(received >= 0, received + self._offsets(sizes, nnz, ids.device), table.padding_row)
        vectors = table.rows_lookup(rows, nnz)     # (sizes explicit: a rank that owns no slot has no rows)
        # 3. each rank gets its rows back (their gradients go to the owner, averaged over the ranks as the dense
        # gradients are)
        back = ExchangeRows.apply(vectors, [batch * c for c in counts], [b * mine for b in sizes], 1.0 / size)
        return back.reshape(slots, batch, -1).index_select(0, inverse).transpose(0, 1)


class ColumnShard:
    """A SparseEmbedding split by columns: this rank holds every row of every slot (then the padding row), columns
    [rank * width, (rank + 1) * width) of them."""

    def __init__(self, placement: Placement, cardinalities: list[int], vec_size: int):
        self.placement, self.vec_size = placement, vec_size
        self.width = vec_size // placement.size
        self.columns = (placement.rank * self.width, (placement.rank + 1) * self.width)
        self.cardinalities = cardinalities
        self.slots = list(range(len(cardinalities)))
        self.rows = sum(cardinalities)

    def own(self, full: torch.Tensor) -> torch.Tensor:
        """This rank's columns of a tensor shaped like the whole table (a checkpoint's weight or row state)."""
        if full.shape[1] == self.width:
            return full
        return full[:, self.columns[0]:self.columns[1]].contiguous()

    def lookup(self, table: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:   # a layers.SparseEmbedding
        """(batch, slots, vec) for this rank's ids: every rank looks up its columns of every rank's ids."""
        batch, slots, nnz = ids.shape
        size = self.placement.size
        sizes = tuple(self.placement.sizes or [batch] * size)
        # 1. every rank's ids to every rank
        send = ids.reshape(1, -1).expand(size, -1).reshape(-1)
        received = ids.new_empty(sum(sizes) * slots * nnz)
        all_to_all(received, send, [b * slots * nnz for b in sizes], [batch * slots * nnz] * size)
        # 2. this rank's columns of every rank's rows, pooled (as one rank with the whole table; in training the
        # looked-up rows are the leaf RowSparseOptimizer updates)
        local = table.local_lookup(received.reshape(sum(sizes), slots, nnz))
        # 3. each rank gets its rows' columns from every rank (gradients go back, averaged over the ranks)
        back = ExchangeRows.apply(local.reshape(-1, self.width), [batch * slots] * size, [b * slots for b in sizes],
                                  1.0 / size)
        return back.reshape(size, batch, slots, self.width).permute(1, 2, 0, 3).reshape(batch, slots, -1)


class ExchangeRows(torch.autograd.Function):
    """all_to_all of looked-up rows (owner -> the rank whose batch they belong to); backward sends the gradients
    the other way, times `scale`."""

    @staticmethod
    def forward(ctx, rows: torch.Tensor, out_splits: list, in_splits: list, scale: float) -> torch.Tensor:
        ctx.splits, ctx.scale = (out_splits, in_splits), scale
        out = rows.new_empty((sum(out_splits), *rows.shape[1:]))
        all_to_all(out, rows.contiguous(), out_splits, in_splits)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        out_splits, in_splits = ctx.splits
        back = grad.new_empty((sum(in_splits), *grad.shape[1:]))
        all_to_all(back, grad.contiguous(), in_splits, out_splits)
        return back.mul_(ctx.scale), None, None, None
