"""Where a training step of the generated trainer spends its GPU time: torch.profiler over a run, kernels per step.

    python bench/profile_step.py --model movielens --batch 65536 --precision fp32
    python bench/profile_step.py --model dlrm --batch 65536 --precision bf16 --top 40 --compile-mode max-autotune
    torchrun --nproc_per_node 2 bench/profile_step.py --model dlrm --scale criteo-kaggle --batch 32768 --precision bf16
    torchrun --nproc_per_node 2 bench/profile_step.py --model dlrm --scale criteo-kaggle --batch 32768 --precision bf16 \
        --window 200:250 --timeline       # per step: compute, NCCL, NCCL with nothing beside it, idle
    python bench/profile_step.py --model dlrm --scale criteo-kaggle --batch 32768 --precision bf16 --mirror-ranks 2 \
        --no-profile -- --table-split tables --replicate-rows 32768    # one GPU: a rank of 2, transfers free

Under torchrun every rank trains (its own copy of the synthetic rows) and rank 0 prints. With --mirror-ranks N one
process on one GPU is rank 0 of N whose peers mirror it (bench/mirror_ranks.py): it computes what a rank of N
computes at --batch a rank, and no collective moves data or runs an NCCL kernel, so its rate (N x --batch a step)
is what N GPUs would reach if every transfer were free and hidden: the compute bound of the speed-up.

Writes synthetic rows (bench/train_throughput.py's planted signal) for generated/<model>/features.json, runs the
committed train_torch.py in this process (--compile on, the path bench/train_throughput.py measures) under
torch.profiler, and prints the run's rate and the GPU kernels sorted by their time per step (the run's total
divided by its steps: compile, capture and evaluation are in the total but amortised over --iters steps).
--compile-mode passes a mode to torch.compile (an experiment: the trainer itself uses the default mode).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="movielens")
    ap.add_argument("--batch", type=int, default=65536)
    ap.add_argument("--precision", default="fp32", choices=("fp32", "tf32", "bf16", "fp16"))
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--trainer", type=Path,
                    help="another train_torch.py of the same model (default: generated/<model>/train_torch.py)")
    ap.add_argument("--compile-mode", help="torch.compile mode for the dense layers (default: torch's default)")
    ap.add_argument("--no-profile", action="store_true", help="only the rate")
    ap.add_argument("--by-op", action="store_true",
                    help="group GPU time by the operator that launched it and its input shapes (add -- --cuda-graph "
                         "off: a replayed graph has no operators)")
    ap.add_argument("--scale", choices=("demo", "criteo-kaggle"), default="demo",
                    help="criteo-kaggle: DLRM's tables at the Criteo-Kaggle cardinalities")
    ap.add_argument("--window", metavar="A:B",
                    help="profile only training steps A+1 to B (after compiling, capturing and warming up; the "
                         "times are then per step of the window, without evaluation or the checkpoint)")
    ap.add_argument("--timeline", action="store_true",
                    help="with --window: per step, the time some compute kernel runs, the time NCCL's kernels run and "
                         "how much of it no compute kernel runs beside (the transfers the step waits for), and idle "
                         "time (from the profiler's trace of kernels on every stream)")
    ap.add_argument("--mirror-ranks", type=int, metavar="N",
                    help="one process, rank 0 of N mirror ranks (bench/mirror_ranks.py): the compute of a rank of N "
                         "on one GPU, with transfers free (not under torchrun)")
    ap.add_argument("--slot-order", action="store_true",
                    help="an experiment on several ranks: sharded tables yield their slots in slot order (the "
                         "trainer's take_shard_orders off), for an A/B of that change")
    ap.add_argument("extra", nargs="*", help="more train_torch.py arguments (after --)")
    args = ap.parse_args()
    if args.timeline and not args.window:
        ap.error("--timeline needs --window A:B (the steps to lay out)")
    if args.mirror_ranks is not None and (args.mirror_ranks < 2 or "WORLD_SIZE" in os.environ):
        ap.error("--mirror-ranks N: N at least 2, and one process (not under torchrun)")
    if not torch.cuda.is_available():
        print("error: this benchmark needs a CUDA GPU", file=sys.stderr)
        return 2
    sys.path.insert(0, str(REPO / "bench"))

    from train_throughput import criteo_kaggle, load_trainer, run_generated, synthesize
    quiet = int(os.environ.get("RANK", "0")) != 0

    if args.compile_mode:
        torch.compile = functools.partial(torch.compile, mode=args.compile_mode)
    if args.mirror_ranks:
        import mirror_ranks
        mirror_ranks.install(args.mirror_ranks)
    if args.slot_order:
        from codegen.runtime import trainer
        trainer.take_shard_orders = lambda model: []
    module, features_path = load_trainer(args.model)
    if args.trainer:
        import importlib.util
        spec = importlib.util.spec_from_file_location("train_torch_other", args.trainer)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    import json
    features = json.loads(features_path.read_text())
    with tempfile.TemporaryDirectory(prefix="ctrgen-profile-") as tmp_name:
        tmp = Path(tmp_name)
        if args.scale == "criteo-kaggle":
            features = criteo_kaggle(features)
            features_path = tmp / "features.json"
            features_path.write_text(json.dumps(features))
        synthesize(features, args.rows, tmp / "data" / "train", files=4, seed=1)
        synthesize(features, 200_000, tmp / "data" / "valid", files=1, seed=1)
        run = functools.partial(run_generated, module, features_path, tmp / "data", args.batch, args.iters, True,
                                tmp, args.precision, tuple(args.extra))
        if args.no_profile:
            metrics = run()
        else:
            activities = [torch.profiler.ProfilerActivity.CUDA]
            if args.by_op:
                activities.append(torch.profiler.ProfilerActivity.CPU)
            prof = torch.profiler.profile(activities=activities, record_shapes=args.by_op)
            if args.window:
                steps = window_steps(prof, args.window)
                metrics = run()
                torch.cuda.synchronize()
            else:
                steps = args.iters
                with prof:
                    metrics = run()
    if quiet:
        return 0
    rate = metrics["interval_samples_per_second"][-1]
    print(f"{args.model} batch {args.batch} {args.precision} mode {args.compile_mode or 'default'}: "
          f"{rate / 1e6:.2f} M samples/s = {metrics['global_batch_size'] / rate * 1e3:.3f} ms a step (last display "
          "interval; the rate and the batch of every rank together), "
          f"AUC {metrics['auc']:.4f}, graph {metrics['cuda_graph']}, tables {metrics['embedding_update']}")
    if args.no_profile:
        return 0
    if args.timeline:
        with tempfile.TemporaryDirectory(prefix="ctrgen-trace-") as tmp_name:
            trace_path = Path(tmp_name) / "trace.json"
            prof.export_chrome_trace(str(trace_path))
            parts = timeline(json.loads(trace_path.read_text()), steps)
        print(f"timeline of a step (us): span {parts['span']:.1f}; compute kernels {parts['compute']:.1f}; NCCL "
              f"kernels {parts['nccl']:.1f}, of which {parts['nccl_alone']:.1f} with no compute kernel running; "
              f"no kernel {parts['idle']:.1f}")
    events = [e for e in prof.key_averages(group_by_input_shape=args.by_op) if e.device_time_total > 0]
    if args.by_op:   # operators only: their time includes the kernels they launched
        events = [e for e in events if e.key.startswith("aten::")]
    events.sort(key=lambda e: -e.device_time_total)
    total = sum(e.device_time_total for e in events)
    print(f"GPU time {total / steps:.1f} us a step over {steps} steps; top kernels (us a step, calls a step):")
    for e in events[:args.top]:
        shapes = f" {e.input_shapes}"[:120] if args.by_op else ""
        print(f"  {e.device_time_total / steps:8.1f}  {e.count / steps:6.2f}  {e.key[:110]}{shapes}")
    return 0


def _merged(intervals: list) -> list:
    out: list = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


def _overlap(a: list, b: list) -> float:
    """Time covered by both of two merged interval lists."""
    i = j = 0
    both = 0.0
    while i < len(a) and j < len(b):
        both += max(0.0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return both


def timeline(trace: dict, steps: int) -> dict:
    """Per step (us), from a chrome trace of one process's GPU work: the span from the first kernel's start to the
    last one's end; the time at least one compute kernel (or copy, or fill) runs; the time at least one NCCL kernel
    runs, and the part of it with no compute kernel running (transfers the step waits for, or that nothing else
    could fill); the time no kernel runs."""
    work = [e for e in trace.get("traceEvents", [])
            if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    if not work:
        return dict.fromkeys(("span", "compute", "nccl", "nccl_alone", "idle"), 0.0)
    nccl = _merged([(e["ts"], e["ts"] + e["dur"]) for e in work if e["name"].startswith("nccl")])
    compute = _merged([(e["ts"], e["ts"] + e["dur"]) for e in work if not e["name"].startswith("nccl")])
    span = max(e["ts"] + e["dur"] for e in work) - min(e["ts"] for e in work)
    busy_compute = sum(end - start for start, end in compute)
    busy_nccl = sum(end - start for start, end in nccl)
    both = _overlap(compute, nccl)
    parts = {"span": span, "compute": busy_compute, "nccl": busy_nccl, "nccl_alone": busy_nccl - both,
             "idle": span - (busy_compute + busy_nccl - both)}
    return {key: value / steps for key, value in parts.items()}


def window_steps(prof, window: str) -> int:
    """Start the profiler before training step A+1 and stop it after step B (the trainer's Step, patched)."""
    from codegen.runtime import trainer
    first, last = (int(x) for x in window.split(":"))
    step, calls = trainer.Step.__call__, [0]

    def profiled(self, index):
        calls[0] += 1
        if calls[0] == first + 1:
            torch.cuda.synchronize()
            prof.start()
        step(self, index)
        if calls[0] == last:
            torch.cuda.synchronize()
            prof.stop()

    trainer.Step.__call__ = profiled
    return last - first


if __name__ == "__main__":
    sys.exit(main())
