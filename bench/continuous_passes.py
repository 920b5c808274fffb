"""Continuous-training passes of the generated train_torch.py on a GPU (or the CPU): sparse updates and resuming.

Synthesizes two passes of data shaped by generated/<model>/features.json (few rows, so each pass misses many
embedding rows), then trains them twice: pass by pass in two processes (the second resumes from pass_1.pt) and
both in one process. Prints, per embedding table, how many rows pass 2 looks up, how many of those changed, how
many rows outside pass 2 moved (must be 0: sparse gradients, optimizers without a dense state), and the largest
difference between the resumed and the uninterrupted weights (must be 0: per-pass shuffle seeds, the optimizer state
and the CPU and GPU random states are saved), with each run's samples/s and AUC. Exit status 1 when any of these fails.

    python bench/continuous_passes.py                       # wdl_continuous_etc on the GPU
    python bench/continuous_passes.py --device cpu

tests/test_torch_continuous.py checks the same on the CPU with the demo's NVTabular output; this script is its GPU
counterpart (it found that dropout's GPU random state was not checkpointed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_throughput import REPO, load_trainer, synthesize  # noqa: E402  (bench/ is a folder of scripts, not a package)


def train(script: Path, out: Path, passes: list[Path], valid: Path, args, *extra: str) -> str:
    cmd = [sys.executable, str(script), "--device", args.device, "--epochs", "1", "--batch-size", str(args.batch),
           "--display", "1000000", "--eval-interval", "1000000", "--output-dir", str(out), "--snapshot", "0"]
    for folder in passes:
        cmd += ["--pass-train", str(folder), "--pass-eval", str(valid)]
    proc = subprocess.run(cmd + list(extra), capture_output=True, text=True,
                          env={**os.environ, "PYTHONHASHSEED": "0",   # this checkout's runtime, installed or not
                               "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", ""))
                                                             if p)})
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-2000:] + proc.stderr[-4000:])
        raise SystemExit(f"error: {script.name} {' '.join(extra)} exited with {proc.returncode}")
    return proc.stdout


def table_rows(folder: Path, features: dict) -> dict[str, np.ndarray]:
    """Per sparse input, the table rows a pass looks up: each id plus the cardinalities of its slot's predecessors."""
    out = {}
    for s in features["sparse"]:
        offsets = np.concatenate([[0], np.cumsum([c["cardinality"] for c in s["columns"]])[:-1]])
        tables = [pq.read_table(f) for f in sorted(folder.glob("*.parquet"))]
        out[s["input"]] = np.unique(np.concatenate([t.column(c["name"]).to_numpy().astype(np.int64) + off
                                                    for t in tables for c, off in zip(s["columns"], offsets)]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="wdl_continuous_etc", help="a generated/<model>/ with continuous passes")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--rows", type=int, default=4096, help="training rows per pass")
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()
    script = REPO / "generated" / args.model / "train_torch.py"
    features = json.loads(script.with_name("features.json").read_text())
    where = torch.cuda.get_device_name(0) if args.device == "cuda" else "CPU"

    with tempfile.TemporaryDirectory(prefix="ctrgen-passes-") as tmp_name:
        tmp = Path(tmp_name)
        # One draw split in two: the passes share the planted model but not their rare ids.
        synthesize(features, 2 * args.rows, tmp / "all", files=2, seed=3)
        passes = []
        for k, part in enumerate(sorted((tmp / "all").glob("*.parquet"))):
            (tmp / f"pass{k + 1}").mkdir()
            passes.append(part.rename(tmp / f"pass{k + 1}" / "part_0.parquet").parent)
        synthesize(features, 8192, tmp / "valid", files=1, seed=3)
        train(script, tmp / "stepwise", passes, tmp / "valid", args, "--passes", "1")
        log = train(script, tmp / "stepwise", passes, tmp / "valid", args, "--passes", "2")
        train(script, tmp / "whole", passes, tmp / "valid", args)
        load = lambda p: torch.load(p, map_location="cpu", weights_only=False)  # noqa: E731
        after1, after2 = load(tmp / "stepwise" / "pass_1.pt"), load(tmp / "stepwise" / "pass_2.pt")
        whole = load(tmp / "whole" / "pass_2.pt")
        metrics = json.loads((tmp / "whole" / "metrics.json").read_text())
        rows2 = table_rows(passes[1], features)

    print(f"{args.model} on {where}, torch {torch.__version__}: 2 passes of {args.rows:,} rows, batch {args.batch}")
    print(next(line for line in log.splitlines() if line.startswith("resumed from")))
    print("| table | rows | rows in pass 2 | of those changed | rows outside pass 2 that moved |")
    print("|---|---:|---:|---:|---:|")
    ok = True
    module, _ = load_trainer(args.model)
    tables = [n for n, m in module.Model(features).named_modules() if isinstance(m, module.SparseEmbedding)]
    by_size = {sum(c["cardinality"] for c in s["columns"]) + 1: s["input"] for s in features["sparse"]}
    assert len(by_size) == len(features["sparse"]), "two sparse inputs with tables of one size"
    for name in tables:
        w1, w2 = after1["model"][f"{name}.weight"], after2["model"][f"{name}.weight"]
        rows = rows2[by_size[w1.shape[0]]]
        in2 = torch.zeros(w1.shape[0], dtype=torch.bool)
        in2[torch.from_numpy(rows)] = True
        changed = (w1 != w2).any(dim=1)
        moved = int(changed[~in2].sum())
        unchanged = int((~changed[in2]).sum())
        ok = ok and moved == 0 and unchanged == 0
        print(f"| {name} | {w1.shape[0]:,} | {int(in2.sum()):,} | {int(in2.sum()) - unchanged:,} | {moved} |")
    diff = max(float((whole["model"][k].double() - v.double()).abs().max()) for k, v in after2["model"].items()
               if v.is_floating_point())
    print(f"resumed vs uninterrupted, largest weight difference: {diff:.3g}")
    ok = ok and diff == 0
    for p in metrics["passes"]:
        print(f"pass {p['pass']}: iteration {p['iteration']}, eval AUC {p['auc']}")
    print(f"samples/s (uninterrupted run): {metrics['samples_per_second']:,.0f}")
    print("ok" if ok else "FAILED: rows outside pass 2 moved, rows of pass 2 did not, or resuming differs")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
