"""How fast the sharded tables' exchange moves rows between GPUs: torch's all_to_all_single (what the runtime uses)
against a group of sends and receives of the other ranks' blocks with a device copy of the own one, eagerly and
replayed from a CUDA graph, at the sizes of a sharded step.

    torchrun --nproc_per_node 2 bench/exchange.py                      # DLRM at Criteo scale: 32768 x 26 x 64 bf16
    NCCL_MAX_P2P_NCHANNELS=32 torchrun --nproc_per_node 2 bench/exchange.py --rows 32768 --width 64

Each rank sends every rank a block of --rows x --slots rows of --width values (--dtype) and receives one from each;
rank 0 prints, per method, milliseconds per exchange and the bytes that crossed to other ranks per second per rank.
Needs CUDA GPUs (one per rank) and NCCL.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist



def sends_and_receives(out: torch.Tensor, tensor: torch.Tensor, splits: list) -> None:
    """The other ranks' blocks as one group of sends and receives; the own block a device copy."""
    rank, ops = dist.get_rank(), []
    for peer, at in enumerate(range(0, len(tensor), splits[0])):
        block = slice(at, at + splits[peer])
        if peer == rank:
            out[block].copy_(tensor[block])
        else:
            ops += [dist.P2POp(dist.isend, tensor[block], peer), dist.P2POp(dist.irecv, out[block], peer)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()


def timed(fn, iters: int, graph: bool) -> float:
    """Milliseconds per call: eagerly, or replaying a CUDA graph of one call."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    if graph:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, capture_error_mode="thread_local"):
            fn()
        run = g.replay
    else:
        run = fn
    dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        run()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=32768, help="samples of each rank's batch")
    ap.add_argument("--slots", type=int, default=26)
    ap.add_argument("--width", type=int, default=64, help="columns each rank holds (vec_size / ranks)")
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("error: this benchmark needs CUDA GPUs", file=sys.stderr)
        return 2
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, size = dist.get_rank(), dist.get_world_size()
    block = args.rows * args.slots
    dtype = getattr(torch, args.dtype)
    send = torch.randn(size * block, args.width, device="cuda").to(dtype)
    out = torch.empty_like(send)
    splits = [block] * size
    crossing = (size - 1) * block * args.width * send.element_size()
    methods = {"all_to_all_single (the runtime's)": lambda: dist.all_to_all_single(out, send, splits, splits),
               "sends/receives + own copy": lambda: sends_and_receives(out, send, splits)}
    lines = []
    for name, fn in methods.items():
        for graph in (False, True):
            ms = timed(fn, args.iters, graph)
            lines.append(f"  {name:48s} {'graph' if graph else 'eager':5s} {ms:7.3f} ms  "
                         f"{crossing / ms / 1e6:7.1f} GB/s crossing per rank")
    expected = torch.cat([torch.full((block, args.width), float(r)) for r in range(size)])
    mine = torch.cat([torch.full((block, args.width), float(rank)) for _ in range(size)]).to(dtype).cuda()
    dist.all_to_all_single(out, mine, splits, splits)
    assert torch.equal(out.float().cpu(), expected), "the exchange delivered the wrong blocks"
    if rank == 0:
        env = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("NCCL_") and "NVLS" not in k)
        print(f"{size} ranks, {torch.cuda.get_device_name()}, torch {torch.__version__}, "
              f"{block} rows x {args.width} {args.dtype} to each rank ({crossing / 2 ** 20:.0f} MiB crossing per rank)"
              f"{'; ' + env if env else ''}")
        print("\n".join(lines))
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
