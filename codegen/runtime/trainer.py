"""The training loop of a generated train_torch.py: devices and ranks, where the data lives, the step (CUDA graph,
compile, precision), evaluation and checkpoints. ``main`` is what the generated file's main() calls."""

from __future__ import annotations

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
from .checks import agree, check_args, check_split
from .cli import parse_args
from .compiled import compile_model
from .contract import FEATURES_FILE
from .data import Columns, Stream, count_rows, data_files, load_features, read_split, row_bytes
from .distributed import (GradientSync, all_reduce, close_process_group, collective, epoch_seed, host_only,
                          open_reduce_group, peak_memory, settle, world)
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
from .row_counts import data_sources, describe, size_from_data, unsized
from .run_facts import data_facts
from .shards import describe_placement
from .sharding import model_state, optimizer_state, place_tables, resolve_sharding, share_gradients, sharded_tables
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


def setup(args) -> torch.device:
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        use_cuda = args.device != "cpu" and torch.cuda.is_available()
        backend = args.dist_backend if args.dist_backend != "auto" else "nccl" if use_cuda else "gloo"
        if backend == "nccl" and not use_cuda:
            raise DataError("--dist-backend nccl needs CUDA GPUs (fix: --dist-backend gloo for the CPU)")
        # Every exchange of the step has a fixed size and the dense gradients are averaged inside the step
        # (GradientSync), so NCCL ranks capture the step as one rank does; gloo goes through host memory. Refused
        # before the ranks meet, build a model or read data.
        if backend == "gloo" and args.cuda_graph == "on":
            raise DataError("--cuda-graph on: the gloo backend exchanges through host memory, which a CUDA graph "
                            "cannot capture (fix: --dist-backend nccl with a GPU per rank, or --cuda-graph off)")
        device = torch.device("cpu")
        if use_cuda:
            gpus = torch.cuda.device_count()
            if local_ranks > gpus and backend == "nccl":   # NCCL refuses two ranks on one GPU
                raise DataError(f"{local_ranks} ranks on this node but {gpus} GPU(s): NCCL needs a GPU per rank "
                                f"(fix: torchrun --nproc_per_node {gpus}, or --dist-backend gloo to share GPUs)")
            device = torch.device("cuda", local_rank % gpus)
            torch.cuda.set_device(device)
        dist.init_process_group(backend=backend)
        open_reduce_group()
        return device
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          "cpu" if args.device == "auto" else args.device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def data_placement(asked: str, nbytes: int, device: torch.device) -> str:
    """gpu, host or stream for a split of `nbytes` once read (--data-on auto decides by the free memory)."""
    if asked in ("gpu", "device"):
        return "gpu" if device.type == "cuda" else "host"
    if asked != "auto":
        return asked
    if device.type == "cuda" and nbytes < 0.5 * torch.cuda.mem_get_info(device)[0]:
        return "gpu"
    try:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        available = None
    return "stream" if available is not None and nbytes > 0.5 * available else "host"


def load_data(args, sources: list[str], eval_source: str, features: dict,
              device: torch.device, losses=None) -> tuple[Columns | Stream, Columns]:
    """This rank's training files and evaluation rows; a problem on any rank stops every rank."""
    rank, size = world()
    problem = ""
    train: Columns | Stream | None = None
    valid: Columns | None = None
    try:
        files = [f for source in sources for f in data_files(source)]
        if len(files) < size:
            raise DataError(f"{sources[0]}: {len(files)} training file(s) for {size} ranks; each rank reads whole "
                            f"files (fix: write at least {size} files, e.g. NVTabular's out_files_per_proc, or start "
                            "fewer ranks)")
        mine = files[rank::size]
        place = data_placement(args.data_on, count_rows(mine) * row_bytes(features), device)
        eval_arrays = read_split(data_files(eval_source), features, max_rows=args.max_eval_batches * args.eval_batch_size)
        eval_arrays = {"labels": eval_arrays["labels"][rank::size], "dense": eval_arrays["dense"][rank::size],
                       "sparse": [ids[rank::size] for ids in eval_arrays["sparse"]]}
        if place == "stream":
            train = Stream(mine, features, device, args.batch_size, args.shuffle_window)
        else:
            train = Columns(read_split(mine, features), device, place == "gpu" or device.type == "cpu")
        valid = Columns(eval_arrays, device, place != "host" or device.type == "cpu")
        train.placement = place if device.type == "cuda" else "host" if place == "gpu" else place
        check_split(args, train, valid, losses)
    except DataError as exc:
        problem = str(exc)
    problem = agree(problem, device)
    if problem:
        raise DataError(problem)
    assert train is not None and valid is not None
    return train, valid


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
    # Tables HugeCTR sizes by its workspace: rows from one scan of the data, before anything is built or written.
    rows_from_data = size_from_data(features, [f for src in data_sources(args.plan) for f in data_files(src)]) \
        if unsized(features) else {}
    if rows_from_data:
        log(describe(rows_from_data))
    rows_kind, continuous = job.optimizer.rows, job.passes is not None
    if continuous and size > 1:
        raise DataError(f"continuous training runs in one process, not {size} ranks (fix: start it without torchrun)")
    sharded = resolve_sharding(args.shard_tables, args.embedding_update, size, job.optimizer, continuous)
    if args.embedding_update == "rows" and (rows_kind is None or continuous or (size > 1 and not sharded)):
        raise DataError("--embedding-update rows: " + (
            f"the spec's optimizer {job.optimizer.hugectr} with its update_type updates every row of the tables"
            if rows_kind is None else "continuous training already updates only the rows a pass looks up"
            if continuous else f"row updates run on one rank, not {size}, unless the tables are sharded")
            + " (fix: --embedding-update dense" + (", or --shard-tables auto)" if size > 1 and rows_kind is not None
                                                   and not continuous else ")"))
    row_updates = args.embedding_update != "dense" and rows_kind is not None and not continuous and \
        (size == 1 or sharded)
    placement = None
    if args.replicate_rows is not None and args.replicate_rows < 0:
        raise DataError(f"--replicate-rows {args.replicate_rows}: a number of rows, 0 or more (fix: --replicate-rows 0 "
                        "replicates no slot)")
    replicate = args.replicate_rows if args.replicate_rows is not None else \
        args.batch_size if args.table_split == "auto" else 0
    if sharded:     # placed from a model on the meta device (no memory), before the seed is set
        with torch.device("meta"):
            placement = place_tables(model_class(features), size, rank, rows_kind, args.table_split,
                                     replicate_rows=replicate)
        how = {"auto": "split by columns where the ranks divide vec_size, else whole tables by bytes and lookups",
               "columns": "split by columns", "tables": "whole tables by bytes and lookups"}[args.table_split]
        log(f"tables sharded over {size} ranks ({how}" + (f"; slots of at most {replicate} rows replicated"
                                                          if replicate else "") + "):")
        for line in describe_placement(placement):
            log("  " + line)

    startup: dict[str, Any] = {"import_s": round(clock.imported - clock.started, 3)}
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
    # The first data set is read right after the model (its placement sees the model's memory use), then the
    # optimizer is made (DenseOptimizer, not torch.optim: its first use imports torch._dynamo, seconds of start-up).
    mark = time.perf_counter()
    _, sources, eval_source = args.plan[0]
    first_data: tuple | None = load_data(args, sources, eval_source, features, device, job.losses)
    startup["data_load_s"] = round(time.perf_counter() - mark, 3)
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

    metrics: dict[str, Any] = {"auc": None, "eval_loss": None, "precision": precision, "compiled": compiled, "embedding_update":
               "rows" if row_updates else "sparse" if continuous else "dense", "shard_tables": sharded, "threads": threads}
    if rows_from_data:
        metrics["rows_from_data"] = rows_from_data
    if shared:     # replicated tables updated whole: how each one's gradient is averaged over the ranks
        metrics["table_gradients"] = {name: "all_gather of looked-up rows" if t.shared_grad else "all_reduce"
                                      for name, t in model.named_modules() if isinstance(t, SparseEmbedding)}
    if placement is not None:
        local = torch.tensor([list(m.weight.shape) for _, m in sharded_tables(model)], device=device)
        every = [torch.zeros_like(local) for _ in range(size)]
        collective(dist.all_gather, every, local)
        metrics["sharding"] = {"tables": placement.tables, "split": placement.split,
                               "replicated": placement.replicated, "bytes_per_rank": placement.load,
                               "lookups_per_sample_per_rank": placement.lookups,
                               "in_shard_order": sorted(n for n, t in sharded_tables(model) if t.shard_order),
                               "local_shape_per_rank": [e.tolist() for e in every]}
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
            metrics.setdefault("passes", []).append({"pass": data_pass, "iteration": it, **{
                k: metrics[k] for k in ("auc", "eval_loss", *NAMES) if k in metrics}, **(
                {"auc_per_label": dict(metrics["auc_per_label"])} if "auc_per_label" in metrics else {})})
            if rank == 0:
                save(args.output_dir / f"pass_{data_pass}.pt", {
                    "model": model.state_dict(), "optimizer": optimizer.state_dict(), "iteration": it,
                    "pass": data_pass, **rng_state(device), "features": features})
                log(f"pass {data_pass}: saved {args.output_dir / f'pass_{data_pass}.pt'}", flush=True)
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
        log(f"done: {it} iterations, {metrics['samples_per_second']:,.0f} samples/s, eval AUC {metrics['auc']}; "
            f"wrote {args.output_dir / 'model.pt'}")
    if dist.is_initialized():
        dist.barrier()          # holds no tensor of ours (see RECENT_WORK)
        close_process_group()
    return metrics


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
    local_steps = torch.tensor([train_cols.n // args.batch_size], device=device)
    steps_per_epoch = int(all_reduce(local_steps, dist.ReduceOp.MIN).item())
    if steps_per_epoch == 0:
        raise DataError(f"{sources[0]}: a rank holds {train_cols.n} training rows, fewer than one batch of "
                        f"{args.batch_size} (fix: lower --batch-size)")
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
                sync()
                startup["first_step_s"] = round(time.perf_counter() - start, 3)
                startup["time_to_first_step_s"] = round(time.perf_counter() - clock.started, 3)
                log(f"first step {startup['time_to_first_step_s']:.2f} s after start (import "
                    f"{startup['import_s']:.2f} s, model build {startup['build_s']:.2f} s, data load "
                    f"{startup['data_load_s']:.2f} s, optimizer {startup['optimizer_s']:.2f} s, first step "
                    f"{startup['first_step_s']:.2f} s)", flush=True)
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
                    loss = all_reduce(step.loss_sum.clone()) / size / max(it - shown_at, 1)
                    rate = (it - shown_at) * args.batch_size * size / max(train_seconds - shown_time, 1e-9)
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
                    shown_at, shown_time = it, train_seconds
                if it % args.eval_interval == 0 or it == total:
                    result = evaluate_job(model, valid_cols, args.eval_batch_size, job.losses, precision,
                                          progress=progress.evaluating(eval_batches))
                    bar.clear()
                    log(f"iter {it}: {result.text()}", flush=True)
                    result.record(recorder, metrics, it)
                    recorder.flush()
                    progress.update(it, force=True)
                    if best is not None and best.observe(result, it, model):
                        log(best.text(), flush=True)
                        total = it          # the loops end after this iteration's snapshot
                if args.snapshot and it % args.snapshot == 0:
                    recorder.flush()        # every point up to a checkpoint is on disk before it (kill -9, --resume)
                    snapshot = {"model": model_state(model), "optimizer": optimizer_state(model, optimizer)}
                    if rank == 0:
                        save(args.output_dir / f"checkpoint_{it}.pt", {**snapshot, "iteration": it,
                                                                     **rng_state(device), "features": features})
                sync()
                start = time.perf_counter()
        skip = 0
        sync()
        train_seconds += time.perf_counter() - start
    return it, train_seconds


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
