"""The generated trainer's Triton row kernels (RowKernels) against the torch ops they replace, on a CUDA GPU.

    python bench/row_kernels.py                  # needs a CUDA GPU, torch and Triton
    TRITON_INTERPRET=1 python bench/row_kernels.py --device cpu     # Triton's interpreter, small sizes

For the lookups of a DLRM batch (65536 × 27 one-hot slots, vec 128) into the demo lock's tables (6,600 rows: most
rows hit thousands of times) and into tables of a million rows, checks that the gather equals `index_select` followed
by the cast to bf16 (bit for bit; the interpreter rounds differently, so within one bf16 step there) and that the
SGD update equals `index_add_(rows, -lr * grad)` up to the order of the additions, then times both (mean of 20), the
SGD kernel for several lookups-per-program settings (SGD_ROWS); on the GPU also into 20 M rows (64-bit offsets).
Then the narrow rows the gather also serves: a MovieLens batch's lookups (131,072 into 219,129 rows of 16 floats),
its ids and labels gathered from 4 M resident rows; each equal to `index_select` (GatherRows' gradient equal to
index_select's), timed against it for several rows-per-program settings (GATHER_ELEMENTS).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))     # this checkout's runtime (codegen.runtime), installed or not


def time_both(kernels, weight, updated, rows, grads, lr) -> None:
    for label, step in (("gather into bf16", lambda: kernels.gather(weight, rows, torch.bfloat16)),
                        ("index_select + cast", lambda: weight.index_select(0, rows).to(torch.bfloat16)),
                        ("SGD kernel", lambda: kernels.sgd(updated, rows, grads, lr)),
                        ("index_add_(-lr * grad)", lambda: updated.index_add_(0, rows, grads.float() * -lr))):
        print(f"  {label:<24} {mean_ms(step, 20):.3f} ms", flush=True)


def time_sgd_blocks(module, updated, rows, grads, lr) -> None:
    chosen = module.SGD_ROWS
    for block in (16, 32, 64, 128):
        module.SGD_ROWS = block
        ms = mean_ms(lambda: module.RowKernels.sgd(updated, rows, grads, lr), 20)
        print(f"  SGD kernel, {block} lookups a program{' (SGD_ROWS)' if block == chosen else ''}: {ms:.3f} ms",
              flush=True)
    module.SGD_ROWS = chosen


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--lookups", type=int, help="rows looked up per batch (default: 65536 * 27; 3000 on the CPU)")
    args = ap.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA GPU (fix: --device cpu with TRITON_INTERPRET=1)", file=sys.stderr)
        return 2
    from codegen.runtime import kernels as module     # the runtime's row kernels (every generated trainer's)

    kernels = module.RowKernels
    n = args.lookups or (65536 * 27 if device.type == "cuda" else 3000)
    torch.manual_seed(0)
    failed = False
    # (a table of more than 2**31 / 128 rows: its rows' offsets need 64-bit arithmetic)
    for table_rows in (6600, 1_000_000) + ((20_000_000,) if device.type == "cuda" else ()):
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
        # the gradient as the compiled Interaction leaves it: (batch, slots, 128), a slice of (batch, slots + 1, 128)
        slots = 27 if n % 27 == 0 else 1
        wide = torch.zeros(n // slots, slots + 1, 128, device=device, dtype=grads.dtype)
        wide[:, 1:] = grads.view(n // slots, slots, 128)
        strided = weight.clone()
        kernels.sgd(strided, rows, wide[:, 1:], lr)
        strided_ok = torch.equal(strided, updated) or (strided - reference).abs().max().item() <= \
            1e-4 * max(1.0, reference.abs().max().item())
        failed |= not (gather_ok and sgd_ok and strided_ok)
        print(f"{n:,} lookups into {table_rows:,} rows: gather {'equal' if gather_ok else 'DIFFERS'}, SGD largest "
              f"difference {error:.2e} ({'ok' if sgd_ok else 'TOO LARGE'}), from a strided gradient "
              f"{'ok' if strided_ok else 'DIFFERS'}", flush=True)
        if device.type == "cuda":
            time_both(kernels, weight, updated, rows, grads, lr)
            time_sgd_blocks(module, updated, rows, grads, lr)
        del weight, updated, reference, strided, wide
    failed |= narrow_rows(module, device)
    return 1 if failed else 0


def mean_ms(step, runs: int = 50) -> float:
    """Mean milliseconds of `runs` calls after one warm-up call."""
    step()
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(runs):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - started) / runs * 1e3


def narrow_rows(module, device: torch.device) -> bool:
    small = device.type != "cuda"
    cases = (("MovieLens lookups", torch.randn(219_129, 16, device=device), 131_072 if not small else 2000),
             ("a batch's ids", torch.randint(0, 10 ** 6, (4_000_000 if not small else 50_000, 2), device=device),
              65536 if not small else 2000),
             ("a batch's labels", torch.rand(4_000_000 if not small else 50_000, 1, device=device),
              65536 if not small else 2000))
    failed = False
    for label, table, n in cases:
        rows = torch.randint(0, len(table), (n,), device=device)
        ok = torch.equal(module.RowKernels.gather(table, rows, table.dtype), table.index_select(0, rows))
        if table.is_floating_point():
            weight = table.clone().requires_grad_()
            grad = torch.randn(n, table.shape[1], device=device)
            module.GatherRows.apply(weight, rows).backward(grad)
            ours, weight.grad = weight.grad, None
            weight.index_select(0, rows).backward(grad)
            ok = ok and torch.allclose(ours, weight.grad, rtol=1e-5, atol=1e-5)
        failed |= not ok
        timings = ""
        if device.type == "cuda":
            timings = f"index_select {mean_ms(lambda t=table, r=rows: t.index_select(0, r)):.4f} ms"
            for elements in (256, 512, 1024, 2048):
                module.GATHER_ELEMENTS = elements
                ms = mean_ms(lambda t=table, r=rows: module.RowKernels.gather(t, r, t.dtype))
                timings += f", gather ({elements} a program) {ms:.4f} ms"
            module.GATHER_ELEMENTS = 512
        print(f"{label} ({n:,} of {len(table):,} rows of {table.shape[1]} {table.dtype}): "
              f"{'equal' if ok else 'DIFFERS'}; {timings}", flush=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
