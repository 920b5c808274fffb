"""Train the generated train_torch.py on one rank and on N ranks (torchrun) on the same data.

Both runs see the same global batch and the same learning rate (--lr is the global one: one rank trains with batch
N*B and lr, the N ranks with batch B each and lr/N, which the script scales by the ranks, as seed 001 does), so the
default is as stable on 4 ranks as on 1. Several rank counts (--ranks 2,4) are each run against the same one-rank
run, with --global-batch G (G/N a rank): one invocation for the whole table. They evaluate the same validation
rows. Printed (and written to --out as Markdown): the rank count, global batch, samples/s, the speed-up over the one-rank run of this same invocation,
peak memory of each rank, the first and last training loss and the AUC of each run. A run that did not learn (AUC
within 0.01 of 0.5, or a last loss not below its first) is flagged, and so are AUCs further apart than --tolerance:
exit status 1. --shard-tables is passed to the N ranks (both: once sharded, once with every table on every rank and
the dense step); --table-split too; --scale criteo-kaggle gives DLRM the Criteo-Kaggle cardinalities (33.8 M rows).
The step column says whether the runs were compiled (the trainer's --compile auto compiles runs of at least 1000
iterations) and replayed from a CUDA graph. --repeat K runs each of them K times on the same data (a row each): the
AUCs compared are then each configuration's mean, and the spread of every configuration's AUCs is printed (run-to-run
noise: the order of atomic adds varies).

    python bench/multi_gpu.py --ranks 2                     # a machine with 2 GPUs: NCCL, one GPU per rank
    python bench/multi_gpu.py --ranks 2 --backend gloo      # one GPU shared by both ranks: checks the code path
                                                            # (sharding, seeds, reductions), not the speed-up
    python bench/multi_gpu.py --ranks 2 --device cpu        # no GPU
    python bench/multi_gpu.py --ranks 2 --model dlrm --scale criteo-kaggle --batch 32768 --precision bf16 \
        --iters 1000 --shard-tables both                      # tables sharded vs every rank holding every table
    python bench/multi_gpu.py --ranks 4 --model dlrm --scale criteo-kaggle --batch 16384 --precision bf16 \
        --iters 1000 --repeat 3                               # the AUCs' spread over three runs of each
    python bench/multi_gpu.py --ranks 2,4 --global-batch 65536 --model dlrm --scale criteo-kaggle --precision bf16 \
        --iters 1000 --table-split tables+replicas            # 2 and 4 ranks against one one-rank run

Needs torch, numpy and pyarrow (the data is synthesized from the committed generated/<model>/features.json).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_throughput import REPO, SCRATCH, criteo_kaggle, synthesize  # noqa: E402  (bench/ is a folder of scripts, not a package)


VALID_ROWS = 262_144     # synthetic validation rows, each evaluated (--valid-rows)


def run(script: Path, features: Path, data: Path, out: Path, *, ranks: int, batch: int, lr: float, iters: int,
        device: str, backend: str, extra: tuple = (), valid_rows: int = VALID_ROWS) -> dict:
    cmd = [sys.executable]
    if ranks > 1:
        cmd += ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}"]
    cmd += [str(script), "--train", str(data / "train"), "--eval", str(data / "valid"), "--features", str(features),
            "--max-iter", str(iters), "--batch-size", str(batch), "--lr", repr(lr), "--display", str(max(iters // 4, 1)),
            "--eval-interval", str(iters), "--snapshot", "0", *eval_args(valid_rows),
            "--output-dir", str(out), "--device", device, "--dist-backend", backend, *extra]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "4"),
           # the generated trainer imports this checkout's runtime (codegen.runtime), installed or not
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    print(proc.stdout, end="", flush=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"error: {' '.join(cmd[:6])} ... exited with {proc.returncode}")
    return json.loads((out / "metrics.json").read_text())


def eval_args(valid_rows: int) -> tuple[str, ...]:
    """Every validation row evaluated, in batches of at most 16,384."""
    batch = min(16_384, valid_rows)
    return "--eval-batch-size", str(batch), "--max-eval-batches", str(-(-valid_rows // batch))


def dataset(features: dict, scale: str, rows: int, files: int, tmp: Path,
            valid_rows: int = VALID_ROWS) -> tuple[Path, float]:
    """The features (at --scale) written to tmp/features.json, `rows` synthetic training rows in `files` files
    under tmp/data/train and `valid_rows` validation rows under tmp/data/valid; returns the features' path and the
    data's planted AUC ceiling."""
    if scale == "criteo-kaggle":
        features = criteo_kaggle(features)
    features_path = tmp / "features.json"
    features_path.write_text(json.dumps(features))
    ceiling = synthesize(features, rows, tmp / "data" / "train", files=files, seed=1)
    synthesize(features, valid_rows, tmp / "data" / "valid", files=1, seed=1)
    return features_path, ceiling


def learned(m: dict) -> tuple[bool, list]:
    """Whether a run learned (an AUC further than 0.01 from 0.5, a last training loss below its first), its losses."""
    losses = m.get("train_losses") or [float("nan")]
    return abs(m["auc"] - 0.5) > 0.01 and losses[-1] < losses[0], losses


def step_kind(m: dict) -> str:
    """How a run's step ran: compiled, replayed from a CUDA graph, or eager."""
    return " + ".join(w for w, on in (("compiled", m.get("compiled")), ("CUDA graph", m.get("cuda_graph"))) if on) \
        or "eager"


def report(title: str, text: str, out: Path | None) -> None:
    """Print the title and the table, and write them to `out` (Markdown) where given."""
    print(f"\n{title}\n{text}")
    if out:
        out.write_text(f"{title}\n\n{text}", encoding="utf-8")


def default_lr(model: str) -> float:
    """The global learning rate of a run unless --lr says otherwise: 1 for DLRM's SGD, 0.002 for the others.
    DLRM at lr 2 trains at the edge of stability: three one-GPU runs at Criteo-Kaggle scale spread 0.0077 in AUC,
    more than the tolerance, against 0.0003 at lr 1 (bench/auc_noise.py; docs/benchmarks.md)."""
    return 1.0 if model == "dlrm" else 0.002


SPLITS = ("auto", "columns", "tables", "columns+replicas", "tables+replicas")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="movielens", help="a generated/<model>/ with train_torch.py")
    ap.add_argument("--ranks", type=lambda v: [int(x) for x in v.split(",")], default=[2], metavar="N[,N...]",
                    help="the rank counts (several: one N-rank run each, against the same one-rank run; with "
                         "--global-batch)")
    ap.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto",
                    help="torch.distributed backend (gloo lets ranks share one GPU)")
    ap.add_argument("--device", default="auto", help="auto, cuda or cpu")
    ap.add_argument("--rows", type=int, default=2_000_000, help="synthetic training rows")
    ap.add_argument("--valid-rows", type=int, default=VALID_ROWS, help="synthetic validation rows, each evaluated")
    ap.add_argument("--batch", type=int, default=2048, help="batch per rank (one rank: this times --ranks)")
    ap.add_argument("--global-batch", type=int, metavar="B",
                    help="the batch of every run instead: B / N a rank (needed with several --ranks)")
    ap.add_argument("--iters", type=int, default=600)
    ap.add_argument("--lr", type=float, help="the global learning rate, the same at every rank count (default: 1 for "
                                             "dlrm's SGD, 0.002 for the others)")
    ap.add_argument("--tolerance", type=float, default=0.005, help="largest allowed AUC difference")
    ap.add_argument("--shard-tables", choices=("auto", "on", "off", "both"), default="auto",
                    help="passed to the N ranks; both: one run with sharded tables, one with --shard-tables off "
                         "--embedding-update dense")
    ap.add_argument("--scale", choices=("demo", "criteo-kaggle"), default="demo",
                    help="criteo-kaggle: DLRM's tables at the Criteo-Kaggle cardinalities")
    ap.add_argument("--precision", choices=("fp32", "tf32", "bf16", "fp16"), help="passed to every run")
    ap.add_argument("--table-split", type=lambda v: v.split(","), default=[None], metavar="SPLIT[,SPLIT...]",
                    help="passed to the N ranks (auto, columns, tables; columns+replicas, tables+replicas: with "
                         "--replicate-rows at the batch per rank); several: one N-rank run each, against the same "
                         "one-rank run")
    ap.add_argument("--extra", default="", help="more trainer arguments for every run, e.g. '--cuda-graph off'")
    ap.add_argument("--repeat", type=int, default=1, metavar="K",
                    help="run the one-rank and each N-rank configuration K times; compare their mean AUCs")
    ap.add_argument("--out", type=Path, help="write the table here (Markdown)")
    args = ap.parse_args()
    if min(args.ranks) < 2:
        ap.error("--ranks must be at least 2")
    if len(args.ranks) > 1 and args.global_batch is None:
        ap.error(f"--ranks {','.join(map(str, args.ranks))}: several rank counts need --global-batch B (each of "
                 "them then trains B / N a rank, so every run has the same global batch)")
    if args.global_batch is not None and any(args.global_batch % n for n in args.ranks):
        ap.error(f"--global-batch {args.global_batch}: every rank count of --ranks must divide it")
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    if not set(args.table_split) <= {None, *SPLITS}:
        ap.error(f"--table-split {','.join(args.table_split)}: each one of {', '.join(SPLITS)}")
    per_rank = {n: args.global_batch // n if args.global_batch else args.batch for n in args.ranks}
    global_batch = args.global_batch or args.batch * args.ranks[0]
    script = REPO / "generated" / args.model / "train_torch.py"
    features_path = script.with_name("features.json")
    if not script.is_file():
        ap.error(f"{script} not found (a spec with the torch target)")
    device = args.device if args.device != "auto" else "cuda" if torch.cuda.is_available() else "cpu"
    where = (f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}" if device == "cuda" else "CPU")

    features = json.loads(features_path.read_text())
    if args.scale == "criteo-kaggle" and args.model != "dlrm":
        ap.error("--scale criteo-kaggle: DLRM only (--model dlrm)")
    common = (("--precision", args.precision) if args.precision else ()) + tuple(args.extra.split())
    lr = args.lr if args.lr is not None else default_lr(args.model)
    with tempfile.TemporaryDirectory(prefix="ctrgen-ranks-", dir=SCRATCH) as tmp_name:
        tmp = Path(tmp_name)
        files = 2 * math.lcm(*args.ranks)      # every rank count reads whole files
        features_path, ceiling = dataset(features, args.scale, args.rows, files, tmp, args.valid_rows)
        print(f"{args.model}: {args.rows:,} synthetic rows in {files} files (planted AUC ceiling "
              f"{ceiling:.4f}); {where}", flush=True)
        rows = []      # (ranks, backend, sharded, configuration, metrics), a row per run
        for k in range(args.repeat):
            one = run(script, features_path, tmp / "data", tmp / f"one_{k}", ranks=1, batch=global_batch,
                      lr=lr, iters=args.iters, device=device, backend="auto", extra=common,
                      valid_rows=args.valid_rows)
            rows.append(("1", "-", "-", "one", one))
        for n in args.ranks:
            for shard in (("on", "off") if args.shard_tables == "both" else (args.shard_tables,)):
                for split in (args.table_split if shard != "off" else [None]):
                    extra = common + ("--shard-tables", shard) + (
                        ("--embedding-update", "dense") if shard == "off" and args.shard_tables == "both" else ())
                    name, _, replicas = (split or "").partition("+")
                    extra += (("--table-split", name) if split else ()) + (
                        ("--replicate-rows", str(per_rank[n])) if replicas else ())
                    label = f"{n} ranks" + (f", --shard-tables {shard}" if shard != "auto" else "") + (
                        f", --table-split {split}" if split else "")
                    for k in range(args.repeat):
                        many = run(script, features_path, tmp / "data", tmp / f"many_{n}_{shard}_{split}_{k}",
                                   ranks=n, batch=per_rank[n], lr=lr / n, iters=args.iters, device=device,
                                   backend=args.backend, extra=extra, valid_rows=args.valid_rows)
                        rows.append((str(n), args.backend, "on" if many.get("shard_tables") else "off", label,
                                     many))

    ones = sorted(m["interval_samples_per_second"][-1] for *_, c, m in rows if c == "one")
    base = ones[len(ones) // 2]      # the one-rank rate (the median of the repeats)
    table = ["| ranks | backend | tables | step | global batch | iterations | samples/s (last interval) | speed-up | "
             "peak memory per rank (GiB) | loss first → last | eval AUC | learned |",
             "|---:|---|---|---|---:|---:|---:|---:|---|---|---:|---|"]
    problems = []
    for ranks, backend, sharded, _, m in rows:
        peaks = " / ".join(f"{b / 2 ** 30:.2f}" for b in m.get("peak_memory_bytes_per_rank", []))
        sharding = m.get("sharding", {})
        split = "/".join(sorted(set(sharding.get("split", {}).values()))) if sharded == "on" else sharded
        copies = sum(len(v) for v in sharding.get("replicated", {}).values())
        split += f" + {copies} replicated" if copies else ""
        ok, losses = learned(m)
        if not ok:
            problems.append(f"{ranks} rank(s), tables {split}: did not learn (AUC {m['auc']:.4f}, loss "
                            f"{losses[0]:.4f} → {losses[-1]:.4f})")
        rate = m["interval_samples_per_second"][-1]
        table.append(f"| {ranks} | {backend} | {split} | {step_kind(m)} | {m['global_batch_size']} | "
                     f"{m['iterations']} | {rate:,.0f} | "
                     f"{rate / base:.2f}× | {peaks} | {losses[0]:.4f} → {losses[-1]:.4f} | {m['auc']:.4f} | "
                     f"{'yes' if ok else '**no**'} |")
    aucs: dict = {}
    for *_, config, m in rows:
        aucs.setdefault(config, []).append(m["auc"])
    mean = {c: sum(v) / len(v) for c, v in aucs.items()}
    diff = max(abs(mean["one"] - mean[c]) for c in mean if c != "one")
    if args.repeat > 1:
        table.append("")
        table += [f"- {'one rank' if c == 'one' else c}: AUC {min(v):.4f}–{max(v):.4f} over {len(v)} runs, mean "
                  f"{mean[c]:.4f}" for c, v in aucs.items()]
    if diff > args.tolerance:
        problems.append(f"AUC difference {diff:.4f} over the tolerance {args.tolerance}" + (
            " (one run each: a run's own AUC noise is not measured; --repeat 3 compares means)"
            if args.repeat == 1 else ""))
    verdict = "; ".join(problems) if problems else f"every run learned; AUCs within {args.tolerance} ({diff:.4f})"
    text = "\n".join(table) + f"\n\n{verdict}\n"
    report(f"{args.model} on {where}, torch {torch.__version__}", text, args.out)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
