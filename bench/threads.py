"""The trainer's default CPU threads against every setting: is the default within 1.2x of the best? (issue 45)

For each model (the committed generated/<name>/train_torch.py; synthetic Parquet shaped by its features.json, as
bench/train_throughput.py writes it) and each rank count, the trainer runs on the CPU in fresh processes: once with
its default (no --threads, OMP_NUM_THREADS unset: the usable cores shared by the ranks of the machine,
codegen/runtime/threads.py) and once per --threads value in 1, 2, 4, ... up to the usable cores. The rate is the
trainer's own samples/s of its last display interval (after warm-up; one unmeasured run first), the median of
--repeats runs. A default more
than 1.2x slower than the best setting is flagged.

    python bench/threads.py                                   # dlrm and movielens, one rank
    python bench/threads.py --models dlrm --ranks 1 2 --iters 200 --out threads.md
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from train_throughput import synthesize  # noqa: E402

WITHIN = 1.2


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def settings(cores: int) -> list[int]:
    out, t = [], 1
    while t < cores:
        out.append(t)
        t *= 2
    return out + [cores]


def run(name: str, data: Path, threads: int | None, ranks: int, args: argparse.Namespace, tmp: Path) -> dict:
    """One run in a fresh process group: the trainer's samples/s of its last interval and the threads it chose."""
    out = Path(tempfile.mkdtemp(prefix=f"threads_{name}_", dir=tmp))
    script = REPO / "generated" / name / "train_torch.py"
    flags = ["--train", str(data / "train"), "--eval", str(data / "valid"), "--features",
             str(REPO / "generated" / name / "features.json"), "--max-iter", str(args.iters), "--batch-size",
             str(args.batch), "--display", str(max(args.iters // 4, 1)), "--eval-interval", str(args.iters),
             "--snapshot", "0", "--max-eval-batches", "1", "--output-dir", str(out), "--device", "cpu",
             "--no-tensorboard"]
    if threads is not None:
        flags += ["--threads", str(threads)]
    cmd = [sys.executable, str(script), *flags] if ranks == 1 else \
        [sys.executable, str(REPO / "codegen" / "train" / "torchrun.py"), "--standalone", f"--nproc_per_node={ranks}",
         str(script), *flags]
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=out)
    try:
        if proc.returncode != 0:
            raise SystemExit(f"{name} --threads {threads} ranks {ranks}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
        metrics = json.loads((out / "metrics.json").read_text())
    finally:
        shutil.rmtree(out, ignore_errors=True)
    rates = metrics.get("interval_samples_per_second") or [metrics["samples_per_second"]]
    return {"rate": rates[-1], "threads": metrics.get("threads")}


def measure(name: str, ranks: int, args: argparse.Namespace, data: Path, tmp: Path) -> list[dict]:
    cores = args.cores or usable_cores()
    per_rank = max(1, cores // ranks)
    rows = []
    run(name, data, None, ranks, args, tmp)          # warm-up: caches (bytecode, files) for every measured run
    for threads in [None, *settings(per_rank)]:
        runs = [run(name, data, threads, ranks, args, tmp) for _ in range(args.repeats)]
        rows.append({"model": name, "ranks": ranks, "asked": "default" if threads is None else str(threads),
                     "threads": runs[0]["threads"], "rate": statistics.median(r["rate"] for r in runs)})
    best = max(r["rate"] for r in rows)
    for r in rows:
        r["of_best"] = r["rate"] / best
    return rows


def table(rows: list[dict], cores: int) -> str:
    lines = [f"usable cores: {cores}", "",
             "| model | ranks | --threads | threads per rank | samples/s | of the best |",
             "|---|---:|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['ranks']} | {r['asked']} | {r['threads']} | {r['rate']:,.0f} | "
                     f"{r['of_best']:.2f} |")
    lines.append("")
    for r in rows:
        if r["asked"] == "default":
            slower = 1 / r["of_best"]
            verdict = "ok" if slower <= WITHIN else f"SLOWER than {WITHIN}x the best"
            lines.append(f"{r['model']}, {r['ranks']} rank(s): the default is {slower:.2f}x the best's time: {verdict}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["dlrm", "movielens"])
    ap.add_argument("--ranks", nargs="+", type=int, default=[1])
    ap.add_argument("--rows", type=int, default=200_000, help="synthetic training rows per model")
    ap.add_argument("--batch", type=int, default=2048, help="batch size per rank")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--cores", type=int, help="cores to plan for (default: the usable cores of this process)")
    ap.add_argument("--out", type=Path, help="also write the table here (Markdown)")
    args = ap.parse_args(argv)
    cores = args.cores or usable_cores()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="ctrgen-threads-") as tmp:
        for name in args.models:
            features = json.loads((REPO / "generated" / name / "features.json").read_text())
            data = Path(tmp) / name
            synthesize(features, args.rows, data / "train", files=2, seed=7)
            synthesize(features, max(args.rows // 10, args.batch), data / "valid", files=1, seed=7)
            for ranks in args.ranks:
                rows += measure(name, ranks, args, data, Path(tmp))
    text = table(rows, cores)
    print(text, end="")
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
