"""Training throughput of the generated PyTorch trainer (train_torch.py) against a plain PyTorch loop, on one GPU.

For each model (MovieLens MLP, DLRM) it writes a synthetic Parquet dataset shaped by the model's features.json (the
committed generated/<name>/features.json: real cardinalities, a planted logistic signal so AUC means something),
then measures samples/s at several batch sizes:

* generated, fast: train_torch.py as shipped: columns resident in GPU memory, batches gathered by a permuted index,
  the whole step captured as one CUDA graph, fused optimizer;
* generated, unoptimized: the same script with --cuda-graph off --data-on host (eager step, batch gathered on the
  host and copied per step): the plain loop whose AUC the fast path must keep;
* plain PyTorch: torch.utils.data.DataLoader over the same Parquet rows (TensorDataset, shuffle), one nn.Embedding
  per slot, the same MLP (MovieLens), or the generated Model (DLRM), eager Adam/SGD.

Each figure is the median of --repeats runs; a run's rate is its last display interval (steady state, after the
warm-up and the graph capture). Prints a table and writes it to --out (docs/benchmarks.md) with the GPU's name.

    python bench/train_throughput.py                       # needs a CUDA GPU, torch, numpy, pyarrow
    python bench/train_throughput.py --batches 2048 65536 --repeats 3 --out docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
import torch.nn as nn
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[1]


def load_trainer(name: str):
    path = REPO / "generated" / name / "train_torch.py"
    spec = importlib.util.spec_from_file_location(f"train_torch_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path.with_name("features.json")


def synthesize(features: dict, rows: int, out: Path, files: int, seed: int) -> float:
    """Write `files` Parquet parts of `rows` rows; labels follow a planted logistic model. Returns its AUC ceiling."""
    planted = np.random.default_rng(seed)              # the same weights for every split
    rng = np.random.default_rng([seed, rows])
    logit = np.full(rows, -0.3)
    columns: dict[str, np.ndarray] = {}
    for s in features["sparse"]:
        for c in s["columns"]:
            card = c["cardinality"]
            ids = np.minimum((card * rng.random(rows) ** 2).astype(np.int64), card - 1)   # popular ids first
            weight = planted.normal(0.0, 0.8, card).astype(np.float32)
            logit += weight[ids]
            columns[c["name"]] = ids
    for c in features["continuous"]:
        x = rng.normal(0.0, 1.0, rows).astype(np.float32)
        logit += planted.normal(0.0, 0.3) * x
        columns[c["name"]] = x
    label = (rng.random(rows) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float32)
    columns[features["labels"][0]["name"]] = label
    out.mkdir(parents=True, exist_ok=True)
    bounds = np.linspace(0, rows, files + 1).astype(int)
    for i in range(files):
        part = {k: v[bounds[i]:bounds[i + 1]] for k, v in columns.items()}
        pq.write_table(pa.table(part), out / f"part_{i}.parquet")
    order = np.argsort(logit)
    ranks = np.empty(rows)
    ranks[order] = np.arange(1, rows + 1)
    pos = label.sum()
    return float((ranks[label > 0.5].sum() - pos * (pos + 1) / 2) / (pos * (rows - pos)))


def run_generated(module, features_path: Path, data: Path, batch: int, iters: int, fast: bool, tmp: Path,
                  tf32: bool = False) -> dict:
    out = tmp / f"run_{batch}_{fast}_{time.monotonic_ns()}"
    argv = ["--train", str(data / "train"), "--eval", str(data / "valid"), "--features", str(features_path),
            "--max-iter", str(iters), "--batch-size", str(batch), "--display", str(max(iters // 2, 1)),
            "--eval-interval", str(iters), "--snapshot", "0", "--eval-batch-size", "65536",
            "--max-eval-batches", "8", "--output-dir", str(out), "--device", "cuda"]
    if not fast:
        argv += ["--cuda-graph", "off", "--data-on", "host"]
    if tf32:
        argv += ["--tf32", "on"]
    assert module.main(argv) == 0
    return json.loads((out / "metrics.json").read_text())


class PlainModel(nn.Module):
    """One nn.Embedding per slot, concatenated with the dense features, then the MLP widths of the generated model."""

    def __init__(self, cards: list[int], vec: int, n_dense: int, units: list[int]):
        super().__init__()
        self.tables = nn.ModuleList(nn.Embedding(c, vec) for c in cards)
        layers, width = [], len(cards) * vec + n_dense
        for u in units:
            layers += [nn.Linear(width, u), nn.ReLU()]
            width = u
        self.mlp = nn.Sequential(*layers, nn.Linear(width, 1))

    def forward(self, dense, ids):
        return self.mlp(torch.cat([t(ids[:, i]) for i, t in enumerate(self.tables)] + [dense], dim=1))


def run_plain(module, features: dict, data: Path, batch: int, steps: int, name: str) -> float:
    """torch DataLoader over the Parquet rows; returns samples/s over `steps` steps after 2 warm-up steps."""
    frames = [pq.read_table(f).to_pandas() for f in sorted((data / "train").glob("*.parquet"))]
    import pandas as pd
    frame = pd.concat(frames, ignore_index=True)
    slots = [c["name"] for s in features["sparse"] for c in s["columns"]]
    dense_cols = [c["name"] for c in features["continuous"]]
    ids = torch.from_numpy(frame[slots].to_numpy(np.int64))
    dense = torch.from_numpy(frame[dense_cols].to_numpy(np.float32)) if dense_cols else torch.zeros(len(frame), 0)
    label = torch.from_numpy(frame[[features["labels"][0]["name"]]].to_numpy(np.float32))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(dense, ids, label), batch_size=batch,
                                         shuffle=True, drop_last=True)
    device = torch.device("cuda")
    if name == "movielens":
        generated = module.Model(features)
        units = [m.out_features for m in generated.modules() if isinstance(m, nn.Linear)][:-1]
        vec = next(m for m in generated.modules() if isinstance(m, module.SparseEmbedding)).weight.shape[1]
        model = PlainModel([c["cardinality"] for s in features["sparse"] for c in s["columns"]], vec,
                           len(dense_cols), units).to(device)
        forward = lambda d, i: model(d, i)  # noqa: E731
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    else:
        model = module.Model(features).to(device)
        forward = lambda d, i: model(d, i[:, :, None])  # noqa: E731
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    done, start = 0, None
    while done < steps + 2:
        for d, i, y in loader:
            if done == 2:
                torch.cuda.synchronize()
                start = time.perf_counter()
            d, i, y = d.to(device), i.to(device), y.to(device)
            optimizer.zero_grad()
            F.binary_cross_entropy_with_logits(forward(d, i), y).backward()
            optimizer.step()
            done += 1
            if done == steps + 2:
                break
    torch.cuda.synchronize()
    return steps * batch / (time.perf_counter() - start)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["movielens", "dlrm"])
    ap.add_argument("--batches", nargs="+", type=int, default=[2048, 8192, 65536])
    ap.add_argument("--rows", type=int, default=8_000_000, help="synthetic training rows per model")
    ap.add_argument("--samples", type=float, default=40e6, help="samples per fast run (MovieLens; DLRM a tenth)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--plain-steps", type=int, default=30)
    ap.add_argument("--tf32", action="store_true", help="pass --tf32 on to the generated trainer")
    ap.add_argument("--out", type=Path, help="write the table here (Markdown)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("error: this benchmark needs a CUDA GPU", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name(0)
    rows_out = []
    with tempfile.TemporaryDirectory(prefix="ctrgen-bench-") as tmp_name:
        tmp = Path(tmp_name)
        for name in args.models:
            module, features_path = load_trainer(name)
            features = json.loads(features_path.read_text())
            data = tmp / name
            ceiling = synthesize(features, args.rows, data / "train", files=4, seed=1)
            synthesize(features, 400_000, data / "valid", files=1, seed=1)  # same seed: same planted weights
            print(f"{name}: {args.rows:,} synthetic rows (planted AUC ceiling {ceiling:.4f})", flush=True)
            budget = args.samples if name == "movielens" else args.samples / 10
            for batch in args.batches:
                iters = max(int(budget / batch), 40)
                fast = [run_generated(module, features_path, data, batch, iters, True, tmp, args.tf32)
                        for _ in range(args.repeats)]
                slow = run_generated(module, features_path, data, batch, iters, False, tmp, args.tf32)
                plain = run_plain(module, features, data, batch, args.plain_steps if batch < 65536 else 10, name)
                row = {"model": name, "batch": batch,
                       "fast": statistics.median(m["interval_samples_per_second"][-1] for m in fast),
                       "fast_auc": fast[-1]["auc"], "graph": fast[-1]["cuda_graph"],
                       "slow": slow["interval_samples_per_second"][-1], "slow_auc": slow["auc"], "plain": plain,
                       "iters": iters}
                rows_out.append(row)
                print(f"  batch {batch}: generated {row['fast'] / 1e6:.2f} M/s (AUC {row['fast_auc']:.4f}, "
                      f"{iters} iters), unoptimized {row['slow'] / 1e6:.2f} M/s (AUC {row['slow_auc']:.4f}, "
                      f"same iters), plain DataLoader {plain / 1e6:.3f} M/s", flush=True)
    table = ["| model | batch | generated (M samples/s) | AUC | unoptimized loop (M/s) | its AUC | "
             "plain DataLoader (M/s) |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows_out:
        table.append(f"| {r['model']} | {r['batch']} | {r['fast'] / 1e6:.2f} | {r['fast_auc']:.4f} | "
                     f"{r['slow'] / 1e6:.2f} | {r['slow_auc']:.4f} | {r['plain'] / 1e6:.3f} |")
    text = "\n".join(table)
    print(f"\nGPU: {gpu}, torch {torch.__version__}\n{text}")
    if args.out:
        args.out.write_text(f"GPU: {gpu}, torch {torch.__version__}, median of {args.repeats} runs, TF32 {'on' if args.tf32 else 'off'}\n\n{text}\n"
                            + json.dumps(rows_out) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
