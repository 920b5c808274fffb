"""Sharded tables at the model's level: the placement of a model's tables, whole tables (and their row state) for a
checkpoint, the evaluation batches every rank runs together, whether to shard at all and how the tables are updated
(the trainer's start-up: embedding_update, shard_tables), and what metrics.json says of them (table_facts)."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn as nn

from .distributed import collective, host_only, p2p, world
from .errors import DataError
from .job import Job, Optimizer
from .layers import SparseEmbedding
from .row_optim import RowSparseOptimizer
from .shards import ColumnShard, Placement, byte_size, describe_placement

# How a SparseEmbedding is split and how its ids and rows travel: shards.py. The dense layers stay data parallel
# (GradientSync, without the tables).
ROW_STATE = {"SGD": 0, "AdaGrad": 1, "Adam": 2}   # per-element state tensors of a row (RowSparseOptimizer)


CHUNK_BYTES = 64 << 20                              # rows sent to rank 0 at a time when a checkpoint gathers a table


MIN_COLUMNS = 4      # a column split gives every rank at least this many columns (16 bytes of a float32 row)


def place_tables(model: nn.Module, size: int, rank: int, row_update: str | None, split: str = "auto",
                 replicate_rows: int = 0) -> Placement:
    """Where each table lives; deterministic, every rank computes the same placement.

    The slots of at most ``replicate_rows`` rows are replicated: every rank holds them whole and looks up its own
    ids; their gradient is one all_reduce of rows x vec_size, where the other slots exchange batch x vec_size per
    slot each way. ``split`` auto: a SparseEmbedding whose vec_size the ranks divide (at least MIN_COLUMNS columns
    each) is split by columns, so every rank holds the same bytes and looks up the same ids whatever the tables'
    sizes. The others (and all with ``split`` tables) are placed whole, slot by slot, largest cost first onto the
    rank of least cost, ties to the lower rank. A table's cost is its share of the bytes (rows x vec x 4, times 1 +
    its optimizer's state tensors) plus its share of the lookups per sample (its hotness), so no rank does most of
    the lookups."""
    per_row = 4 * (1 + ROW_STATE.get(row_update or "", 0))
    tables, owners, kinds, replicated = [], {}, {}, {}
    for name, module in model.named_modules():
        if isinstance(module, SparseEmbedding):
            if 0 in module.cardinalities:       # its ids index the rows of a later slot, placed apart from it
                raise DataError(f"table {name!r}: a slot of size 0 shares the rows of a later slot, which placing "
                                "the table slot by slot across ranks would split (fix: --shard-tables off)")
            vec = module.vec_size
            columns = split != "tables" and vec % size == 0 and vec // size >= MIN_COLUMNS
            kinds[name] = "columns" if columns else "tables"
            owners[name] = [0] * len(module.cardinalities)
            replicated[name] = [s for s, rows in enumerate(module.cardinalities) if rows <= replicate_rows]
            tables += [{"embedding": name, "slot": s, "rows": rows, "bytes": rows * vec * per_row, "vec": vec,
                        "lookups": 1} for s, rows in enumerate(module.cardinalities)]   # one bag per sample
    load, lookups = [0] * size, [0.0] * size
    whole = [t for t in tables if kinds[t["embedding"]] == "tables" and t["slot"] not in replicated[t["embedding"]]]
    for table in tables:
        if table["slot"] in replicated[table["embedding"]]:    # every rank: the whole slot, its own samples' ids
            table["rank"], table["columns"] = "all", None
            for r in range(size):
                load[r] += table["bytes"]
                lookups[r] += table["lookups"] / size
        elif kinds[table["embedding"]] == "columns":
            width = table["vec"] // size
            table["rank"], table["columns"] = "all", [[r * width, (r + 1) * width] for r in range(size)]
            for r in range(size):
                load[r] += table["bytes"] // size
                lookups[r] += table["lookups"]
    total_bytes = max(1, sum(t["bytes"] for t in whole))
    total_lookups = max(1, sum(t["lookups"] for t in whole))
    cost = [0.0] * size

    def share(t: dict) -> float:
        return t["bytes"] / total_bytes + t["lookups"] / total_lookups

    for table in sorted(whole, key=lambda t: -share(t)):      # stable: equal costs in model and slot order
        owner = min(range(size), key=lambda r: (cost[r], r))
        table["rank"] = owner
        owners[table["embedding"]][table["slot"]] = owner
        load[owner] += table["bytes"]
        lookups[owner] += table["lookups"]
        cost[owner] += share(table)
    return Placement(owners, rank, size, tables, load, kinds, lookups, replicated)


def share_gradients(model: nn.Module, features: dict, size: int, batch: int) -> list[str]:
    """Tables every rank holds whole and updates whole (not sharded): each takes its gradient from every rank's
    looked-up rows (SparseEmbedding.shared_grad) where those are fewer bytes than the table's gradient, which
    GradientSync would all_reduce: one-hot inputs only (a multi-hot bag's rows are pooled first). Returns the
    placement log's lines, one a table."""
    one_hot = all(s["nnz"] == 1 for s in features["sparse"])
    lines = []
    for name, table in model.named_modules():
        if not isinstance(table, SparseEmbedding) or table.shard is not None or not table.weight.requires_grad:
            continue
        whole = table.weight.numel() * table.weight.element_size()
        rows = size * batch * len(table.cardinalities) * (table.vec_size * table.weight.element_size() + 8)
        table.shared_grad = one_hot and rows < whole
        how = (f"an all_gather of every rank's looked-up rows, {byte_size(rows)} a step (the table's: {byte_size(whole)})"
               if table.shared_grad else f"an all_reduce of the table's, {byte_size(whole)} a step" + (
                   f" (its looked-up rows: {byte_size(rows)})" if one_hot else " (multi-hot inputs)"))
        lines.append(f"{name}: every rank holds it whole and updates it whole; its gradient is {how}")
    return lines


def sharded_tables(model: nn.Module) -> list:
    return [(name, m) for name, m in model.named_modules() if isinstance(m, SparseEmbedding) and m.shard is not None]


def full_rows(table: SparseEmbedding, local: torch.Tensor) -> torch.Tensor | None:
    """The whole table of a tensor shaped like this rank's part (weight or row state), on rank 0 in host memory
    (None elsewhere): slot by slot, each owner sends its rows in chunks of CHUNK_BYTES. Every rank calls it."""
    shard = table.shard
    assert shard is not None, "full_rows: a sharded table"
    if isinstance(shard, ColumnShard):
        return full_columns(shard, local)
    rank = shard.placement.rank
    width = local.shape[1:]
    full = torch.empty((sum(shard.cardinalities) + 1, *width), dtype=local.dtype) if rank == 0 else None
    chunk = max(1, CHUNK_BYTES // max(1, local[:1].numel() * local.element_size()))
    for s, owner in enumerate(shard.placement.owners[table.name]):
        if rank not in (0, owner) or s in shard.replicated:
            continue
        start, first = shard.global_start[s], shard.local_start[s]
        for a in range(0, shard.cardinalities[s], chunk):
            b = min(a + chunk, shard.cardinalities[s])
            if rank == owner == 0:
                full[start + a:start + b] = local[first + a:first + b].cpu()  # type: ignore[index]
            elif rank == owner:
                part = local[first + a:first + b]
                p2p(dist.isend, part.cpu() if host_only() else part.contiguous(), 0)
            else:
                buffer = torch.empty((b - a, *width), dtype=local.dtype,
                                     device="cpu" if host_only() else local.device)
                p2p(dist.irecv, buffer, owner)
                full[start + a:start + b] = buffer.cpu()  # type: ignore[index]
    if full is not None:
        full[-1] = local[-1].cpu()      # the padding row (every rank's is the same)
        _replicas_into(full, shard, local)
    return full


def _replicas_into(full: torch.Tensor, shard, local: torch.Tensor) -> None:
    """The replicated slots of a whole table (rank 0's replica: every rank's is the same)."""
    if shard.replicated:
        replica = shard.replica(local)
        for s in shard.replicated:
            a, n = shard.replica_start[s], shard.cardinalities[s]
            full[shard.global_start[s]:shard.global_start[s] + n] = replica[a:a + n].cpu()


def full_columns(shard: ColumnShard, local: torch.Tensor) -> torch.Tensor | None:
    """The whole table of a tensor shaped like a ColumnShard's weight (weight or row state), on rank 0 in host memory
    (None elsewhere): the split slots' rows (and the padding row) in chunks of CHUNK_BYTES, each rank sending its
    columns of them; the replicated slots from rank 0's replica."""
    rank, size, width = shard.placement.rank, shard.placement.size, shard.width
    total = sum(shard.cardinalities)
    full = torch.empty((total + 1, width * size), dtype=local.dtype) if rank == 0 else None
    chunk = max(1, CHUNK_BYTES // max(1, local[:1].numel() * local.element_size()))
    # (start in the whole table, start in this rank's tensor, rows): each split slot, then the padding row
    pieces = [(shard.global_start[s], shard.split_start[s], shard.cardinalities[s])
              for s in shard.split_slots] + [(total, shard.rows, 1)]
    for start, first, rows in pieces:
        for a in range(0, rows, chunk):
            b = min(a + chunk, rows)
            if rank == 0:
                full[start + a:start + b, :width] = local[first + a:first + b].cpu()  # type: ignore[index]
                for peer in range(1, size):
                    buffer = torch.empty((b - a, width), dtype=local.dtype,
                                         device="cpu" if host_only() else local.device)
                    p2p(dist.irecv, buffer, peer)
                    full[start + a:start + b, peer * width:(peer + 1) * width] = buffer.cpu()  # type: ignore[index]
            else:
                part = local[first + a:first + b]
                p2p(dist.isend, part.cpu() if host_only() else part.contiguous(), 0)
    if full is not None:
        _replicas_into(full, shard, local)
    return full


def model_state(model: nn.Module) -> dict:
    """model.state_dict() with whole tables (on rank 0; every rank calls it when tables are sharded)."""
    state = model.state_dict()
    for name, table in sharded_tables(model):
        state[f"{name}.weight"] = full_rows(table, table.weight.detach())
    return state


def optimizer_state(model: nn.Module, optimizer) -> list | dict:
    """optimizer.state_dict() with the row state of whole tables (rank 0; every rank calls it when sharded)."""
    state = optimizer.state_dict()
    if not sharded_tables(model):
        return state
    state = list(state)
    rows = next(o for o in optimizer.optimizers if isinstance(o, RowSparseOptimizer))
    k = optimizer.optimizers.index(rows)
    state[k] = {**state[k], "state": [{key: full_rows(table, value) for key, value in table_state.items()}
                                      for table, table_state in zip(rows.tables, rows.state)]}
    return state


def eval_sizes(model: nn.Module, rows: int, batch_size: int, device: torch.device):
    """With sharded tables every rank runs the same evaluation batches (an empty one is one row of zeros whose
    score is dropped): yields (start, every rank's batch size)."""
    tables = sharded_tables(model)
    if not tables:
        yield from ((start, None) for start in range(0, rows, batch_size))
        return
    placement = tables[0][1].shard.placement
    counts = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(placement.size)]
    collective(dist.all_gather, counts, torch.tensor([rows], dtype=torch.int64, device=device))
    counts = [int(c.item()) for c in counts]
    try:
        for start in range(0, max(counts), batch_size):
            placement.sizes = [max(1, min(batch_size, n - start)) for n in counts]
            yield start, placement.sizes
    finally:
        placement.sizes = None


def resolve_sharding(asked: str, embedding_update: str, size: int, optimizer: Optimizer, continuous: bool) -> bool:
    """--shard-tables: auto shards on several ranks where the tables train row by row; on refuses what cannot."""
    if asked == "off":
        return False
    why_not = (f"the spec's optimizer {optimizer.hugectr} with its update_type updates every row of the tables, and "
               "a sharded table is updated row by row by its owner" if optimizer.rows is None else
               "continuous training runs in one process" if continuous else
               "a sharded table is updated row by row by its owner, not with --embedding-update dense"
               if embedding_update == "dense" else None)
    if asked == "on" and why_not is not None:
        raise DataError(f"--shard-tables on: {why_not} (fix: --shard-tables off"
                        + (", or --embedding-update auto)" if embedding_update == "dense" else ")"))
    return why_not is None and size > 1


def embedding_update(args, job: Job, size: int) -> tuple[bool, bool, bool]:
    """(continuous, sharded, row_updates): how the tables are updated and whether they are sharded over the ranks."""
    rows_kind, continuous = job.optimizer.rows, job.passes is not None
    if continuous and size > 1:
        raise DataError(f"continuous training runs in one process, not {size} ranks (fix: start it without torchrun)")
    sharded = resolve_sharding(args.shard_tables, args.embedding_update, size, job.optimizer, continuous)
    if args.embedding_update == "rows" and (rows_kind is None or continuous or (size > 1 and not sharded)):
        raise DataError("--embedding-update rows: " + (
            f"the spec's optimizer {job.optimizer.hugectr} with its update_type updates every row of the tables"
            if rows_kind is None else "continuous training already updates only the rows a pass looks up"
            if continuous else f"row updates run on one rank, not {size}, unless the tables are sharded")
            + " (fix: --embedding-update dense" + (", or --shard-tables auto)" if size > 1 and rows_kind is not None
                                                   and not continuous else ")"))
    row_updates = args.embedding_update != "dense" and rows_kind is not None and not continuous and \
        (size == 1 or sharded)
    return continuous, sharded, row_updates


def shard_tables(args, model_class, features: dict, rows_kind, sharded: bool, log):
    """Where each table lives when they are sharded (None when they are not)."""
    rank, size = world()
    placement = None
    if args.replicate_rows is not None and args.replicate_rows < 0:
        raise DataError(f"--replicate-rows {args.replicate_rows}: a number of rows, 0 or more (fix: --replicate-rows 0 "
                        "replicates no slot)")
    replicate = args.replicate_rows if args.replicate_rows is not None else \
        args.batch_size if args.table_split == "auto" else 0
    if sharded:     # placed from a model on the meta device (no memory), before the seed is set
        with torch.device("meta"):
            placement = place_tables(model_class(features), size, rank, rows_kind, args.table_split,
                                     replicate_rows=replicate)
        how = {"auto": "split by columns where the ranks divide vec_size, else whole tables by bytes and lookups",
               "columns": "split by columns", "tables": "whole tables by bytes and lookups"}[args.table_split]
        log(f"tables sharded over {size} ranks ({how}" + (f"; slots of at most {replicate} rows replicated"
                                                          if replicate else "") + "):")
        for line in describe_placement(placement):
            log("  " + line)
    return placement


def table_facts(metrics: dict, model, device: torch.device, placement, rows_from_data: dict, shared: list) -> None:
    """What metrics.json says of the tables before training: rows from the data, gradients and sharding."""
    size = world()[1]
    if rows_from_data:
        metrics["rows_from_data"] = rows_from_data
    if shared:     # replicated tables updated whole: how each one's gradient is averaged over the ranks
        metrics["table_gradients"] = {name: "all_gather of looked-up rows" if t.shared_grad else "all_reduce"
                                      for name, t in model.named_modules() if isinstance(t, SparseEmbedding)}
    if placement is not None:
        local = torch.tensor([list(m.weight.shape) for _, m in sharded_tables(model)], device=device)
        every = [torch.zeros_like(local) for _ in range(size)]
        collective(dist.all_gather, every, local)
        metrics["sharding"] = {"tables": placement.tables, "split": placement.split,
                               "replicated": placement.replicated, "bytes_per_rank": placement.load,
                               "lookups_per_sample_per_rank": placement.lookups,
                               "in_shard_order": sorted(n for n, t in sharded_tables(model) if t.shard_order),
                               "local_shape_per_rank": [e.tolist() for e in every]}
