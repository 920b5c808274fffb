"""Training throughput of the generated PyTorch trainer (train_torch.py) against its plain eager loop, on one GPU.

For each model (MovieLens MLP, DLRM; ``--models families``: every sample family's spec, FAMILIES) it writes a synthetic Parquet dataset shaped by the model's features.json (the
committed generated/<name>/features.json: real cardinalities, a planted logistic signal so AUC means something),
then measures, per batch size and precision (fp32, tf32, bf16, fp16):

* generated: train_torch.py with --compile on (what auto picks for runs of 1000 steps or more): columns resident in
  GPU memory, batches gathered by a permuted index, embedding rows updated in place (where the spec's optimizer
  allows; SGD rows by the script's Triton kernels), dense layers compiled, the whole step captured as one CUDA graph;
* eager: the same script with --compile off --cuda-graph off --embedding-update dense (the spec's optimizer over
  whole tables, one kernel launch at a time from Python), the same data, steps and precision: the plain loop whose AUC
  the fast path keeps.

With --scale criteo-kaggle the DLRM tables get the 26 Criteo-Kaggle cardinalities (33.8 M rows; at vec 128, 4.3 B
parameters, the size of NVIDIA's "small" DLRM) instead of the demo lock's. A run's rate is its last display interval
(steady state, after the warm-up and the graph capture); peak GPU memory is torch's max_memory_allocated of the run.
Time to first step is measured in a fresh process (the import of torch and CUDA's start-up included) on the
validation split. Prints a table and writes it with the raw rows to --out.

    python bench/train_throughput.py                       # needs a CUDA GPU, torch, numpy, pyarrow
    python bench/train_throughput.py --models dlrm --scale criteo-kaggle --batches 65536 --out bench.md
    python bench/train_throughput.py --models families --batches 4096 --precisions bf16 --out families.md

Each row also prints the generated path's speed-up over the eager loop; issue 41 asks for at least 2x per compiled
family on one GPU, and a row below it is flagged ("below 2x").
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
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
sys.path.insert(0, str(REPO))     # the generated trainers import this checkout's runtime (codegen.runtime)
# Run outputs (model.pt of a Criteo-Kaggle-sized model is 17 GB) go to memory where there is a tmpfs, then are deleted.
SCRATCH = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
# Criteo Kaggle (display advertising challenge) categorical cardinalities C1..C26, as NVIDIA's DLRM counts them.
# HugeCTR's sample families (issue 41), each with a committed spec and generated/<name>/ (tests/test_presets_families).
FAMILIES = ["wdl", "dcn", "deepfm", "dlrm", "dlrm_mlp", "ncf", "gmf", "neumf", "din", "bst", "mmoe", "shared_bottom"]
# Continuous columns that a model reads as a sequence length (BST's SLEN feeds SequenceMask, max_sequence_len 10 in
# specs/bst.yaml): drawn as whole lengths 1..N, not as N(0, 1) values.
LENGTHS = {"SLEN": 10}
SPEED_UP = 2.0
CRITEO_KAGGLE = [1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194, 27, 14992,
                 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572]


def criteo_kaggle(features: dict) -> dict:
    """features.json with C1..C26 at the Criteo-Kaggle cardinalities (other slots, like the demo's cross, kept)."""
    out = json.loads(json.dumps(features))
    for s in out["sparse"]:
        for c in s["columns"]:
            if c["name"] in {f"C{i}" for i in range(1, 27)}:
                c["cardinality"] = CRITEO_KAGGLE[int(c["name"][1:]) - 1]
    return out


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
        if c["name"] in LENGTHS:
            x = rng.integers(1, LENGTHS[c["name"]] + 1, rows).astype(np.float32)
        else:
            x = rng.normal(0.0, 1.0, rows).astype(np.float32)
            logit += planted.normal(0.0, 0.3) * x
        columns[c["name"]] = x
    label = (rng.random(rows) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float32)
    for k, c in enumerate(features["labels"]):      # several labels (MMoE): the same logit, each its own draw
        columns[c["name"]] = label if k == 0 else (rng.random(rows) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float32)
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
                  precision: str = "fp32", extra: tuple = ()) -> dict:
    out = (SCRATCH or tmp) / f"ctrgen_run_{batch}_{fast}_{time.monotonic_ns()}"
    argv = ["--train", str(data / "train"), "--eval", str(data / "valid"), "--features", str(features_path),
            "--max-iter", str(iters), "--batch-size", str(batch), "--display", str(max(iters // 2, 1)),
            "--eval-interval", str(iters), "--snapshot", "0", "--eval-batch-size", "65536",
            "--max-eval-batches", "6", "--output-dir", str(out), "--device", "cuda", "--precision", precision,
            *extra]
    argv += ["--compile", "on"] if fast else ["--compile", "off", "--cuda-graph", "off", "--embedding-update", "dense"]
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    try:
        assert module.main(argv) == 0
        # under torchrun only rank 0 writes metrics.json
        metrics = json.loads((out / "metrics.json").read_text()) if (out / "metrics.json").exists() else {}
    finally:
        shutil.rmtree(out, ignore_errors=True)
    metrics["peak_gib"] = torch.cuda.max_memory_allocated() / 2 ** 30
    return metrics


def first_step(name: str, features_path: Path, data: Path, precision: str, tmp: Path) -> dict:
    """Start-up of a fresh process: train_torch.py's own timings (import, build, data load, first step)."""
    out = (SCRATCH or tmp) / f"ctrgen_startup_{name}_{time.monotonic_ns()}"
    cmd = [sys.executable, str(REPO / "generated" / name / "train_torch.py"), "--train", str(data / "valid"),
           "--eval", str(data / "valid"), "--features", str(features_path), "--max-iter", "5", "--batch-size",
           "2048", "--display", "5", "--eval-interval", "5", "--snapshot", "0", "--max-eval-batches", "1",
           "--output-dir", str(out), "--device", "cuda", "--precision", precision]
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.returncode == 0, proc.stderr[-2000:]
        startup = json.loads((out / "metrics.json").read_text())["startup"]
    finally:
        shutil.rmtree(out, ignore_errors=True)
    startup["process_s"] = round(time.perf_counter() - started, 3)
    return startup


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
    ap.add_argument("--models", nargs="+", default=["movielens", "dlrm"],
                    help="generated/<name>/ models; 'families': every sample family (FAMILIES)")
    ap.add_argument("--scale", choices=("demo", "criteo-kaggle"), default="demo",
                    help="DLRM tables: the demo lock's cardinalities, or Criteo Kaggle's (33.8 M rows)")
    ap.add_argument("--batches", nargs="+", type=int, default=[2048, 65536])
    ap.add_argument("--precisions", nargs="+", default=["fp32", "tf32", "bf16"],
                    choices=("fp32", "tf32", "bf16", "fp16"))
    ap.add_argument("--rows", type=int, default=4_000_000, help="synthetic training rows per model")
    ap.add_argument("--samples", type=float, default=20e6, help="samples per run (MovieLens; DLRM --dlrm-samples)")
    ap.add_argument("--dlrm-samples", type=float, default=8e6, help="samples per DLRM run")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--stream", action="store_true", help="also run the generated path with --data-on stream")
    ap.add_argument("--no-startup", action="store_true", help="skip the fresh-process time to first step")
    ap.add_argument("--no-eager", action="store_true", help="skip the eager loop")
    ap.add_argument("--dataloader", action="store_true", help="also time a torch DataLoader loop (slow)")
    ap.add_argument("--plain-steps", type=int, default=30)
    ap.add_argument("--out", type=Path, help="write the table here (Markdown)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("error: this benchmark needs a CUDA GPU", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name(0)
    rows_out = []
    with tempfile.TemporaryDirectory(prefix="ctrgen-bench-") as tmp_name:
        tmp = Path(tmp_name)
        models = [m for name in args.models for m in (FAMILIES if name == "families" else [name])]
        for name in models:
            module, features_path = load_trainer(name)
            features = json.loads(features_path.read_text())
            label = name
            if name == "dlrm" and args.scale == "criteo-kaggle":
                features = criteo_kaggle(features)
                features_path = tmp / "dlrm_criteo_kaggle.json"
                features_path.write_text(json.dumps(features))
                label = "dlrm (criteo-kaggle)"
            data = tmp / name
            started = time.perf_counter()
            ceiling = synthesize(features, args.rows, data / "train", files=4, seed=1)
            synthesize(features, 400_000, data / "valid", files=1, seed=1)  # same seed: same planted weights
            table_rows = sum(c["cardinality"] for s in features["sparse"] for c in s["columns"])
            print(f"{label}: {args.rows:,} synthetic rows in {time.perf_counter() - started:.0f} s, tables "
                  f"{table_rows:,} rows (planted AUC ceiling {ceiling:.4f})", flush=True)
            startup = None if args.no_startup else first_step(name, features_path, data, args.precisions[0], tmp)
            print(f"  time to first step (fresh process, {args.precisions[0]}): {startup}", flush=True)
            budget = args.samples if name == "movielens" else args.dlrm_samples
            for batch in args.batches:
                iters = max(int(budget / batch), 60)
                for precision in args.precisions:
                    fast = [run_generated(module, features_path, data, batch, iters, True, tmp, precision)
                            for _ in range(args.repeats)]
                    eager = None if args.no_eager else run_generated(module, features_path, data, batch, iters,
                                                                     False, tmp, precision)
                    row = {"model": label, "batch": batch, "precision": precision, "iters": iters,
                           "fast": statistics.median(m["interval_samples_per_second"][-1] for m in fast),
                           "fast_auc": fast[-1]["auc"], "graph": fast[-1]["cuda_graph"],
                           "update": fast[-1]["embedding_update"], "peak_gib": fast[-1]["peak_gib"],
                           "compile_s": fast[-1]["startup"].get("compile_s"),
                           "eager": eager and eager["interval_samples_per_second"][-1],
                           "eager_auc": eager and eager["auc"], "eager_peak_gib": eager and eager["peak_gib"],
                           "startup": startup}
                    row["speed_up"] = row["eager"] and row["fast"] / row["eager"]
                    rows_out.append(row)
                    print(f"  batch {batch} {precision}: generated {row['fast'] / 1e6:.2f} M/s (AUC "
                          f"{row['fast_auc']:.4f}, {row['peak_gib']:.1f} GiB, {iters} iters, {row['update']} "
                          f"tables, compile + first step {row['compile_s']} s"
                          f"), eager " + (f"{row['eager'] / 1e6:.2f} M/s (AUC {row['eager_auc']:.4f}, "
                                                f"{row['eager_peak_gib']:.1f} GiB)" if eager else "skipped")
                          + (f", {row['speed_up']:.2f}x" + (f" (below {SPEED_UP:g}x)" if row["speed_up"] < SPEED_UP
                                                             else "") if eager else ""), flush=True)
                    if args.stream and precision == args.precisions[-1]:
                        streamed = run_generated(module, features_path, data, batch, iters, True, tmp, precision,
                                                 ("--data-on", "stream"))
                        row.update(stream=streamed["interval_samples_per_second"][-1], stream_auc=streamed["auc"])
                        print(f"  batch {batch} {precision}: --data-on stream {row['stream'] / 1e6:.2f} M/s (AUC "
                              f"{row['stream_auc']:.4f})", flush=True)
                    if args.dataloader:
                        row["dataloader"] = run_plain(module, features, data, batch, args.plain_steps, name)
    table = ["| model | batch | precision | generated (M samples/s) | AUC | peak GiB | eager loop (M/s) | its AUC | "
             "its peak GiB | speed-up |", "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows_out:
        eager = (f"{r['eager'] / 1e6:.2f} | {r['eager_auc']:.4f} | {r['eager_peak_gib']:.1f} | "
                 f"{r['speed_up']:.2f}x" + (f" (below {SPEED_UP:g}x)" if r["speed_up"] < SPEED_UP else "") if r["eager"]
                 else "- | - | - | -")
        table.append(f"| {r['model']} | {r['batch']} | {r['precision']} | {r['fast'] / 1e6:.2f} | "
                     f"{r['fast_auc']:.4f} | {r['peak_gib']:.1f} | {eager} |")
    table += [f"\n--data-on stream, {r['model']}, batch {r['batch']}, {r['precision']}: {r['stream'] / 1e6:.2f} M "
              f"samples/s (AUC {r['stream_auc']:.4f}) against {r['fast'] / 1e6:.2f} M resident" for r in rows_out
              if "stream" in r]
    text = "\n".join(table)
    print(f"\nGPU: {gpu}, torch {torch.__version__}\n{text}")
    if args.out:
        args.out.write_text(f"GPU: {gpu}, torch {torch.__version__}, median of {args.repeats} run(s)\n\n{text}\n"
                            + json.dumps(rows_out) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
