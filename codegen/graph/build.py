"""spec + features + release profile -> TrainingJob (the validated intermediate graph).

All derived numbers are computed here (slot_size_array, leading_dim, dense_dim, slot_num, nnz_per_slot,
i64_input_key, max_vocabulary_size_global) and every HugeCTR construction check runs here, before any file is
written; failures name the spec field (with its line) and the layer.
"""

from __future__ import annotations

from typing import Any

from ..features import CATEGORICAL_DTYPES, Column, Features
from ..hugectr import api as A
from ..hugectr import versions as V
from ..inputs import INT64_MAX, UINT32_MAX
from ..specfile.load import LoadedSpec
from .context import BuildContext, extra_args
from .continuous import build_continuous
from .embedding_collection import build_collection
from .ir import (Args, Enum, FitPlan, Graph, LrSchedule, OfflineInference, Optimizer, ReaderPlan, SolverSettings,
                 TrainingJob, call_values)
from .layers import graph_analysis, infer_layers, raw_layers
from .reader_check import build_reader_check
from .shapes import Shape
from .sparse import sparse_embeddings, sparse_inputs

OPTIMIZER_FIELDS = ("beta", "lambda1", "lambda2", "beta1", "beta2", "epsilon", "initial_accu_value",
                    "momentum_factor", "atomic_update")

# The order model.py passes CreateSolver arguments in (the notebooks' order first, then HugeCTR's declaration order).
SOLVER_ORDER = ("model_name", "seed", "vvgpu", "batchsize", "batchsize_eval", "max_eval_batches", "lr",
                "warmup_steps", "decay_start", "decay_steps", "decay_power", "end_lr", "i64_input_key",
                "use_mixed_precision", "scaler", "enable_tf32_compute", "use_cuda_graph", "repeat_dataset")
SOLVER_FIELDS = SOLVER_ORDER


# ---- features --------------------------------------------------------------------------------------------------------
def _select(ctx: BuildContext, names: list[str] | None, default: tuple[Column, ...], role: str) -> tuple[Column, ...]:
    if names is None:
        return default
    out = []
    for i, n in enumerate(names):
        col = ctx.features.column(n)
        if col is None:
            known = [c.name for c in (*ctx.features.categorical, *ctx.features.continuous, *ctx.features.labels)]
            ctx.fail(("features", role, i), f"column {n!r} is not in the workflow's output",
                     fix=f"use one of {known} (from {ctx.lock_path})")
        else:
            out.append(col)
    return tuple(out)


def reader_passes_slot_sizes(ctx: BuildContext) -> bool:
    """DataReaderParams gets slot_size_array (data.slot_size_array, by default for Parquet): the reader then adds each
    slot's offset, the exclusive prefix sum of the sizes (hugectr.md §1.2)."""
    d = ctx.spec.data
    return bool(d.slot_size_array if d.slot_size_array is not None else d.format == "parquet")


def rows_from_data(ctx: BuildContext) -> bool:
    """Every table is sized by its workspace (no slot_size_array), or is an embedding collection's under a reader
    that adds no slot offsets (the keys are the ids as they are), so no slot needs a row count to generate."""
    return not reader_passes_slot_sizes(ctx) and all(not e.slot_size_array for e in ctx.spec.embeddings)


def labels_from_metadata(ctx: BuildContext) -> bool:
    """An imported script's Parquet reader with one label of label_dim > 1: its label columns have no names in the
    script (HugeCTR takes the first label_dim columns of the data's _metadata.json "labels", by index)."""
    g = ctx.spec.input
    return ctx.features.source_kind == "imported" and ctx.spec.data.format == "parquet" and \
        g.label_dim > 1 and len(ctx.features.labels) == 1


def zero_sized_slots(ctx: BuildContext) -> bool:
    """An imported script's reader passes slot_size_array (the Parquet default, no table with its own): a column
    its lock gives no cardinality is a slot of size 0 there, whose ids HugeCTR offsets into the key range of the
    next slot (add_input.cpp: the exclusive prefix sum of slot_size_array), e.g. DIN's behaviour sequences. A
    workflow's column without one stays refused (most often a column the workflow did not Categorify)."""
    s = ctx.spec
    return ctx.features.source_kind == "imported" and reader_passes_slot_sizes(ctx) and \
        s.embedding_collection is None and all(not e.slot_size_array for e in s.embeddings)


def _columns(ctx: BuildContext) -> tuple[tuple[Column, ...], tuple[Column, ...], tuple[Column, ...]]:
    f = ctx.spec.features
    cats = _select(ctx, f.categorical, ctx.features.categorical, "categorical")
    conts = _select(ctx, f.continuous, ctx.features.continuous, "continuous")
    labels = _select(ctx, f.label, ctx.features.labels, "label")
    # Cardinalities feed slot_size_array, the PyTorch tables and serving; a script imported from a Norm/Raw
    # reader with hash embeddings has none and needs none. The PyTorch trainer sizes tables that HugeCTR sizes
    # by workspace_size_per_gpu_in_mb from its data at start-up (runtime/row_counts.py).
    needs_cards = ctx.spec.triton.enabled or ("torch" in ctx.spec.targets and not rows_from_data(ctx)
                                              and not zero_sized_slots(ctx))
    for i, c in enumerate(cats):
        if c.cardinality is None and needs_cards:
            ctx.fail(("features", "categorical", i), f"column {c.name!r} has no cardinality in the workflow schema",
                     fix="Categorify it in the workflow")
    if not labels and f.label is None:
        ctx.fail(("features", "label"), "the workflow tags no target column",
                 fix="name the label column under features.label")
    if not cats:
        ctx.fail(("features", "categorical"), "no categorical columns", fix="list them under features.categorical")
    return cats, conts, labels


def _key_width(ctx: BuildContext, cats: tuple[Column, ...]) -> bool:
    """Whether the keys are 64-bit (CreateSolver's i64_input_key), with the checks that the ids are integers of one
    width and that every key fits the key type."""
    s = ctx.spec
    dtypes = {c.dtype for c in cats}
    bad = [c.name for c in cats if c.dtype not in CATEGORICAL_DTYPES]
    if bad:
        ctx.fail(("features", "categorical"), f"columns {bad} are not integer ids",
                 fix="Categorify them in the workflow")
    # The key width: Parquet ids are the workflow's columns, so the lock decides; Norm and Raw files record no
    # width, so the spec does (HugeCTR's default is 32-bit keys, CreateSolver(i64_input_key=False)).
    from_lock = s.data.format == "parquet"
    i64 = bool(dtypes & {"int64", "uint64"}) if from_lock else bool(s.solver.i64_input_key)
    if from_lock and len({d in ("int64", "uint64") for d in dtypes}) > 1:
        ctx.fail(("features", "categorical"), f"categorical columns mix 32- and 64-bit ids ({sorted(dtypes)})",
                 fix="cast them to one width in the workflow's to_parquet(dtypes=...)")
    # The keys the embeddings see are ids plus their slot's offset (the exclusive prefix sum of the cardinalities,
    # hugectr.md §1.2): the largest key, the total minus one, must fit the key type, unsigned int (32-bit ids) or
    # long long. A total of 2**32 (2**63) keys still fits.
    total = sum(c.cardinality or 0 for c in cats)
    key_max, key_type = (INT64_MAX, "long long") if i64 else (UINT32_MAX, "unsigned int")
    if total - 1 > key_max:
        ctx.fail(("features", "categorical"), f"the cardinalities add up to {total}, more keys than HugeCTR's "
                 f"{key_type} keys hold (at most {key_max + 1}: keys 0 to {key_max})",
                 fix="check the lock's cardinalities" +
                 ("" if i64 else ", or write 64-bit ids (to_parquet dtypes int64)"))
    if from_lock and s.solver.i64_input_key is not None and s.solver.i64_input_key != i64:
        ctx.fail(("solver", "i64_input_key"),
                 f"is {s.solver.i64_input_key}, but the categorical columns are {sorted(dtypes)}",
                 fix=f"remove it (ctrgen derives {i64}) or change the workflow's dtypes")
    return i64


# ---- build -----------------------------------------------------------------------------------------------------------
def build_job(loaded: LoadedSpec, features: Features, lock_path: str) -> TrainingJob:
    """The spec's checked job over ``features`` (``lock_path``: the lock as messages name it); the problems found
    are reported together (UserError), each with its spec line."""
    ctx = BuildContext(loaded, features, lock_path)
    s, p = ctx.spec, ctx.profile
    cats, conts, labels = _columns(ctx)
    ctx.raise_if_failed()

    if len(labels) > 1 and not p.has("multi_label"):
        ctx.fail(("features", "label"), f"{len(labels)} labels, but HugeCTR {p.name} takes a single label",
                 fix=f"use one label, or target {V.BEHAVIOUR['multi_label'].describe()}")

    i64 = _key_width(ctx, cats)

    gpu_count = sum(len(node) for node in s.solver.vvgpu)
    if gpu_count == 0:
        ctx.fail(("solver", "vvgpu"), "no GPU listed", fix="e.g. vvgpu: [[0]]")
    elif s.solver.batchsize % gpu_count:
        ctx.fail(("solver", "batchsize"),
                 f'{s.solver.batchsize} is not divisible by the {gpu_count} GPUs in vvgpu '
                 f'(HugeCTR: "0 != batch_size%total_gpu_count")',
                 fix=f"use a multiple of {gpu_count}")
    _check_solver(ctx)
    _check_files(ctx, gpu_count)

    sparse = sparse_inputs(ctx, cats)
    optimizer = _optimizer(ctx)
    embeddings = sparse_embeddings(ctx, sparse, optimizer, gpu_count)
    continuous = build_continuous(ctx, len(s.embeddings), len(s.solver.vvgpu))

    label_names = tuple([s.input.label_name] if len(labels) == 1 else [c.name for c in labels])
    label_dims = (s.input.label_dim,) if len(label_names) == 1 else tuple(1 for _ in label_names)
    if s.input.label_dim != 1 and len(label_names) > 1:
        ctx.fail(("input", "label_dim"), "label_dim applies to a single label; several labels have dimension 1",
                 fix="remove input.label_dim")
    graph_inputs: dict[str, Shape] = {name: Shape((d,)) for name, d in zip(label_names, label_dims)}
    graph_inputs[s.input.dense_name] = Shape((len(conts),))
    for e in embeddings:
        graph_inputs[e.name] = e.shape
    for si in sparse:
        graph_inputs[si.name] = Shape((si.slot_num,))
    if len(set(graph_inputs)) != len(label_names) + 1 + len(embeddings) + len(sparse):
        ctx.fail(("input",), "label, dense, sparse input and embedding names must all differ")
    collection = build_collection(ctx, sparse)
    if collection is not None:
        clash = sorted(set(collection.outputs()) & set(graph_inputs))
        if clash:
            ctx.fail(("embedding_collection", "lookups"), f"lookup tops {clash} are already input names",
                     fix="give every lookup top a new name")
        graph_inputs.update(collection.outputs())
    if ctx.spec.embedding_collection is not None:
        ctx.raise_if_failed()  # the dense graph cannot be checked without the collection's outputs
    if len(embeddings) != len(ctx.spec.embeddings):
        ctx.raise_if_failed()  # the dense graph cannot be checked without its embeddings

    raw = raw_layers(ctx, embeddings, len(conts), label_names)
    layers = infer_layers(ctx, raw, graph_inputs)
    ctx.raise_if_failed()
    analysed = graph_analysis(ctx, layers, graph_inputs)
    ctx.raise_if_failed()

    graph = Graph(label_names=label_names, label_dims=label_dims,
                  dense_name=s.input.dense_name, dense_dim=len(conts), sparse=tuple(sparse),
                  embeddings=tuple(embeddings), layers=tuple(layers), analysed=tuple(analysed),
                  collection=collection)
    solver, reader, fit = _solver_args(ctx, i64), _reader_args(ctx, cats, continuous), _fit_args(ctx)
    job = TrainingJob(
        name=s.name, profile=p, solver=solver, optimizer=optimizer, reader=reader, graph=graph, fit=fit,
        graph_json=s.training.graph_json or f"{s.name}.json",
        setup_order=tuple(s.script.setup), after_compile=tuple(s.script.after_compile),
        compile_args=extra_args(ctx, "Model.compile", ("training", "compile"), s.training.compile, ()),
        before_compile=tuple(s.script.before_compile), model_class=_model_class(ctx),
        data_source=_data_source(ctx),
        data_generator=None if s.data.generate is None else extra_args(
            ctx, "tools.DataGeneratorParams", ("data", "generate"), s.data.generate, ()),
        offline_inference=_offline_inference(ctx),
        then=tuple((c.method, _model_call(ctx, i, c)) for i, c in enumerate(s.training.then)),
        before_fit=tuple((c.method, _model_call(ctx, i, c, "before_fit"))
                         for i, c in enumerate(s.training.before_fit)),
        gpu_count=gpu_count,
        batchsize=s.solver.batchsize, mixed_precision=s.solver.use_mixed_precision, i64_input_key=i64,
        model_name=s.name if s.solver.model_name else "", continuous=continuous, nodes=len(s.solver.vvgpu),
        save_weights=s.training.save_weights, reader_check=build_reader_check(ctx),
        labels_from_metadata=labels_from_metadata(ctx), **_settings(solver, reader, fit, p.name))
    ctx.raise_if_failed()   # the argument checks above (args: maps) must not drop anything silently
    return job


# ---- the settings in effect ------------------------------------------------------------------------------------------
def _settings(solver: Args, reader: Args, fit: Args, release: str) -> dict:
    """The job's SolverSettings, ReaderPlan and FitPlan: each call's arguments as given over HugeCTR's defaults in
    ``release`` (call_values), read here once by name so that no renderer does."""
    s = call_values("CreateSolver", solver, release)
    r = call_values("DataReaderParams", reader, release)
    f = call_values("Model.fit", fit, release)
    given_solver: dict[str, Any] = dict(solver)
    given_fit: dict[str, Any] = dict(fit)
    schedule = LrSchedule(lr=float(s["lr"]), warmup_steps=int(s["warmup_steps"]), decay_start=int(s["decay_start"]),
                          decay_steps=int(s["decay_steps"]), decay_power=float(s["decay_power"]),
                          end_lr=float(s["end_lr"]))
    settings = SolverSettings(
        vvgpu=tuple(tuple(node) for node in s["vvgpu"]), batchsize=int(s["batchsize"]),
        batchsize_eval=int(s["batchsize_eval"]), max_eval_batches=int(s["max_eval_batches"]), seed=int(s["seed"]),
        schedule=schedule, use_mixed_precision=bool(s["use_mixed_precision"]),
        enable_tf32_compute=bool(s["enable_tf32_compute"]),
        scaler=float(given_solver["scaler"]) if given_solver.get("scaler") else None)
    return {"settings": settings, "reader_plan": ReaderPlan(
        data_reader_type=r["data_reader_type"], source=tuple(r["source"]), eval_source=str(r["eval_source"]),
        check_type=r["check_type"], slot_sizes="slot_size_array" in dict(reader), num_workers=int(r["num_workers"])),
        "fit_plan": FitPlan(
            by_epochs="num_epochs" in given_fit, num_epochs=int(f["num_epochs"]),
            max_iter=None if given_fit.get("max_iter") is None else int(given_fit["max_iter"]),
            display=int(f["display"]), eval_interval=int(f["eval_interval"]), snapshot=int(f["snapshot"]),
            snapshot_prefix=str(f["snapshot_prefix"]))}


# ---- solver ----------------------------------------------------------------------------------------------------------
def _check_solver(ctx: BuildContext) -> None:
    s, p = ctx.spec.solver, ctx.profile
    if s.use_mixed_precision and s.enable_tf32_compute:
        ctx.fail(("solver", "enable_tf32_compute"),
                 '"use_mixed_precision and enable_tf32_compute cannot be true at the same time"',
                 fix="drop one of them")
    if s.use_mixed_precision and p.has("solver_scaler_check"):
        scaler = s.scaler if s.scaler is not None else 1.0
        if scaler not in (128, 256, 512, 1024):
            ctx.fail(("solver", "scaler"),
                     f'HugeCTR {p.name} requires a mixed-precision scaler of 128/256/512/1024, got {scaler:g} '
                     '("Scaler of mixed precision training should be either 128/256/512/1024")',
                     fix="set solver.scaler: 1024")
    for step in ("warmup_steps", "decay_steps"):
        if getattr(s, step) == 0 and not p.has("lr_steps_zero"):
            ctx.fail(("solver", step),
                     f'HugeCTR {p.name} requires {step} >= 1 ("base_lr < 0 || warmup_steps < 1 || decay_steps < 1 '
                     f'|| decay_power < 1.0 || end_lr < 0.f"); 0 is accepted from 23.04',
                     fix=f"set solver.{step}: 1 (HugeCTR's default)")
    if s.model_name and not p.has("model_name"):
        ctx.fail(("solver", "model_name"), V.BEHAVIOUR["model_name"].describe().join(
            ("CreateSolver(model_name=...) needs ", f"; the target is {p.name}")), fix="remove it")
    t = ctx.spec.training
    if s.repeat_dataset and t.num_epochs is not None:
        ctx.fail(("training", "num_epochs"), "num_epochs needs epoch mode (solver.repeat_dataset: false)",
                 fix="use training.max_iter, or set solver.repeat_dataset: false")
    if not s.repeat_dataset and not t.num_epochs:
        ctx.fail(("training", "num_epochs"), '"Require num_epochs>0 under epoch mode" (repeat_dataset is false)',
                 fix="set training.num_epochs")
    if s.repeat_dataset and not t.max_iter:
        ctx.fail(("training", "max_iter"), '"Require max_iter>0 under non-epoch mode"', fix="set training.max_iter")


def _check_files(ctx: BuildContext, gpu_count: int) -> None:
    d = ctx.spec.data
    # HugeCTR's Parquet reader runs one worker per GPU over the file list (HugeCTR#298: "The number of data reader
    # workers should be no greater than the number of files in the file list").
    if d.train_files is not None and d.format == "parquet" and d.train_files < gpu_count:
        ctx.fail(("data", "train_files"),
                 f"{d.train_files} Parquet file(s) for {gpu_count} GPUs in solver.vvgpu: HugeCTR's Parquet reader "
                 "runs one worker per GPU and needs at least one file per worker",
                 fix=f"write the dataset as at least {gpu_count} files (to_parquet(out_files_per_proc=...)) "
                     "or use fewer GPUs")


def _solver_args(ctx: BuildContext, i64: bool) -> tuple:
    s = ctx.spec.solver
    values: dict[str, object] = {
        "vvgpu": s.vvgpu, "batchsize": s.batchsize, "batchsize_eval": s.batchsize_eval,
        "max_eval_batches": s.max_eval_batches, "i64_input_key": i64,
        "use_mixed_precision": s.use_mixed_precision, "repeat_dataset": s.repeat_dataset,
    }
    optional = {"seed": s.seed, "lr": s.lr, "warmup_steps": s.warmup_steps, "decay_start": s.decay_start,
                "decay_steps": s.decay_steps, "decay_power": s.decay_power, "end_lr": s.end_lr,
                "scaler": s.scaler, "enable_tf32_compute": s.enable_tf32_compute,
                "use_cuda_graph": s.use_cuda_graph}
    values.update({k: v for k, v in optional.items() if v is not None})
    if s.model_name:
        values["model_name"] = ctx.spec.name
    typed = tuple((k, values[k]) for k in SOLVER_ORDER if k in values)
    return typed + extra_args(ctx, "CreateSolver", ("solver", "args"), s.args, SOLVER_FIELDS)


def _data_source(ctx: BuildContext) -> tuple | None:
    d = ctx.spec.data.data_source
    if d is None:
        return None
    msg = ctx.profile.missing_function("data.DataSource")
    if msg:
        ctx.fail(("data", "data_source"), msg, fix="remove data_source or target another release")
        return None
    return extra_args(ctx, "data.DataSourceParams", ("data", "data_source", "params"), d.params, ()), \
        d.move_to_local


def _model_class(ctx: BuildContext) -> str:
    cls = ctx.spec.script.model_class
    msg = ctx.profile.missing_function(cls)
    if msg:
        ctx.fail(("script", "model_class"), msg, fix="use Model, or target another release")
    return cls


def _offline_inference(ctx: BuildContext) -> OfflineInference | None:
    o = ctx.spec.offline_inference
    if o is None:
        return None
    loc = ("offline_inference",)
    api = o.api or V.default_inference_api(ctx.profile.release)
    msg = ctx.profile.missing(V.API, f"inference.{api}", "hugectr.inference API")
    if msg:
        ctx.fail(loc, msg, fix="remove offline_inference or target another release")
    return OfflineInference(
        api=api, graph_json=o.graph_json or ctx.spec.training.graph_json or f"{ctx.spec.name}.json",
        params=extra_args(ctx, "inference.InferenceParams", (*loc, "params"), o.params, ()),
        predict=extra_args(ctx, f"inference.{api}.predict", (*loc, "predict"), o.predict, ()),
        compare_with=o.compare_with, max_mse=o.max_mse, then=_inference_calls(ctx, api, o.then))


def _inference_calls(ctx: BuildContext, api: str, calls) -> tuple:
    out = []
    for i, call in enumerate(calls):
        loc = ("offline_inference", "then", i)
        func = f"{V.INFERENCE_CLASS[api]}.{call.method}"
        msg = ctx.profile.missing_function(func)
        if msg:
            ctx.fail((*loc, "method"), msg, fix="remove it or target another release")
            continue
        out.append((call.method, extra_args(ctx, func, (*loc, "args"), call.args, ())))
    return tuple(out)


def _model_call(ctx: BuildContext, i: int, call, where: str = "then") -> tuple:
    if call.method not in V.MODEL_METHODS:
        ctx.fail(("training", where, i, "method"), f"Model.{call.method} has no spec support",
                 fix="use one of " + ", ".join(sorted(V.MODEL_METHODS)))
        return ()
    msg = ctx.profile.missing_function(f"Model.{call.method}")
    if msg:
        ctx.fail(("training", where, i, "method"), msg, fix="remove it or target another release")
        return ()
    return extra_args(ctx, f"Model.{call.method}", ("training", where, i, "args"), call.args, ())


# ---- reader ----------------------------------------------------------------------------------------------------------
def _reader_args(ctx: BuildContext, cats: tuple[Column, ...], continuous=None) -> tuple:
    d = ctx.spec.data
    fmt = {"parquet": "Parquet", "norm": "Norm", "raw": "Raw", "raw_async": "RawAsync"}[d.format]
    args: list[tuple[str, object]] = [
        ("data_reader_type", Enum("DataReaderType_t", fmt)),
        ("source", list(d.train)),
    ]
    if continuous is not None and continuous.passes:
        # The first pass's keysets: the cache loads them before the first fit (hugectr.md §1.8).
        args.append(("keyset", list(continuous.passes[0].keyset)))
    args += [
        ("eval_source", d.eval),
        ("check_type", Enum("Check_t", ctx.spec.reader_check_type())),
    ]
    if reader_passes_slot_sizes(ctx):          # order = slot order
        args.append(("slot_size_array", [int(c.cardinality or 0) for c in cats]))
    if d.num_workers is not None:
        args.append(("num_workers", d.num_workers))
    typed = ("data_reader_type", "source", "keyset", "eval_source", "check_type", "slot_size_array", "num_workers")
    return tuple(args) + extra_args(ctx, "DataReaderParams", ("data", "args"), d.args, typed)


# ---- optimizer -------------------------------------------------------------------------------------------------------
def _optimizer(ctx: BuildContext) -> Optimizer:
    o, p = ctx.spec.optimizer, ctx.profile
    msg = p.missing(V.OPTIMIZERS, o.type, "optimizer")
    if msg:
        ctx.fail(("optimizer", "type"), msg, fix="choose another optimizer or target a newer release")
    hparams: list[tuple[str, object]] = []
    if o.update_type is not None:
        hparams.append(("update_type", Enum("Update_t", o.update_type)))
    for name in OPTIMIZER_FIELDS:
        value = getattr(o, name)
        if value is None:
            continue
        if not p.has_arg("CreateOptimizer", name):
            ctx.fail(("optimizer", name), p.missing(V.ARGS["CreateOptimizer"], name, "CreateOptimizer argument")
                     or "", fix="remove it")
        hparams.append((name, value))
    hparams += extra_args(ctx, "CreateOptimizer", ("optimizer", "args"), o.args,
                          ("optimizer_type", "update_type", *OPTIMIZER_FIELDS))
    table = {k: v for k, v in A.defaults("CreateOptimizer", p.name).items() if k not in ("optimizer_type", "update_type")}
    values = {**V.FTRL_STRUCT_DEFAULTS, **table, **{k: v for k, v in hparams if k != "update_type"}}
    return Optimizer(type=o.type, update_type=o.update_type or "Global", hparams=tuple(hparams), values=values)


# ---- fit -------------------------------------------------------------------------------------------------------------
def _fit_args(ctx: BuildContext) -> tuple:
    t = ctx.spec.training
    args: list[tuple[str, object]] = []
    if not ctx.spec.solver.repeat_dataset:
        args.append(("num_epochs", t.num_epochs))
        if t.max_iter is not None:
            # HugeCTR ignores max_iter in epoch mode; a spec that gives it (an imported fit call passing both)
            # gets it written, so model.py makes the source's call argument for argument
            args.append(("max_iter", t.max_iter))
    else:
        args.append(("max_iter", t.max_iter))
    args += [("display", t.display), ("eval_interval", t.eval_interval)]
    if t.snapshot is not None:
        args.append(("snapshot", t.snapshot))
    if t.snapshot_prefix:
        args.append(("snapshot_prefix", t.snapshot_prefix))
    typed = ("num_epochs", "max_iter", "display", "eval_interval", "snapshot", "snapshot_prefix")
    return tuple(args) + extra_args(ctx, "Model.fit", ("training", "args"), t.args, typed)
