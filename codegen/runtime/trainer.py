"""The training loop of a generated train_torch.py: the run's start-up in named steps (how the tables are updated and
sharded, the model, the optimizer, data parallelism), the step (CUDA graph, compile, precision), evaluation and
checkpoints. ``main`` is what the generated file's main() calls."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from . import run_folder
from .checkpoint import resume, rng_state, save
from .checks import check_args
from .cli import parse_args
from .compiled import compile_model
from .contract import FEATURES_FILE
from .data import Columns, Stream, data_files, load_data, load_features
from .distributed import (GradientSync, all_reduce, close_process_group, collective, epoch_seed, host_only,
                          peak_memory, settle, setup, world)
from .errors import DataError
from .early_stop import BestTracker
from .evaluation import evaluate_job
from .feature_order import take_shard_orders
from .job import Job, learning_rate
from .layers import SparseEmbedding
from .losses import objective
from .metrics import NAMES
from .optimizers import make_optimizer
from .precision import LossScaler, autocast, resolve_precision
from .progress import Bar, Recorder, Silent, TrainBar, tensorboard_available
from .label_names import name_labels, named_terms
from .label_names import describe as describe_labels
from .label_names import unnamed as unnamed_labels
from .row_counts import data_sources, describe, size_from_data, unsized
from .run_facts import data_facts
from .sharding import (embedding_update, model_state, optimizer_state, shard_tables, share_gradients,
                       table_facts)
from .threads import choose_threads


@dataclass(frozen=True)
class Clock:
    """Start-up as the generated file measured it: ``started`` before its imports, ``imported`` after them
    (time.perf_counter()); ``pycache``: where torch's bytecode is kept (startup.bytecode_cache), if anywhere."""

    started: float
    imported: float
    pycache: str | None = None


class Step:
    """One optimisation step on the rows of a batch index (or the next streamed batch); with `graph`, the whole step
    (gather, forward, backward, optimizer) is captured once as a CUDA graph and replayed. The forward runs under
    autocast for bf16 / fp16; fp16 scales the loss (LossScaler) and is not captured (a step may be skipped)."""

    def __init__(self, model, optimizer, columns, batch_size: int, graph: bool, precision: str,
                 scaler: LossScaler | None = None, sync: GradientSync | None = None, losses: tuple | None = None):
        self.model, self.optimizer, self.columns, self.sync, self.losses = model, optimizer, columns, sync, losses
        self.precision, self.scaler = precision, scaler
        self.loss_sum = torch.zeros((), device=columns.device)
        self.graph = None
        self.index = torch.zeros(batch_size, dtype=torch.int64, device=columns.tensors[0].device)
        self.want_graph = graph

    def _step(self, index: torch.Tensor) -> None:
        label, *inputs = self.columns.batch(index)
        with autocast(self.columns.device, self.precision):
            logits = self.model(*inputs)
        if self.losses is None:
            loss = reported = F.binary_cross_entropy_with_logits(logits.float(), label)
        else:   # several loss layers, or another loss (runtime.losses): the value reported is HugeCTR's
            loss, reported = objective(self.losses, logits.float(), label)
        if self.scaler is not None:
            self.scaler.step(loss, self.optimizer.grads if hasattr(self.optimizer, "grads") else
                             (lambda: [p.grad for g in self.optimizer.param_groups for p in g["params"]]),
                             self.optimizer, self.sync)
        else:
            loss.backward()
            if self.sync is not None:
                self.sync(later=True)      # the optimizer waits for it after the row updates
            self.optimizer.step()
        settle()
        self.loss_sum += reported.detach()

    def __call__(self, index: torch.Tensor | None) -> None:
        self.columns.advance()
        if self.graph is not None:
            if index is not None:
                self.index.copy_(index)
            self.graph.replay()
            return
        self.optimizer.zero_grad(set_to_none=not self.want_graph)
        self._step(index)

    def capture(self) -> None:
        """After a few eager steps (which warm up the optimizer state): capture one step from a static index."""
        torch.cuda.synchronize()
        self.optimizer.zero_grad(set_to_none=True)
        self.graph = torch.cuda.CUDAGraph()
        # thread_local: the data thread of --data-on stream pins memory while the step is being captured
        with torch.cuda.graph(self.graph, capture_error_mode="thread_local"):
            self._step(self.index)


def train(args, job: Job, model_class, clock: Clock) -> dict:
    """Train ``model_class`` (the generated Model) as ``args`` and ``job`` say; returns metrics.json's content."""
    check_args(args)        # every check before the run folder is made: a refused run writes nothing
    run_folder.check(args.output_dir, args.resume is not None, getattr(args, "force", False))
    threads, why = choose_threads(args.threads, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    torch.set_num_threads(threads)
    device = setup(args)
    rank, size = world()
    bar = Bar(active=None if rank == 0 else False)
    log = bar.log if rank == 0 else (lambda *a, **k: None)
    log(f"CPU threads: {threads} a rank ({why})")
    if args.tensorboard and not tensorboard_available():
        raise DataError("--tensorboard: the tensorboard package is not installed (fix: pip install tensorboard, "
                        "or leave --tensorboard out; metrics.jsonl holds every point)")
    precision = resolve_precision(args.precision, args.tf32, device, job.defaults["precision"])
    torch.backends.cuda.matmul.allow_tf32 = precision != "fp32"
    torch.backends.cudnn.allow_tf32 = precision != "fp32"
    features = load_features(args.features, job.layout)
    # Labels an imported Parquet reader names at run time: from the data's _metadata.json, as HugeCTR reads them.
    labels_from_data = name_labels(features, [data_files(src) for src in data_sources(args.plan)]) \
        if unnamed_labels(features) else {}
    if labels_from_data:
        log(describe_labels(labels_from_data))
        job = dataclasses.replace(job, losses=named_terms(job.losses, features))
    # Tables HugeCTR sizes by its workspace: rows from one scan of the data, before anything is built or written.
    rows_from_data = size_from_data(features, [f for src in data_sources(args.plan) for f in data_files(src)]) \
        if unsized(features) else {}
    if rows_from_data:
        log(describe(rows_from_data))
    continuous, sharded, row_updates = embedding_update(args, job, size)
    placement = shard_tables(args, model_class, features, job.optimizer.rows, sharded, log)

    startup: dict[str, Any] = {"import_s": round(clock.imported - clock.started, 3)}
    model = build_model(args, model_class, features, placement, device, clock, startup, log)
    # The first data set is read right after the model (its placement sees the model's memory use), then the
    # optimizer is made (DenseOptimizer, not torch.optim: its first use imports torch._dynamo, seconds of start-up).
    mark = time.perf_counter()
    _, sources, eval_source = args.plan[0]
    first_data: tuple | None = load_data(args, sources, eval_source, features, device, job.losses)
    startup["data_load_s"] = round(time.perf_counter() - mark, 3)
    optimizer, scaler, lr, graph_ok = optimizer_for(args, job, model, device, precision, sharded, row_updates,
                                                    continuous, startup)
    net, compiled, shared, grad_sync = data_parallel(args, model, features, device, placement, log)
    state, recorder = open_run(args, model, optimizer, features, device, sharded, log)

    metrics: dict[str, Any] = {"auc": None, "eval_loss": None, "precision": precision, "compiled": compiled, "embedding_update":
               "rows" if row_updates else "sparse" if continuous else "dense", "shard_tables": sharded, "threads": threads}
    table_facts(metrics, model, device, placement, rows_from_data, shared)
    if labels_from_data:
        metrics["labels_from_metadata"] = labels_from_data
    it, train_seconds, data_on_device, graph = state["iteration"], 0.0, True, False
    best = BestTracker.from_args(args, features)
    for data_pass, sources, eval_source in args.plan:
        train_cols, valid_cols = first_data or load_data(args, sources, eval_source, features, device, job.losses)
        first_data = None
        graph = graph_ok and train_cols.tensors[0].is_cuda
        train_cols.kernels = compiled and train_cols.tensors[0].is_cuda and isinstance(train_cols, Columns)
        data_on_device = data_on_device and bool(train_cols.tensors[0].device == device)
        metrics["data_on"] = train_cols.placement
        try:
            it, seconds = train_pass(args, job, clock, net, model, optimizer, train_cols, valid_cols, features,
                                     device, lr, graph, it, data_pass, sources, metrics, precision, scaler, startup,
                                     resumed=it if data_pass is None else 0, bar=bar, recorder=recorder,
                                     grad_sync=grad_sync, best=best)
        finally:
            train_cols.stop()
            bar.clear()
            recorder.flush()
        train_seconds += seconds
        if data_pass is not None:
            end_pass(args, metrics, data_pass, it, model, optimizer, device, features, log)
        if best.stopped:
            break

    done = it - state["iteration"]
    if compiled:
        startup["compile_s"] = startup.get("first_step_s")   # the first step traces and compiles forward and backward
    best.record(metrics)
    metrics.update(startup=startup, model=job.name, iterations=it, world_size=size, batch_size=args.batch_size,
                   global_batch_size=args.batch_size * size, device=str(device.type), cuda_graph=graph,
                   data_on_device=data_on_device, train_seconds=round(train_seconds, 3),
                   optimizer=job.optimizer.hugectr, lr=lr, lr_schedule=job.schedule,
                   samples_per_second=round(done * args.batch_size * size / max(train_seconds, 1e-9), 1))
    finish(args, metrics, model, features, device, recorder, log)
    return metrics


def build_model(args, model_class, features: dict, placement, device: torch.device, clock: Clock, startup: dict,
                log):
    """The model, initialised on the device it trains on from --seed; its build time goes to ``startup``."""
    if clock.pycache:
        log(f"torch's bytecode is kept in {clock.pycache} (this installation has none and PYTHONDONTWRITEBYTECODE is set; "
            "CTRGEN_CACHE=0 turns this off)")
    mark = time.perf_counter()
    torch.manual_seed(args.seed)
    with torch.device(device):   # initialised where it trains: a big table never exists on the host
        model = model_class(features, placement).to(device)
    in_shard_order = take_shard_orders(model) if placement is not None else []
    for line in in_shard_order:
        log("  " + line)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    startup["build_s"] = round(time.perf_counter() - mark, 3)
    return model


def optimizer_for(args, job: Job, model, device: torch.device, precision: str, sharded: bool, row_updates: bool,
                  continuous: bool, startup: dict) -> tuple[Any, LossScaler | None, float, bool]:
    """(optimizer, fp16's loss scaler, the learning rate, whether the step may be a CUDA graph)."""
    size = world()[1]
    mark = time.perf_counter()
    lr = args.lr * size                       # as the seed notebook scales it: one rank's lr times the ranks
    shared_host = size > 1 and host_only()       # (--cuda-graph on was refused there: setup)
    graph_ok = args.cuda_graph == "on" or (args.cuda_graph == "auto" and not shared_host)
    graph_ok = graph_ok and device.type == "cuda" and job.optimizer.graph_safe and precision != "fp16"
    lr_value = torch.tensor(lr, device=device) if graph_ok else lr
    optimizer = make_optimizer(job.optimizer, model, lr_value, row_updates=row_updates, continuous=continuous)
    scaler = LossScaler(job.defaults["loss_scale"], device) if precision == "fp16" else None
    if scaler is not None:
        scaler.reduce = sharded       # a table's owner alone sees its rows' gradients: every rank skips together
    startup["optimizer_s"] = round(time.perf_counter() - mark, 3)
    return optimizer, scaler, lr, graph_ok


def data_parallel(args, model, features: dict, device: torch.device, placement,
                  log) -> tuple[Any, bool, list[str], GradientSync | None]:
    """(the module the step calls, whether it is compiled, how replicated tables average their gradients, the dense
    gradients' sync)."""
    size = world()[1]
    net = model
    long_run = args.max_iter is None or args.max_iter >= 1000
    compiled = args.compile == "on" or (args.compile == "auto" and device.type == "cuda" and long_run)
    # Data parallel: every parameter with a gradient (sharded tables have none: their owners update their rows; a
    # table with shared_grad averages its own in backward).
    shared = share_gradients(model, features, size, args.batch_size) if size > 1 and placement is None else []
    for line in shared:
        log(line)
    own_average = {id(t.weight) for t in model.modules() if isinstance(t, SparseEmbedding) and t.shared_grad}
    grad_sync = GradientSync([p for p in model.parameters() if id(p) not in own_average]) if size > 1 else None
    if compiled:
        net = compile_model(model, device)
    return net, compiled, shared, grad_sync


def open_run(args, model, optimizer, features: dict, device: torch.device, sharded: bool,
             log) -> tuple[dict, Recorder | Silent]:
    """(where training starts: --resume's iteration and pass, or 0; where rank 0 records every point), once the run
    folder is this run's."""
    rank = world()[0]
    state = {"iteration": 0, "pass": 0}
    if args.resume is not None:
        state = resume(args.resume, model, optimizer, features, device, sharded)
        log(f"resumed from {args.resume}: iteration {state['iteration']}"
            + (f", after pass {state['pass']}" if state.get("pass") else ""))
    run_folder.claim_for_run(args, rank, device)
    recorder: Recorder | Silent = Silent()
    if rank == 0:
        recorder = Recorder(args.output_dir, tensorboard=args.tensorboard is not False and tensorboard_available(),
                            resumed=state["iteration"] if args.resume is not None else None)
    return state, recorder


def end_pass(args, metrics: dict, data_pass: int, it: int, model, optimizer, device: torch.device, features: dict,
             log) -> None:
    """After a continuous-training pass: its metrics and (rank 0) its pass_<n>.pt."""
    metrics.setdefault("passes", []).append({"pass": data_pass, "iteration": it, **{
        k: metrics[k] for k in ("auc", "eval_loss", *NAMES) if k in metrics}, **(
        {"auc_per_label": dict(metrics["auc_per_label"])} if "auc_per_label" in metrics else {})})
    if world()[0] == 0:
        save(args.output_dir / f"pass_{data_pass}.pt", {
            "model": model.state_dict(), "optimizer": optimizer.state_dict(), "iteration": it,
            "pass": data_pass, **rng_state(device), "features": features})
        log(f"pass {data_pass}: saved {args.output_dir / f'pass_{data_pass}.pt'}", flush=True)


def finish(args, metrics: dict, model, features: dict, device: torch.device, recorder: Recorder | Silent,
           log) -> None:
    """Every rank's peak memory, then rank 0 writes model.pt, features.json and metrics.json; the ranks part."""
    rank, size = world()
    peaks = [torch.tensor([peak_memory(device)], dtype=torch.int64, device=device)]
    if size > 1:
        peaks = [torch.zeros_like(peaks[0]) for _ in range(size)]
        collective(dist.all_gather, peaks, torch.tensor([peak_memory(device)], dtype=torch.int64, device=device))
    metrics["peak_memory_bytes_per_rank"] = [int(p.item()) for p in peaks]
    final = model_state(model)      # whole tables: every rank sends its shards to rank 0
    recorder.close()
    if rank == 0:
        run_folder.unlock(args.output_dir)
        save(args.output_dir / "model.pt", final)
        (args.output_dir / FEATURES_FILE).write_text(json.dumps(features, indent=2) + "\n", encoding="utf-8")
        (args.output_dir / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n",
                                                      encoding="utf-8")
        log(f"done: {metrics['iterations']} iterations, {metrics['samples_per_second']:,.0f} samples/s, eval AUC "
            f"{metrics['auc']}; wrote {args.output_dir / 'model.pt'}")
    if dist.is_initialized():
        dist.barrier()          # holds no tensor of ours (see RECENT_WORK)
        close_process_group()


def train_pass(args, job: Job, clock: Clock, net, model, optimizer, train_cols: Columns | Stream, valid_cols: Columns,
               features: dict, device: torch.device, lr: float, graph: bool, it: int, data_pass: int | None, sources: list[str],
               metrics: dict, precision: str = "fp32", scaler: LossScaler | None = None,
               startup: dict | None = None, resumed: int = 0, bar: Bar | None = None,
               recorder: Recorder | Silent | None = None, grad_sync: GradientSync | None = None,
               best: BestTracker | None = None) -> tuple[int, float]:
    """Train --max-iter iterations or --epochs epochs on one data set from global iteration ``it`` (the learning-rate
    schedule counts on across passes); returns the new iteration and the seconds spent. ``bar``: rank 0's terminal
    (a progress bar when it is one); ``recorder``: where every scalar point goes; ``best``: told each evaluation
    (keeps the best weights, may stop the run early)."""
    rank, size = world()
    bar = bar or Bar(active=False)
    recorder = recorder or Silent()
    log = bar.log if rank == 0 else (lambda *a, **k: None)
    step = Step(net, optimizer, train_cols, args.batch_size, graph, precision, scaler, grad_sync, job.losses)
    steps_per_epoch = epoch_steps(args, train_cols, device, sources)
    metrics.setdefault("data", data_facts(train_cols, valid_cols, steps_per_epoch, features, device))
    first = it
    total = it + (args.max_iter if args.max_iter is not None else args.epochs * steps_per_epoch)
    label = f" pass {data_pass}:" if data_pass is not None else ""
    log(f"{job.name}:{label} {size} rank(s) on {device.type}, {train_cols.n} training rows on rank 0, batch "
        f"{args.batch_size} per rank, {total - first} iterations ({steps_per_epoch} per epoch), lr {lr:g}, "
        f"data on {train_cols.placement}, precision {precision}, embedding update {metrics['embedding_update']}, "
        f"compiled {metrics['compiled']}, cuda graph {graph}")

    # Resumed from checkpoint_<iter>.pt, a run goes on from the same epoch and batch (same shuffle seeds).
    epoch, skip = divmod(resumed, steps_per_epoch)
    train_seconds, shown_at, shown_time = 0.0, it, 0.0
    lr_now = None
    progress = TrainBar(bar, first, total, args.batch_size * size)
    eval_batches = -(-valid_cols.n // args.eval_batch_size)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    while it < total:
        order = train_cols.epoch(epoch_seed(args.seed, epoch, device, data_pass))
        epoch += 1
        sync()
        start = time.perf_counter()
        for _ in range(skip):
            train_cols.advance()     # a streamed epoch's batches before the checkpoint
        for b in range(skip, steps_per_epoch):
            if it >= total:
                break
            new_lr = learning_rate(job.schedule, it, lr)
            if new_lr != lr_now:
                for group in optimizer.param_groups:
                    if isinstance(group["lr"], torch.Tensor):
                        group["lr"].fill_(new_lr)
                    else:
                        group["lr"] = new_lr
                lr_now = new_lr
            step(order[b * args.batch_size:(b + 1) * args.batch_size] if order is not None else None)
            it += 1
            progress.update(it)
            if startup is not None and "first_step_s" not in startup:
                first_step(startup, start, clock, sync, log)
            if graph and step.graph is None and it - first == 3:
                mark = time.perf_counter()
                step.capture()
                if startup is not None:
                    startup.setdefault("capture_s", round(time.perf_counter() - mark, 3))
            if it % args.display == 0 or it % args.eval_interval == 0 or (args.snapshot and it % args.snapshot == 0) \
                    or it == total:
                sync()
                train_seconds += time.perf_counter() - start
                if it % args.display == 0 or it == total:
                    show_loss(args, step, it, it - shown_at, train_seconds - shown_time, lr_now, progress, recorder,
                              metrics, log)
                    shown_at, shown_time = it, train_seconds
                if (it % args.eval_interval == 0 or it == total) and \
                        evaluate_now(args, job, model, valid_cols, precision, it, progress, eval_batches, bar,
                                     recorder, metrics, best, log):
                    total = it          # --early-stop: the loops end after this iteration's snapshot
                if args.snapshot and it % args.snapshot == 0:
                    checkpoint(args, model, optimizer, it, device, features, recorder)
                sync()
                start = time.perf_counter()
        skip = 0
        sync()
        train_seconds += time.perf_counter() - start
    return it, train_seconds


def epoch_steps(args, train_cols: Columns | Stream, device: torch.device, sources: list[str]) -> int:
    """Steps an epoch: every rank runs as many as the rank with the fewest rows (surplus batches are dropped)."""
    local_steps = torch.tensor([train_cols.n // args.batch_size], device=device)
    steps_per_epoch = int(all_reduce(local_steps, dist.ReduceOp.MIN).item())
    if steps_per_epoch == 0:
        raise DataError(f"{sources[0]}: a rank holds {train_cols.n} training rows, fewer than one batch of "
                        f"{args.batch_size} (fix: lower --batch-size)")
    return steps_per_epoch


def first_step(startup: dict, start: float, clock: Clock, sync, log) -> None:
    """After the run's first step: how long start-up took, in ``startup`` and one line."""
    sync()
    startup["first_step_s"] = round(time.perf_counter() - start, 3)
    startup["time_to_first_step_s"] = round(time.perf_counter() - clock.started, 3)
    log(f"first step {startup['time_to_first_step_s']:.2f} s after start (import "
        f"{startup['import_s']:.2f} s, model build {startup['build_s']:.2f} s, data load "
        f"{startup['data_load_s']:.2f} s, optimizer {startup['optimizer_s']:.2f} s, first step "
        f"{startup['first_step_s']:.2f} s)", flush=True)


def show_loss(args, step: Step, it: int, steps: int, seconds: float, lr_now, progress: TrainBar,
              recorder: Recorder | Silent, metrics: dict, log) -> None:
    """At a display iteration: the mean loss and samples/s of the ``steps`` steps (``seconds``) since the last one."""
    size = world()[1]
    loss = all_reduce(step.loss_sum.clone()) / size / max(steps, 1)
    rate = steps * args.batch_size * size / max(seconds, 1e-9)
    log(f"iter {it}: loss {loss.item():.4f}, lr {lr_now:g}, {rate:,.0f} samples/s", flush=True)
    progress.loss = loss.item()
    progress.update(it, force=True)
    for tag, value in (("train/loss", loss.item()), ("train/lr", lr_now),
                       ("train/samples_per_second", rate)):
        recorder.scalar(tag, it, float(value))
    metrics["train_loss"] = round(loss.item(), 6)
    metrics.setdefault("train_losses", []).append(round(loss.item(), 6))
    metrics.setdefault("interval_samples_per_second", []).append(round(rate, 1))
    step.loss_sum.zero_()


def evaluate_now(args, job: Job, model, valid_cols: Columns, precision: str, it: int, progress: TrainBar,
                 eval_batches: int, bar: Bar, recorder: Recorder | Silent, metrics: dict, best: BestTracker | None,
                 log) -> bool:
    """An evaluation at iteration ``it``, logged and recorded; True when --early-stop ends the run here."""
    result = evaluate_job(model, valid_cols, args.eval_batch_size, job.losses, precision,
                          progress=progress.evaluating(eval_batches))
    bar.clear()
    log(f"iter {it}: {result.text()}", flush=True)
    result.record(recorder, metrics, it)
    recorder.flush()
    progress.update(it, force=True)
    if best is not None and best.observe(result, it, model):
        log(best.text(), flush=True)
        return True
    return False


def checkpoint(args, model, optimizer, it: int, device: torch.device, features: dict,
               recorder: Recorder | Silent) -> None:
    """checkpoint_<it>.pt: whole tables and optimizer state (every rank sends its shards), written by rank 0."""
    recorder.flush()        # every point up to a checkpoint is on disk before it (kill -9, --resume)
    snapshot = {"model": model_state(model), "optimizer": optimizer_state(model, optimizer)}
    if world()[0] == 0:
        save(args.output_dir / f"checkpoint_{it}.pt", {**snapshot, "iteration": it,
                                                     **rng_state(device), "features": features})


def main(job: Job, model_class, argv=None, *, script: str, clock: Clock) -> int:
    """A generated train_torch.py's main(): its command line, then training; bad input is one line, exit status 2;
    Ctrl-C is exit status 130 without a traceback (ctrgen train says it in one line)."""
    try:
        args = parse_args(job, script, argv)
        train(args, job, model_class, clock)
    except DataError as exc:
        # One write of the whole line: every rank prints the same refusal and `ctrgen train` passes each error line on
        # once; print() writes the text and its newline apart, and two ranks' halves could interleave in the pipe.
        sys.stderr.write(f"error: {exc}\n")
        sys.stderr.flush()
        return 2
    except KeyboardInterrupt:
        return 130
    return 0
