"""Time to first step of the generated trainer, each run a fresh process (issue 16: within 3 s of process start).

    python bench/first_step.py                                   # dlrm and movielens on cuda, 3 runs each
    python bench/first_step.py --bytecode-cache /tmp/pyc --runs 4 --precision bf16

Writes 8,000 synthetic training rows and 2,000 evaluation rows per model (bench/train_throughput.py's planted
signal, the committed generated/<name>/features.json), then starts generated/<name>/train_torch.py --max-iter 5
--runs times per model and prints what its metrics.json records under `startup`: import, model build, data load,
optimizer and first step, and the time to first step, counted from the script's first line (the interpreter's own
start is before it), plus the wall time of the whole process. --bytecode-cache DIR lets Python write the bytecode it
compiles into DIR (PYTHONPYCACHEPREFIX): an installation without .pyc files (PYTHONDONTWRITEBYTECODE set, or a
read-only site-packages) compiles torch from source in every process; pip writes them at install time. The first
run then writes them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PHASES = ("import_s", "build_s", "data_load_s", "optimizer_s", "first_step_s", "time_to_first_step_s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["dlrm", "movielens"])
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per model")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--precision", default="fp32", choices=("fp32", "tf32", "bf16", "fp16"))
    ap.add_argument("--bytecode-cache", type=Path, help="let Python write bytecode there (PYTHONPYCACHEPREFIX)")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "bench"))
    from train_throughput import synthesize

    env = {**os.environ, "PYTHONPATH": str(REPO)}   # the runtime of this checkout (codegen.runtime)
    if args.bytecode_cache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(args.bytecode_cache)
    print("| model | run | " + " | ".join(p.removesuffix("_s").replace("_", " ") for p in PHASES)
          + " | process |\n|---|---:|" + "---:|" * (len(PHASES) + 1))
    with tempfile.TemporaryDirectory(prefix="ctrgen-first-step-") as tmp_name:
        tmp = Path(tmp_name)
        for name in args.models:
            features = json.loads((REPO / "generated" / name / "features.json").read_text())
            synthesize(features, 8000, tmp / name / "train", files=1, seed=1)
            synthesize(features, 2000, tmp / name / "valid", files=1, seed=1)
            for run in range(1, args.runs + 1):
                out = tmp / f"out_{name}"
                cmd = [sys.executable, str(REPO / "generated" / name / "train_torch.py"), "--train",
                       str(tmp / name / "train"), "--eval", str(tmp / name / "valid"), "--max-iter", "5",
                       "--batch-size", "2048", "--display", "5", "--eval-interval", "5", "--snapshot", "0",
                       "--max-eval-batches", "1", "--output-dir", str(out), "--device", args.device,
                       "--precision", args.precision]
                started = time.perf_counter()
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
                wall = time.perf_counter() - started
                if proc.returncode != 0:
                    print(f"error: {name} run {run} exited {proc.returncode}:\n{proc.stderr[-2000:]}", file=sys.stderr)
                    return 1
                startup = json.loads((out / "metrics.json").read_text())["startup"]
                shutil.rmtree(out)
                print(f"| {name} | {run} | " + " | ".join(f"{startup[p]:.2f}" for p in PHASES) + f" | {wall:.2f} |",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
