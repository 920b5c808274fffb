"""The generated trainer's Triton row kernels (RowKernels) against the torch ops they replace, on a CUDA GPU.

    python bench/row_kernels.py                  # needs a CUDA GPU, torch and Triton
    TRITON_INTERPRET=1 python bench/row_kernels.py --device cpu     # Triton's interpreter, small sizes

For the lookups of a DLRM batch (65536 × 27 one-hot slots, vec 128) into the demo lock's tables (6,600 rows: most
rows hit thousands of times) and into tables of a million rows, checks that the gather equals `index_select` followed
by the cast to bf16 (bit for bit; the interpreter rounds differently, so within one bf16 step there) and that the
SGD update equals `index_add_(rows, -lr * grad)` up to the order of the additions, then times both (mean of 20).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]


def time_both(kernels, weight, updated, rows, grads, lr) -> None:
    for label, step in (("gather into bf16", lambda: kernels.gather(weight, rows, torch.bfloat16)),
                        ("index_select + cast", lambda: weight.index_select(0, rows).to(torch.bfloat16)),
                        ("SGD kernel", lambda: kernels.sgd(updated, rows, grads, lr)),
                        ("index_add_(-lr * grad)", lambda: updated.index_add_(0, rows, grads.float() * -lr))):
        step()
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(20):
            step()
        torch.cuda.synchronize()
        print(f"  {label:<24} {(time.perf_counter() - started) / 20 * 1e3:.3f} ms", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--lookups", type=int, help="rows looked up per batch (default: 65536 * 27; 3000 on the CPU)")
    args = ap.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA GPU (fix: --device cpu with TRITON_INTERPRET=1)", file=sys.stderr)
        return 2
    spec = importlib.util.spec_from_file_location("train_torch_dlrm", REPO / "generated" / "dlrm" / "train_torch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernels = module.RowKernels
    n = args.lookups or (65536 * 27 if device.type == "cuda" else 3000)
    torch.manual_seed(0)
    failed = False
    for table_rows in (6600, 1_000_000):
        weight = torch.randn(table_rows, 128, device=device)
        rows = torch.minimum((table_rows * torch.rand(n, device=device) ** 2).long(),
                             torch.tensor(table_rows - 1, device=device))     # popular rows first
        grads = torch.randn(n, 128, device=device).to(torch.bfloat16)
        lr = torch.tensor(0.05, device=device)
        ours, theirs = kernels.gather(weight, rows, torch.bfloat16), weight.index_select(0, rows).to(torch.bfloat16)
        gather_ok = torch.equal(ours, theirs) if device.type == "cuda" else \
            torch.allclose(ours.float(), theirs.float(), rtol=2 ** -7, atol=0)
        updated = weight.clone()
        kernels.sgd(updated, rows, grads, lr)
        reference = weight.clone().index_add_(0, rows, grads.float() * -lr)
        error = (updated - reference).abs().max().item()
        sgd_ok = error <= 1e-4 * max(1.0, reference.abs().max().item())
        failed |= not (gather_ok and sgd_ok)
        print(f"{n:,} lookups into {table_rows:,} rows: gather {'equal' if gather_ok else 'DIFFERS'}, SGD largest "
              f"difference {error:.2e} ({'ok' if sgd_ok else 'TOO LARGE'})", flush=True)
        if device.type == "cuda":
            time_both(kernels, weight, updated, rows, grads, lr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
