"""The AUC noise of one configuration: train the generated train_torch.py K times on the same data, for each of
several learning rates, and print every run's AUC, its losses and rate, and each learning rate's AUC spread.

bench/multi_gpu.py compares the AUC of N ranks with one rank's within a tolerance (0.005). That comparison means
something only where two runs of one configuration land closer together than the tolerance. Runs of the same seed
on the same data differ where the order of floating-point additions differs between runs (the row kernels' atomic
adds on the GPU), and a learning rate near the edge of stability amplifies that: a loss that rises between two
displays is counted as a rise here. The learning rate whose spread is within the tolerance, and whose runs learned, is
the one for bench/multi_gpu.py (its default).

Every run trains --batch a step (with --ranks N: N ranks of --batch / N each, at lr / N each, as bench/multi_gpu.py
runs them) on the same synthetic rows and evaluates the same validation rows. Exit status 1 when a run did not learn
(AUC within 0.01 of 0.5, or a last loss not below its first).

    python bench/auc_noise.py --model dlrm --scale criteo-kaggle --batch 65536 --precision bf16 --iters 1000 \
        --lrs 2,1,0.5 --repeat 3                   # one GPU: the noise of each learning rate
    python bench/auc_noise.py --device cpu --iters 40 --batch 512 --rows 40000 --repeat 2     # no GPU

Needs torch, numpy and pyarrow (the data is synthesized from the committed generated/<model>/features.json).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from multi_gpu import VALID_ROWS, dataset, default_lr, learned, report, run, step_kind  # noqa: E402  (bench/: scripts)
from train_throughput import REPO, SCRATCH  # noqa: E402


def largest_rise(losses: list[float]) -> float:
    """The largest rise of the training loss from one display to the next (0: it never rose)."""
    return max([b - a for a, b in zip(losses, losses[1:])] + [0.0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 3)[3],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="movielens", help="a generated/<model>/ with train_torch.py")
    ap.add_argument("--scale", choices=("demo", "criteo-kaggle"), default="demo",
                    help="criteo-kaggle: DLRM's tables at the Criteo-Kaggle cardinalities")
    ap.add_argument("--device", default="auto", help="auto, cuda or cpu")
    ap.add_argument("--ranks", type=int, default=1, help="ranks of every run (torchrun; --batch / N a rank)")
    ap.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    ap.add_argument("--rows", type=int, default=2_000_000, help="synthetic training rows")
    ap.add_argument("--valid-rows", type=int, default=VALID_ROWS, help="synthetic validation rows, each evaluated")
    ap.add_argument("--batch", type=int, default=2048, help="the global batch of every run")
    ap.add_argument("--iters", type=int, default=600)
    ap.add_argument("--lrs", type=lambda v: [float(x) for x in v.split(",")], metavar="LR[,LR...]",
                    help="the global learning rates (default: bench/multi_gpu.py's, 1 for dlrm's SGD, 0.002 for "
                         "the others)")
    ap.add_argument("--repeat", type=int, default=3, metavar="K", help="runs of each learning rate")
    ap.add_argument("--tolerance", type=float, default=0.005,
                    help="the AUC spread a learning rate must stay within (bench/multi_gpu.py's tolerance)")
    ap.add_argument("--precision", choices=("fp32", "tf32", "bf16", "fp16"), help="passed to every run")
    ap.add_argument("--extra", default="", help="more trainer arguments for every run, e.g. '--compile off'")
    ap.add_argument("--out", type=Path, help="write the table here (Markdown)")
    args = ap.parse_args()
    if args.repeat < 2:
        ap.error("--repeat must be at least 2 (a spread needs two runs)")
    if args.ranks < 1 or args.batch % args.ranks:
        ap.error(f"--ranks {args.ranks}: at least 1, and it must divide --batch {args.batch}")
    if args.scale == "criteo-kaggle" and args.model != "dlrm":
        ap.error("--scale criteo-kaggle: DLRM only (--model dlrm)")
    script = REPO / "generated" / args.model / "train_torch.py"
    if not script.is_file():
        ap.error(f"{script} not found (a spec with the torch target)")
    lrs = args.lrs or [default_lr(args.model)]
    device = args.device if args.device != "auto" else "cuda" if torch.cuda.is_available() else "cpu"
    where = f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}" if device == "cuda" else "CPU"
    common = (("--precision", args.precision) if args.precision else ()) + tuple(args.extra.split())

    features = json.loads(script.with_name("features.json").read_text())
    rows = []       # (lr, run, metrics)
    with tempfile.TemporaryDirectory(prefix="ctrgen-noise-", dir=SCRATCH) as tmp_name:
        tmp = Path(tmp_name)
        files = 2 * args.ranks
        features_path, ceiling = dataset(features, args.scale, args.rows, files, tmp, args.valid_rows)
        print(f"{args.model}: {args.rows:,} synthetic rows in {files} files (planted AUC ceiling {ceiling:.4f}); "
              f"{where}", flush=True)
        for lr in lrs:
            for k in range(args.repeat):
                m = run(script, features_path, tmp / "data", tmp / f"run_{lr}_{k}", ranks=args.ranks,
                        batch=args.batch // args.ranks, lr=lr / args.ranks, iters=args.iters, device=device,
                        backend=args.backend, extra=common, valid_rows=args.valid_rows)
                rows.append((lr, k + 1, m))
                print(f"lr {lr:g}, run {k + 1} of {args.repeat}: AUC {m['auc']:.4f}, "
                      f"{m['interval_samples_per_second'][-1]:,.0f} samples/s", flush=True)

    table = ["| lr | run | step | samples/s (last interval) | loss first → last | largest rise | eval AUC | learned |",
             "|---:|---:|---|---:|---|---:|---:|---|"]
    problems, aucs = [], {}
    for lr, k, m in rows:
        ok, losses = learned(m)
        if not ok:
            problems.append(f"lr {lr:g}, run {k}: did not learn (AUC {m['auc']:.4f}, loss {losses[0]:.4f} → "
                            f"{losses[-1]:.4f})")
        table.append(f"| {lr:g} | {k} | {step_kind(m)} | {m['interval_samples_per_second'][-1]:,.0f} | "
                     f"{losses[0]:.4f} → {losses[-1]:.4f} | {largest_rise(losses):.4f} | {m['auc']:.4f} | "
                     f"{'yes' if ok else '**no**'} |")
        aucs.setdefault(lr, []).append(m["auc"])
    table.append("")
    for lr, values in aucs.items():
        spread = max(values) - min(values)
        verdict = "within" if spread <= args.tolerance else "**over**"
        table.append(f"- lr {lr:g}: AUC {min(values):.4f}–{max(values):.4f} over {len(values)} runs (spread "
                     f"{spread:.4f}, {verdict} {args.tolerance}), mean {sum(values) / len(values):.4f}")
    text = "\n".join(table) + ("\n\n" + "; ".join(problems) if problems else "") + "\n"
    title = (f"{args.model} on {where}, torch {torch.__version__}; {args.ranks} rank(s), global batch {args.batch}, "
             f"{args.iters} iterations")
    report(title, text, args.out)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
