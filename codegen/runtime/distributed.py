"""torch.distributed for the trainer: rank and world, collectives whose work the main thread keeps, the shuffle seed
every rank agrees on, all_to_all and point-to-point for sharded tables, the peak memory of a rank, and ``setup``: this
rank's device (and, under torchrun, the process group)."""

from __future__ import annotations

import collections
import os

import numpy as np
import torch
import torch.distributed as dist

from .errors import DataError


def world() -> tuple[int, int]:
    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


# The work of a collective holds the tensors Python passed to it. If the process group's worker thread drops the last
# reference, releasing them takes the GIL, and when that happens while the interpreter exits, the process aborts
# ("terminate called without an active exception"; gloo, seen under CPU load). So the main thread keeps the handles of
# the latest collectives: the worker's reference goes first, and the main thread releases the tensors (the last few
# when the interpreter exits).
RECENT_WORK: collections.deque = collections.deque(maxlen=16)


def collective(fn, *args, **kwargs) -> None:
    work = fn(*args, async_op=True, **kwargs)
    work.wait()
    RECENT_WORK.append(work)


# Collectives of the step launched but not yet waited for, by what they carry ("rows": exchanged row gradients,
# "replicas": the replicated slots' gradient, "dense": GradientSync's), each with what runs once it is done. On the
# GPU the wait only makes the current stream wait for NCCL's, so what runs between the launch and `settle` (the
# row updates) overlaps the transfer. Nothing may read or write a deferred collective's tensors before `settle`.
PENDING: dict[str, list] = collections.defaultdict(list)


# The step's gradient all_reduces ("dense", "replicas") travel on a communicator of their own, opened by every rank
# at start-up: NCCL runs each communicator's kernels on a stream of its own, so they can run beside the exchanges of
# rows instead of queueing behind them on one stream.
REDUCE_GROUP: list = []


def open_reduce_group() -> None:
    """Every rank calls this at the same point, after init_process_group."""
    if dist.is_initialized() and dist.get_world_size() > 1 and not REDUCE_GROUP:
        REDUCE_GROUP.append(dist.new_group())


def defer(key: str, work, then=None) -> None:
    PENDING[key].append((work, then))


def collective_later(key: str, fn, *args, then=None, **kwargs) -> None:
    """collective() launched now and waited for at settle(key) (its work kept until then), then `then()`."""
    defer(key, fn(*args, async_op=True, **kwargs), then)


def settle(*keys: str) -> None:
    """Wait for the collectives deferred under `keys` (all, with none given), in launch order."""
    for key in keys or tuple(PENDING):
        for work, then in PENDING.pop(key, []):
            work.wait()
            RECENT_WORK.append(work)
            if then is not None:
                then()


def all_reduce(value: torch.Tensor, op=dist.ReduceOp.SUM, later: str | None = None, then=None) -> torch.Tensor:
    """Sum `value` over the ranks in place; `later`: launched now on the gradients' group, done at settle(later),
    then `then()`."""
    if dist.is_initialized():
        if later is None:
            collective(dist.all_reduce, value, op=op)
        else:
            collective_later(later, dist.all_reduce, value, op=op, group=reduce_group(), then=then)
    return value


def reduce_group():
    return REDUCE_GROUP[0] if REDUCE_GROUP else None


def close_process_group() -> None:
    """destroy_process_group, and forget the gradients' group (a later run in this process opens its own)."""
    REDUCE_GROUP.clear()
    dist.destroy_process_group()


def epoch_seed(base_seed: int, epoch: int, device: torch.device, data_pass: int | None = None) -> int:
    """One shuffle seed for all ranks: each rank contributes a fragment, the sum is the seed (NVTabular's seed_fn).
    A continuous-training pass has its own seeds, so a pass resumed in a new process shuffles as in one run."""
    rank, size = world()
    max_rand = torch.iinfo(torch.int32).max // size
    key = [base_seed, epoch, rank] if data_pass is None else [base_seed, data_pass, epoch, rank]
    fragment = int(np.random.default_rng(key).integers(0, max_rand))
    total = all_reduce(torch.tensor([fragment], dtype=torch.int64, device=device))
    return int(total.item()) % max_rand


def gather(values: torch.Tensor) -> torch.Tensor:
    """Concatenate a 1-D tensor of every rank (sizes may differ)."""
    if not dist.is_initialized():
        return values
    size = torch.tensor([values.numel()], device=values.device)
    sizes = [torch.zeros_like(size) for _ in range(dist.get_world_size())]
    collective(dist.all_gather, sizes, size)
    longest = int(max(s.item() for s in sizes))
    padded = torch.zeros(longest, dtype=values.dtype, device=values.device)
    padded[:values.numel()] = values
    parts = [torch.zeros_like(padded) for _ in sizes]
    collective(dist.all_gather, parts, padded)
    return torch.cat([p[:int(s.item())] for p, s in zip(parts, sizes)])


def host_only() -> bool:
    """gloo (CPU, or ranks sharing a GPU) exchanges host tensors: GPU tensors go through host memory."""
    return dist.get_backend() == "gloo"


# The work of the latest exchange, kept by the main thread as collective() keeps RECENT_WORK, but only one: an
# exchange holds a batch's looked-up rows (hundreds of MB at Criteo scale), a checkpoint's a chunk of a table. A worker thread releasing an older one
# is harmless while the interpreter runs; at exit the main thread holds the last.
EXCHANGE_WORK: collections.deque = collections.deque(maxlen=1)


def all_to_all(out: torch.Tensor, tensor: torch.Tensor, out_splits: list, in_splits: list,
               later: str | None = None) -> None:
    """all_to_all_single along dim 0 (NCCL captures it in a CUDA graph; bench/exchange.py measured it faster than a
    group of sends and receives of the other ranks' blocks with a device copy of the own one). `later`: launched
    now, `out` filled at settle(later)."""
    target = torch.empty(out.shape, dtype=out.dtype) if out.is_cuda and host_only() else out
    work = dist.all_to_all_single(target, tensor.cpu() if target is not out else tensor, out_splits, in_splits,
                                  async_op=True)

    def done() -> None:
        EXCHANGE_WORK.append(work)
        if target is not out:
            out.copy_(target)

    if later is not None:
        defer(later, work, done)
        return
    work.wait()
    done()


def all_gather_rows(tensor: torch.Tensor) -> torch.Tensor:
    """Every rank's `tensor` (the same shape on every rank) one after another along dim 0, in rank order."""
    size = dist.get_world_size()
    out = tensor.new_empty((size * tensor.shape[0], *tensor.shape[1:]))
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor   # (renamed in torch 2.12)
    if out.is_cuda and host_only():
        host = torch.empty(out.shape, dtype=out.dtype)
        collective(gather, host, tensor.cpu())
        out.copy_(host)
    else:
        collective(gather, out, tensor.contiguous())
    return out


def p2p(fn, tensor: torch.Tensor, peer: int) -> None:
    work = fn(tensor, peer)
    work.wait()
    EXCHANGE_WORK.append(work)   # one chunk of a table: kept as an exchange is (see all_to_all)


class GradientSync:
    """Data parallelism of every parameter that has a gradient (the dense layers; a table updated whole, which
    every rank then holds whole: replicated). Rank 0's values at the start, and after each backward every gradient
    averaged over the ranks: the small ones in one all_reduce of a flat buffer, a large one in place. Unlike DDP's
    hooks this runs inside the step, so a CUDA graph captures it with the rest (NCCL collectives are capturable)."""

    FLAT_BYTES = 32 << 20     # gradients up to this size travel together

    def __init__(self, params: list):
        self.params = [p for p in params if p.requires_grad]
        self.size = dist.get_world_size()
        with torch.no_grad():
            for p in self.params:
                collective(dist.broadcast, p.data, 0)

    def __call__(self, later: bool = False) -> None:
        """Average the gradients; `later`: the all_reduces are launched now and done at settle("dense")."""
        grads = [p.grad for p in self.params if p.grad is not None]
        small = [g for g in grads if g.numel() * g.element_size() <= self.FLAT_BYTES]
        for g in grads:
            if g.numel() * g.element_size() > self.FLAT_BYTES:
                all_reduce(g, later="dense", then=lambda g=g: g.div_(self.size))
        for dtype in sorted({g.dtype for g in small}, key=str):
            group = [g for g in small if g.dtype == dtype]
            flat = torch.cat([g.reshape(-1) for g in group])

            def back(flat=flat, group=group) -> None:
                flat.div_(self.size)
                parts = flat.split([g.numel() for g in group])
                torch._foreach_copy_(group, [part.view_as(g) for part, g in zip(parts, group)])

            all_reduce(flat, later="dense", then=back)
        if not later:
            settle("dense")


def peak_memory(device: torch.device) -> int:
    """Peak bytes of this rank: allocated GPU memory, or the process's resident set on the CPU."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    import resource
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def setup(args) -> torch.device:
    """The device this rank trains on; under torchrun (WORLD_SIZE > 1) the process group is opened first."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        use_cuda = args.device != "cpu" and torch.cuda.is_available()
        backend = args.dist_backend if args.dist_backend != "auto" else "nccl" if use_cuda else "gloo"
        if backend == "nccl" and not use_cuda:
            raise DataError("--dist-backend nccl needs CUDA GPUs (fix: --dist-backend gloo for the CPU)")
        # Every exchange of the step has a fixed size and the dense gradients are averaged inside the step
        # (GradientSync), so NCCL ranks capture the step as one rank does; gloo goes through host memory. Refused
        # before the ranks meet, build a model or read data.
        if backend == "gloo" and args.cuda_graph == "on":
            raise DataError("--cuda-graph on: the gloo backend exchanges through host memory, which a CUDA graph "
                            "cannot capture (fix: --dist-backend nccl with a GPU per rank, or --cuda-graph off)")
        device = torch.device("cpu")
        if use_cuda:
            gpus = torch.cuda.device_count()
            if local_ranks > gpus and backend == "nccl":   # NCCL refuses two ranks on one GPU
                raise DataError(f"{local_ranks} ranks on this node but {gpus} GPU(s): NCCL needs a GPU per rank "
                                f"(fix: torchrun --nproc_per_node {gpus}, or --dist-backend gloo to share GPUs)")
            device = torch.device("cuda", local_rank % gpus)
            torch.cuda.set_device(device)
        dist.init_process_group(backend=backend)
        open_reduce_group()
        return device
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          "cpu" if args.device == "auto" else args.device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device
