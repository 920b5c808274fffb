"""The command line of a generated trainer (defaults from the spec)."""

from __future__ import annotations

import argparse
import difflib
import os
from pathlib import Path

from .contract import FEATURES_FILE
from .early_stop import parse_early_stop
from .errors import DataError
from .job import Job
from .precision import PRECISIONS


def parse_args(job: Job, script: str, argv=None) -> argparse.Namespace:
    """The run's settings: the spec's defaults (``job``) unless the command line says otherwise; ``script`` is the
    generated file (features.json is looked up beside it)."""
    d, passes = job.defaults, job.passes
    ap = argparse.ArgumentParser(description=job.doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Defaults come from the spec. Example: python train_torch.py --train "
                                        "data/train --eval data/valid --max-iter 500 --device cuda")
    _data_options(ap, job, script)
    _loop_options(ap, job)
    _device_options(ap, job)
    _table_options(ap, job)
    _run_options(ap)
    args, unknown = ap.parse_known_args(argv)
    if unknown:
        ap.error(unknown_text(unknown, [o for a in ap._actions for o in a.option_strings if o.startswith("--")]))
    if args.max_iter is None and args.epochs is None:    # neither given: the spec's training loop
        args.max_iter, args.epochs = d["max_iter"], d["num_epochs"]
    if args.batch_size is None:
        args.batch_size = rank_batch(d["batch_size"], int(os.environ.get("WORLD_SIZE", "1")))
    if args.batch_size <= 0 or args.eval_batch_size <= 0:
        ap.error("batch sizes must be positive")
    if max(args.batch_size, args.eval_batch_size) > 2**31 - 1:   # past a C long: torch's OverflowError, a traceback
        ap.error(f"--batch-size / --eval-batch-size: at most {2**31 - 1}")
    args.plan = pass_plan(ap, args, passes)
    return args


def _data_options(ap: argparse.ArgumentParser, job: Job, script: str) -> None:
    """What is read and where the run folder is."""
    d, passes = job.defaults, job.passes
    if passes is not None:
        ap.add_argument("--pass-train", nargs="+", action="append", metavar="TRAIN",
                        help="one pass's training data (folders, _file_list.txt or .parquet files); once per pass, in "
                             "order (spec: " + "; ".join(" ".join(p["train"]) for p in passes) + ")")
        ap.add_argument("--pass-eval", action="append", metavar="EVAL",
                        help="one pass's evaluation data; once per pass (spec: " +
                             "; ".join(p["eval"] for p in passes) + ")")
        ap.add_argument("--passes", nargs="+", type=int, metavar="K",
                        help=f"the passes to train, 1 to {len(passes)} in order (default: all); a first pass K > 1 "
                             "continues from pass_<K-1>.pt in --output-dir")
    else:
        ap.add_argument("--train", nargs="+", default=d["train"], help="training data: folder, _file_list.txt or .parquet files")
        ap.add_argument("--eval", default=d["eval"], help="evaluation data: folder, _file_list.txt or a .parquet file")
    ap.add_argument("--resume", type=Path, help="continue from a checkpoint this script saved (model, optimizer, "
                                                "iteration)")
    ap.add_argument("--features", type=Path, default=Path(script).resolve().with_name(FEATURES_FILE),
                    help="features.json (default: beside this script)")
    ap.add_argument("--output-dir", type=Path, default=Path(job.name + "_torch"), help="checkpoints and metrics")
    ap.add_argument("--force", action="store_true", help="start afresh in an --output-dir an earlier run wrote "
                                                         "(its files are removed; default: refused)")


def _loop_options(ap: argparse.ArgumentParser, job: Job) -> None:
    """The training loop: its length, batches, learning rate, intervals, early stop and seed."""
    d = job.defaults
    ap.add_argument("--max-iter", type=int, help=f"training iterations, steps of every rank (spec: {d['max_iter']})")
    ap.add_argument("--epochs", type=int, help=f"train whole epochs instead (spec: {d['num_epochs']})")
    ap.add_argument("--batch-size", type=int, metavar="ROWS",
                    help="rows per rank a step; the global batch is ROWS x the ranks (default: the spec's "
                         f"solver.batchsize, {d['batch_size']}, is the global batch as in HugeCTR: divided by the ranks)")
    ap.add_argument("--eval-batch-size", type=int, default=d["eval_batch_size"])
    ap.add_argument("--max-eval-batches", type=int, default=d["max_eval_batches"])
    ap.add_argument("--lr", type=float, default=job.schedule["lr"], help="learning rate of one rank (scaled by ranks)")
    ap.add_argument("--display", type=int, default=d["display"], help="log every N iterations")
    ap.add_argument("--eval-interval", type=int, default=d["eval_interval"], help="evaluate every N iterations")
    ap.add_argument("--snapshot", type=int, default=d["snapshot"], help="checkpoint every N iterations (0: never)")
    ap.add_argument("--early-stop", type=parse_early_stop, metavar="METRIC:PATIENCE",
                    help="stop once PATIENCE evaluations in a row have not improved eval METRIC (auc or loss), e.g. "
                         "auc:3; the best evaluation's weights are kept in OUTPUT_DIR/best (by AUC without this)")
    ap.add_argument("--seed", type=int, default=d["seed"], help="initialisation and shuffle seed")


def _device_options(ap: argparse.ArgumentParser, job: Job) -> None:
    """The device, its threads, CUDA graph, precision and compilation."""
    d = job.defaults
    ap.add_argument("--device", default="auto", help="auto (cuda when available), cpu, cuda")
    ap.add_argument("--threads", type=int, metavar="N",
                    help="intra-op CPU threads of each rank (default: OMP_NUM_THREADS when set, else the cores this "
                         "process may use, cgroup quota included, divided by the ranks on this machine)")
    ap.add_argument("--cuda-graph", choices=("auto", "on", "off"), default="auto",
                    help="capture the train step as a CUDA graph (auto: one GPU, data on the GPU)")
    ap.add_argument("--precision", choices=PRECISIONS,
                    help=f"fp32, tf32 (TF32 tensor cores), bf16 (autocast) or fp16 (autocast, loss scaled from the "
                         f"solver's scaler) (spec: {d['precision']}; mixed is bf16 where the device has it)")
    ap.add_argument("--tf32", choices=("on", "off"),
                    help="without --precision: on is --precision tf32, off is fp32 (spec: enable_tf32_compute)")
    ap.add_argument("--compile", choices=("auto", "on", "off"), default="auto",
                    help="torch.compile the dense layers (embedding lookups stay eager; compiling takes 1-30 s, "
                         "then the CUDA graph replays the compiled kernels); auto: on one GPU, runs of 1000+ steps")


def _table_options(ap: argparse.ArgumentParser, job: Job) -> None:
    """How the embedding tables are updated and sharded over the ranks."""
    ap.add_argument("--embedding-update", choices=("auto", "rows", "dense"), default="auto",
                    help="rows: the tables' optimizer updates only the rows a batch looks up (no dense gradient); "
                         "dense: the optimizer over the whole table (auto: rows where that is the spec's optimizer "
                         "exactly, on one rank or with sharded tables; "
                         f"{'rows' if job.optimizer.rows else 'dense'} for this spec)")
    ap.add_argument("--shard-tables", choices=("auto", "on", "off"), default="auto",
                    help="under torchrun: the embedding tables are split across the ranks, each looking up and "
                         "updating its part for every rank (a model larger than one GPU trains on several); off: "
                         "every rank holds every table, their gradients are averaged over the ranks (auto: on where "
                         f"the tables update row by row; {'on' if job.optimizer.rows else 'off'} for this spec on "
                         "several ranks)")
    ap.add_argument("--table-split", choices=("auto", "columns", "tables"), default="auto",
                    help="how sharded tables are split: columns (every rank holds its vec_size/ranks columns of "
                         "every row: the same memory and lookups on every rank), tables (each slot whole on one "
                         "rank, placed by bytes and lookups); auto: columns where the ranks divide vec_size, "
                         "with the slots of at most --batch-size rows replicated on every rank (their gradient is "
                         "one all_reduce instead of exchanged rows)")
    ap.add_argument("--replicate-rows", type=int, metavar="ROWS",
                    help="sharded tables: the slots of at most ROWS rows are held whole by every rank instead, with "
                         "any --table-split (default: --batch-size with --table-split auto, else 0: none)")


def _run_options(ap: argparse.ArgumentParser) -> None:
    """Where the training rows live, TensorBoard and the distributed backend."""
    ap.add_argument("--data-on", choices=("auto", "gpu", "device", "host", "stream"), default="auto",
                    help="where the training rows live: gpu memory, pinned host memory, or stream (row groups "
                         "read ahead from the files on a thread); auto: gpu when they fit in half the free GPU "
                         "memory, host when they fit in half the available RAM, else stream")
    ap.add_argument("--shuffle-window", type=int, default=1 << 21,
                    help="--data-on stream: rows shuffled together (whole files are read in a shuffled order)")
    ap.add_argument("--tensorboard", action=argparse.BooleanOptionalAction,
                    help="write TensorBoard scalars under OUTPUT_DIR/tensorboard (default: on when the tensorboard "
                         "package is installed); every point is also in OUTPUT_DIR/metrics.jsonl")
    ap.add_argument("--dist-backend", choices=("auto", "nccl", "gloo"), default="auto",
                    help="torch.distributed backend under torchrun (auto: nccl on GPUs, gloo on the CPU; gloo lets "
                         "ranks share a GPU)")


def pass_plan(ap: argparse.ArgumentParser, args: argparse.Namespace, passes: list | None) -> list[tuple]:
    """[(pass number or None, training data, evaluation data)]: the passes to train, in order; a first pass K > 1
    resumes from pass_<K-1>.pt unless --resume says otherwise."""
    if passes is not None:
        for name in ("pass_train", "pass_eval"):
            given = getattr(args, name)
            if given is not None and len(given) != len(passes):
                ap.error(f"--{name.replace('_', '-')} given {len(given)} time(s); the spec has {len(passes)} passes "
                         "(give it once per pass, in order)")
        train = args.pass_train or [p["train"] for p in passes]
        evals = args.pass_eval or [p["eval"] for p in passes]
        chosen = args.passes or list(range(1, len(passes) + 1))
        if chosen != list(range(chosen[0], chosen[-1] + 1)) or chosen[0] < 1 or chosen[-1] > len(passes):
            ap.error(f"--passes: consecutive pass numbers from 1 to {len(passes)}, got {chosen}")
        if args.resume is None and chosen[0] > 1:
            args.resume = args.output_dir / f"pass_{chosen[0] - 1}.pt"
        return [(k, train[k - 1], evals[k - 1]) for k in chosen]
    return [(None, args.train, args.eval)]


def rank_batch(global_batch: int, ranks: int) -> int:
    """One rank's share of the spec's global batch (HugeCTR's solver.batchsize is over every GPU of the job)."""
    if global_batch % ranks:
        raise DataError(f"the spec's solver.batchsize {global_batch} is the global batch and {ranks} ranks do not "
                        f"divide it (fix: --batch-size ROWS per rank, or a batchsize that {ranks} divides)")
    return global_batch // ranks


def unknown_text(unknown: list[str], options: list[str]) -> str:
    """argparse's 'unrecognized arguments' with the closest option to each unknown one and the list of options."""
    text = f"unrecognized arguments: {' '.join(unknown)}"
    for arg in unknown:
        close = difflib.get_close_matches(arg.split("=")[0], options, n=1) if arg.startswith("--") else []
        if close:
            text += f" (did you mean {close[0]!r}?)"
    return text + f"; the options: {', '.join(sorted(options))}"
