"""How fast `ctrgen etl` runs a Criteo-shaped ETL: one process, then local Dask clusters of 1, 2 and 4 workers.

    PYTHONPATH=. python bench/etl.py [--rows 10000000] [--workers 1 2 4] [--keep DIR]
                                     [--categorical 26] [--continuous 13]

Writes synthetic Criteo-shaped parquet (label, I1-I13 heavy-tailed counts with missing values, C1-C26 8-hex-digit ids
as int64 with cardinalities from 10 to 1 M, 1 M rows per file) and a spec whose etl: section is Merlin's Criteo ETL
(Categorify C1-C26, FillMissing >> Clip(0) >> LogOp >> Normalize on I1-I13, the label as a comparison, 10 % held
out), then runs `ctrgen etl` in a fresh process per setting and prints rows per second of the ETL itself (reading,
fit, transform, writing; not the interpreter start or the input check), labelled with where ctrgen says it ran.
Outputs of every run are compared: the parquet and categories must be byte-identical whatever the number of workers.
--categorical and --continuous take fewer columns (a quick check of the script, not a Criteo measurement).

On a machine where NVTabular's GPU path (cudf, dask-cuda) is installed the same script measures it: the generated
etl.py picks LocalCUDACluster + an RMM pool by itself.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROWS_PER_FILE = 1_000_000
CONT = [f"I{i}" for i in range(1, 14)]
CATS = [f"C{i}" for i in range(1, 27)]


def write_raw(folder: Path, rows: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    # Criteo's 26 cardinalities from 10 to 1 M; fewer columns take the first ones.
    cards = np.unique(np.geomspace(10, 1_000_000, 26).astype(np.int64), return_inverse=True)[0]
    cards = np.resize(cards, len(CATS))
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for start in range(0, rows, ROWS_PER_FILE):
        n = min(ROWS_PER_FILE, rows - start)
        data = {"label": (rng.random(n) < 0.25).astype(np.int64)}
        for c in CONT:
            v = np.floor(rng.lognormal(1.0, 1.2, n))
            v[rng.random(n) < 0.1] = np.nan
            data[c] = v
        for c, card in zip(CATS, cards):
            # Zipf-like popularity over `card` ids that look like Criteo's 32-bit hashes.
            ids = np.minimum(rng.zipf(1.2, n), card) - 1
            data[c] = (ids * 2654435761 + 97) % (1 << 32)
        name = f"day_{start // ROWS_PER_FILE}.parquet"
        pd.DataFrame(data).to_parquet(folder / name, index=False)
        names.append(f"raw/{name}")
    return names


def spec_text(files: list[str]) -> str:
    columns = ", ".join([f"{c}: float64" for c in CONT] + [f"{c}: int64" for c in CATS] + ["label: int64"])
    return f"""version: 1
name: criteo_bench
hugectr_version: "23.06"
data: {{format: parquet, train: [/data/train/_file_list.txt], eval: /data/valid/_file_list.txt}}
model: {{preset: dlrm, bottom_units: [64, 16], top_units: [64]}}
embeddings: [{{name: sparse_embedding1, input: data1, embedding_type: DistributedSlotSparseEmbeddingHash,
               workspace_size_per_gpu_in_mb: 100, embedding_vec_size: 16, combiner: sum}}]
input: {{sparse: [{{name: data1, nnz_per_slot: 1, is_fixed_length: true}}]}}
etl:
  inputs:
    train: {files}
    columns: {{{columns}}}
  split: {{valid_fraction: 0.1}}
  groups:
    - {{columns: [{", ".join(CATS)}], ops: [Categorify]}}
    - {{columns: [{", ".join(CONT)}], ops: [FillMissing, {{Clip: {{min_value: 0}}}}, LogOp, Normalize]}}
    - {{columns: [label], ops: [{{LambdaOp: {{compare: ">", value: 0, dtype: int8}}}}]}}
  output: {{dir: out, out_files_per_proc: 4, shuffle: true}}
"""


def outputs_digest(out: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(out.rglob("*.parquet")):
        h.update(str(p.relative_to(out)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def run(folder: Path, workers: int | None) -> tuple[int, float, str, str]:
    """Raw rows, seconds of the ETL, where it ran (ctrgen's own words: "cpu, 1 process"), and the outputs' digest."""
    cmd = [sys.executable, "-m", "codegen", "etl", str(folder / "criteo_bench.yaml"), "--out", str(folder / "gen")]
    if workers is not None:
        cmd += ["--workers", str(workers)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if proc.returncode != 0:
        raise SystemExit(proc.stdout + proc.stderr)
    m = re.search(r"(\d+) rows in -> .* in ([0-9.]+) s \((.+)\)$", proc.stdout, re.M)
    return int(m.group(1)), float(m.group(2)), m.group(3), outputs_digest(folder / "out")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    ap.add_argument("--categorical", type=int, default=len(CATS), choices=range(1, len(CATS) + 1), metavar="1-26",
                    help="categorical columns (Criteo's 26)")
    ap.add_argument("--continuous", type=int, default=len(CONT), choices=range(1, len(CONT) + 1), metavar="1-13",
                    help="continuous columns (Criteo's 13)")
    args = ap.parse_args()
    del CATS[args.categorical:], CONT[args.continuous:]
    folder = args.keep or Path(tempfile.mkdtemp(prefix="ctrgen-etl-bench-"))
    try:
        files = write_raw(folder / "raw", args.rows)
        (folder / "criteo_bench.yaml").write_text(spec_text(files), encoding="utf-8")
        print(f"{args.rows} Criteo-shaped rows ({len(CATS)} categorical, {len(CONT)} continuous columns) in "
              f"{len(files)} file(s); {os.cpu_count()} CPU(s)")
        digests = set()
        for workers in [None, *args.workers]:
            rows, seconds, where, digest = run(folder, workers)
            digests.add(digest)
            asked = "1 process" if workers is None else f"{workers} Dask worker(s)"
            if not where.endswith(f", {asked}"):
                raise SystemExit(f"asked for {asked}, ctrgen etl ran on: {where}")
            print(f"{where:>22}: {rows / seconds:12,.0f} rows/s  ({seconds:.1f} s)")
        print("outputs byte-identical across runs:", "yes" if len(digests) == 1 else f"NO ({len(digests)} variants)")
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
