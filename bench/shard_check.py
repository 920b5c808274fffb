"""Sharded tables on real GPUs equal one process: N NCCL ranks with the Triton row kernels and bf16 autocast (as the
compiled trainer runs them) against one process holding the whole DLRM with the global batch, for the tables split
by columns, split with the small slots replicated, whole tables with the small slots replicated, and the latter two
replayed from a CUDA graph (the step as the trainer's: the closing transfers overlap the row updates). Prints the largest
difference of the embedding table and of the dense layers after 12 SGD steps; exits 1 when one is over --tolerance.
The CPU tests check the same arithmetic without Triton, autocast and graphs (tests/test_torch_shard.py).

    torchrun --standalone --nproc_per_node 2 bench/shard_check.py
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]
from trainer_view import view  # noqa: E402  (tests/trainer_view.py: the generated file with its runtime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=4096, help="batch per rank")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--replicate-rows", type=int, default=140, help="slots of at most this many rows replicated")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    args = ap.parse_args()
    m = view(str(REPO / "generated" / "dlrm" / "train_torch.py"), "train_torch")
    dist.init_process_group("nccl")
    rank, size = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    features = json.loads((REPO / "generated" / "dlrm" / "features.json").read_text())
    cards = [c["cardinality"] for c in features["sparse"][0]["columns"]]
    batch, worst_all = args.batch, 0.0
    cases = [("columns", False), ("replicated", False), ("replicated", True), ("tables+replicated", False),
             ("tables+replicated", True)]
    for split, graph in cases:
        with torch.device("meta"):
            placement = m.place_tables(m.Model(features), size, rank, split={"replicated": "auto", "tables+replicated":
                                       "tables"}.get(split, split), replicate_rows=0 if split == "columns" else
                                       args.replicate_rows)
        models = []
        for p in (placement, None):
            torch.manual_seed(5)
            with torch.device(device):
                model = m.Model(features, p).to(device)   # as the trainer builds it
            for table in model.modules():
                if isinstance(table, m.SparseEmbedding):
                    table.kernels = table.row_updates = True
            models.append((model, m.make_optimizer(model, torch.tensor(0.5, device=device), row_updates=True)))
        (part, part_opt), (whole, whole_opt) = models
        sync = m.GradientSync(list(part.parameters()))
        gen = torch.Generator().manual_seed(2)
        dense_in = torch.zeros(batch, 13, device=device)
        ids_in = torch.zeros(batch, len(cards), 1, dtype=torch.int64, device=device)
        label_in = torch.zeros(batch, 1, device=device)

        def step(model, opt, dense, ids, label, sync=None):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(dense, ids)
            F.binary_cross_entropy_with_logits(out.float(), label).backward()
            if sync is not None:
                sync(later=True)     # as the trainer's step: waited for after the row updates
            opt.step()
            m.settle()

        captured = None
        for it in range(args.steps):
            dense = torch.rand(batch * size, 13, generator=gen).to(device)
            ids = torch.stack([torch.randint(0, c, (batch * size, 1), generator=gen) for c in cards], dim=1).to(device)
            label = (torch.rand(batch * size, 1, generator=gen) < 0.5).float().to(device)
            whole_opt.zero_grad()
            step(whole, whole_opt, dense, ids, label)
            mine = slice(batch * rank, batch * (rank + 1))
            dense_in.copy_(dense[mine])
            ids_in.copy_(ids[mine])
            label_in.copy_(label[mine])
            if graph and it == 4:        # after four eager steps, as the trainer captures
                torch.cuda.synchronize()
                part_opt.zero_grad(set_to_none=True)
                captured = torch.cuda.CUDAGraph()
                with torch.cuda.graph(captured):
                    step(part, part_opt, dense_in, ids_in, label_in, sync)
            if captured is not None:
                captured.replay()        # (capturing does not run the step)
            else:
                part_opt.zero_grad(set_to_none=not graph)
                step(part, part_opt, dense_in, ids_in, label_in, sync)
        theirs = whole.state_dict()
        mine_state = m.model_state(part)
        if rank == 0:
            diff = {k: float((v.to(device) - theirs[k]).abs().max()) for k, v in mine_state.items()}
            table = max(v for k, v in diff.items() if "sparse" in k)
            other = max(v for k, v in diff.items() if "sparse" not in k)
            worst_all = max(worst_all, table, other)
            print(f"{size} ranks, {split}{' from a CUDA graph' if graph else ''}: largest difference to one process "
                  f"after {args.steps} steps: table {table:.2e}, dense layers {other:.2e}", flush=True)
        captured = None                  # a graph that holds NCCL work goes before the process group
        torch.cuda.synchronize()
        dist.barrier()
    dist.destroy_process_group()
    if rank == 0 and worst_all > args.tolerance:
        print(f"over the tolerance {args.tolerance}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
