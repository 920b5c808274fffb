"""spec + features + release profile -> TrainingJob (the validated intermediate graph).

All derived numbers are computed here (slot_size_array, leading_dim, dense_dim, slot_num, nnz_per_slot,
i64_input_key, max_vocabulary_size_global) and every HugeCTR construction check runs here, before any file is
written; failures name the spec field (with its line) and the layer.
"""

from __future__ import annotations

from ..errors import Problem, UserError, field_path
from ..features import CATEGORICAL_DTYPES, Column, Features
from ..hugectr import versions as V
from ..hugectr.arg_types import arg_problem
from ..inputs import INT64_MAX, UINT32_MAX
from ..spec.load import LoadedSpec
from ..spec.model import Spec
from .continuous import build_continuous
from .embedding_collection import build_collection
from .ir import Enum, Graph, OfflineInference, Optimizer, TrainingJob, enum_values
from .layers import DenseLayers
from .reader_check import build_reader_check
from .shapes import Shape
from .sparse import SparseParts

OPTIMIZER_FIELDS = ("beta", "lambda1", "lambda2", "beta1", "beta2", "epsilon", "initial_accu_value",
                    "momentum_factor", "atomic_update")

# The order model.py passes CreateSolver arguments in (the notebooks' order first, then HugeCTR's declaration order).
SOLVER_ORDER = ("model_name", "seed", "vvgpu", "batchsize", "batchsize_eval", "max_eval_batches", "lr",
                "warmup_steps", "decay_start", "decay_steps", "decay_power", "end_lr", "i64_input_key",
                "use_mixed_precision", "scaler", "enable_tf32_compute", "use_cuda_graph", "repeat_dataset")
SOLVER_FIELDS = SOLVER_ORDER


class Builder(SparseParts, DenseLayers):
    def __init__(self, loaded: LoadedSpec, features: Features, lock_path: str):
        self.loaded = loaded
        self.spec: Spec = loaded.spec
        self.features = features
        self.lock_path = lock_path
        self.problems: list[Problem] = []
        prof = V.profile(self.spec.hugectr_version) if self.spec.hugectr_version in V.SUPPORTED else None
        if prof is None:
            raise loaded.error(("hugectr_version",),
                               f"unsupported HugeCTR release {self.spec.hugectr_version!r}",
                               fix="use one of " + ", ".join(repr(v) for v in V.SUPPORTED))
        self.profile: V.Profile = prof

    # ---- problem reporting --------------------------------------------------------------------------------------
    def fail(self, loc: tuple, message: str, fix: str = "") -> None:
        line, col = self.loaded.where(*loc)
        self.problems.append(Problem(str(self.loaded.path), message, field_path(loc), line, col, fix))

    def raise_if_failed(self) -> None:
        if self.problems:
            raise UserError(self.problems)

    # ---- features -----------------------------------------------------------------------------------------------
    def _select(self, names: list[str] | None, default: tuple[Column, ...], role: str) -> tuple[Column, ...]:
        if names is None:
            return default
        out = []
        for i, n in enumerate(names):
            col = self.features.column(n)
            if col is None:
                known = [c.name for c in (*self.features.categorical, *self.features.continuous, *self.features.labels)]
                self.fail(("features", role, i), f"column {n!r} is not in the workflow's output",
                          fix=f"use one of {known} (from {self.lock_path})")
            else:
                out.append(col)
        return tuple(out)

    def rows_from_data(self) -> bool:
        """Every table is sized by its workspace (no slot_size_array), or is an embedding collection's under a reader
        that adds no slot offsets (the keys are the ids as they are), so no slot needs a row count to generate."""
        s, d = self.spec, self.spec.data
        reader = d.slot_size_array if d.slot_size_array is not None else d.format == "parquet"
        return not reader and all(not e.slot_size_array for e in s.embeddings)

    def labels_from_metadata(self) -> bool:
        """An imported script's Parquet reader with one label of label_dim > 1: its label columns have no names in the
        script (HugeCTR takes the first label_dim columns of the data's _metadata.json "labels", by index)."""
        g = self.spec.input
        return self.features.source_kind == "imported" and self.spec.data.format == "parquet" and \
            g.label_dim > 1 and len(self.features.labels) == 1

    def zero_sized_slots(self) -> bool:
        """An imported script's reader passes slot_size_array (the Parquet default, no table with its own): a column
        its lock gives no cardinality is a slot of size 0 there, whose ids HugeCTR offsets into the key range of the
        next slot (add_input.cpp: the exclusive prefix sum of slot_size_array), e.g. DIN's behaviour sequences. A
        workflow's column without one stays refused (most often a column the workflow did not Categorify)."""
        s, d = self.spec, self.spec.data
        reader = d.slot_size_array if d.slot_size_array is not None else d.format == "parquet"
        return self.features.source_kind == "imported" and bool(reader) and s.embedding_collection is None and \
            all(not e.slot_size_array for e in s.embeddings)

    def columns(self) -> tuple[tuple[Column, ...], tuple[Column, ...], tuple[Column, ...]]:
        f = self.spec.features
        cats = self._select(f.categorical, self.features.categorical, "categorical")
        conts = self._select(f.continuous, self.features.continuous, "continuous")
        labels = self._select(f.label, self.features.labels, "label")
        # Cardinalities feed slot_size_array, the PyTorch tables and serving; a script imported from a Norm/Raw
        # reader with hash embeddings has none and needs none. The PyTorch trainer sizes tables that HugeCTR sizes
        # by workspace_size_per_gpu_in_mb from its data at start-up (runtime/row_counts.py).
        needs_cards = self.spec.triton.enabled or ("torch" in self.spec.targets and not self.rows_from_data()
                                                   and not self.zero_sized_slots())
        for i, c in enumerate(cats):
            if c.cardinality is None and needs_cards:
                self.fail(("features", "categorical", i), f"column {c.name!r} has no cardinality in the workflow schema",
                          fix="Categorify it in the workflow")
        if not labels and f.label is None:
            self.fail(("features", "label"), "the workflow tags no target column",
                      fix="name the label column under features.label")
        if not cats:
            self.fail(("features", "categorical"), "no categorical columns", fix="list them under features.categorical")
        return cats, conts, labels

    # ---- build --------------------------------------------------------------------------------------------------
    def build(self) -> TrainingJob:
        s, p = self.spec, self.profile
        cats, conts, labels = self.columns()
        self.raise_if_failed()

        if len(labels) > 1 and not p.has("multi_label"):
            self.fail(("features", "label"), f"{len(labels)} labels, but HugeCTR {p.name} takes a single label",
                      fix=f"use one label, or target {V.BEHAVIOUR['multi_label'].describe()}")

        dtypes = {c.dtype for c in cats}
        bad = [c.name for c in cats if c.dtype not in CATEGORICAL_DTYPES]
        if bad:
            self.fail(("features", "categorical"), f"columns {bad} are not integer ids",
                      fix="Categorify them in the workflow")
        # The key width: Parquet ids are the workflow's columns, so the lock decides; Norm and Raw files record no
        # width, so the spec does (HugeCTR's default is 32-bit keys, CreateSolver(i64_input_key=False)).
        from_lock = s.data.format == "parquet"
        i64 = bool(dtypes & {"int64", "uint64"}) if from_lock else bool(s.solver.i64_input_key)
        if from_lock and len({d in ("int64", "uint64") for d in dtypes}) > 1:
            self.fail(("features", "categorical"), f"categorical columns mix 32- and 64-bit ids ({sorted(dtypes)})",
                      fix="cast them to one width in the workflow's to_parquet(dtypes=...)")
        # The keys the embeddings see are ids plus their slot's offset (the exclusive prefix sum of the cardinalities,
        # hugectr.md §1.2): the largest key, the total minus one, must fit the key type, unsigned int (32-bit ids) or
        # long long. A total of 2**32 (2**63) keys still fits.
        total = sum(c.cardinality or 0 for c in cats)
        key_max, key_type = (INT64_MAX, "long long") if i64 else (UINT32_MAX, "unsigned int")
        if total - 1 > key_max:
            self.fail(("features", "categorical"), f"the cardinalities add up to {total}, more keys than HugeCTR's "
                      f"{key_type} keys hold (at most {key_max + 1}: keys 0 to {key_max})",
                      fix="check the lock's cardinalities" +
                      ("" if i64 else ", or write 64-bit ids (to_parquet dtypes int64)"))
        if from_lock and s.solver.i64_input_key is not None and s.solver.i64_input_key != i64:
            self.fail(("solver", "i64_input_key"),
                      f"is {s.solver.i64_input_key}, but the categorical columns are {sorted(dtypes)}",
                      fix=f"remove it (ctrgen derives {i64}) or change the workflow's dtypes")

        gpu_count = sum(len(node) for node in s.solver.vvgpu)
        if gpu_count == 0:
            self.fail(("solver", "vvgpu"), "no GPU listed", fix="e.g. vvgpu: [[0]]")
        elif s.solver.batchsize % gpu_count:
            self.fail(("solver", "batchsize"),
                      f'{s.solver.batchsize} is not divisible by the {gpu_count} GPUs in vvgpu '
                      f'(HugeCTR: "0 != batch_size%total_gpu_count")',
                      fix=f"use a multiple of {gpu_count}")
        self._check_solver()
        self._check_files(gpu_count)

        sparse = self._sparse_inputs(cats)
        optimizer = self._optimizer()
        embeddings = self._embeddings(sparse, optimizer, gpu_count)
        continuous = build_continuous(self, len(s.embeddings), len(s.solver.vvgpu))

        label_names = tuple([s.input.label_name] if len(labels) == 1 else [c.name for c in labels])
        label_dims = (s.input.label_dim,) if len(label_names) == 1 else tuple(1 for _ in label_names)
        if s.input.label_dim != 1 and len(label_names) > 1:
            self.fail(("input", "label_dim"), "label_dim applies to a single label; several labels have dimension 1",
                      fix="remove input.label_dim")
        graph_inputs: dict[str, Shape] = {name: Shape((d,)) for name, d in zip(label_names, label_dims)}
        graph_inputs[s.input.dense_name] = Shape((len(conts),))
        for e in embeddings:
            graph_inputs[e.name] = e.shape
        for si in sparse:
            graph_inputs[si.name] = Shape((si.slot_num,))
        if len(set(graph_inputs)) != len(label_names) + 1 + len(embeddings) + len(sparse):
            self.fail(("input",), "label, dense, sparse input and embedding names must all differ")
        collection = build_collection(self, sparse)
        if collection is not None:
            clash = sorted(set(collection.outputs()) & set(graph_inputs))
            if clash:
                self.fail(("embedding_collection", "lookups"), f"lookup tops {clash} are already input names",
                          fix="give every lookup top a new name")
            graph_inputs.update(collection.outputs())
        if self.spec.embedding_collection is not None:
            self.raise_if_failed()  # the dense graph cannot be checked without the collection's outputs
        if len(embeddings) != len(self.spec.embeddings):
            self.raise_if_failed()  # the dense graph cannot be checked without its embeddings

        raw = self._raw_layers(embeddings, len(conts), label_names)
        layers = self._infer(raw, graph_inputs)
        self.raise_if_failed()
        analysed = self._graph_analysis(layers, graph_inputs)
        self.raise_if_failed()

        graph = Graph(label_names=label_names, label_dims=label_dims,
                      dense_name=s.input.dense_name, dense_dim=len(conts), sparse=tuple(sparse),
                      embeddings=tuple(embeddings), layers=tuple(layers), analysed=tuple(analysed),
                      collection=collection)
        job = TrainingJob(
            name=s.name, profile=p, solver=self._solver_args(i64), optimizer=optimizer,
            reader=self._reader_args(cats, continuous), graph=graph, fit=self._fit_args(),
            graph_json=s.training.graph_json or f"{s.name}.json",
            setup_order=tuple(s.script.setup), after_compile=tuple(s.script.after_compile),
            compile_args=self._extra_args("Model.compile", ("training", "compile"), s.training.compile, ()),
            before_compile=tuple(s.script.before_compile), model_class=self._model_class(),
            data_source=self._data_source(),
            data_generator=None if s.data.generate is None else self._extra_args(
                "tools.DataGeneratorParams", ("data", "generate"), s.data.generate, ()),
            offline_inference=self._offline_inference(),
            then=tuple((c.method, self._model_call(i, c)) for i, c in enumerate(s.training.then)),
            before_fit=tuple((c.method, self._model_call(i, c, "before_fit"))
                             for i, c in enumerate(s.training.before_fit)),
            gpu_count=gpu_count,
            batchsize=s.solver.batchsize, mixed_precision=s.solver.use_mixed_precision, i64_input_key=i64,
            model_name=s.name if s.solver.model_name else "", continuous=continuous, nodes=len(s.solver.vvgpu),
            save_weights=s.training.save_weights, reader_check=build_reader_check(self),
            labels_from_metadata=self.labels_from_metadata())
        self.raise_if_failed()   # the argument checks above (args: maps) must not drop anything silently
        return job

    # ---- solver ---------------------------------------------------------------------------------------------------
    def _check_solver(self) -> None:
        s, p = self.spec.solver, self.profile
        if s.use_mixed_precision and s.enable_tf32_compute:
            self.fail(("solver", "enable_tf32_compute"),
                      '"use_mixed_precision and enable_tf32_compute cannot be true at the same time"',
                      fix="drop one of them")
        if s.use_mixed_precision and p.has("solver_scaler_check"):
            scaler = s.scaler if s.scaler is not None else 1.0
            if scaler not in (128, 256, 512, 1024):
                self.fail(("solver", "scaler"),
                          f'HugeCTR {p.name} requires a mixed-precision scaler of 128/256/512/1024, got {scaler:g} '
                          '("Scaler of mixed precision training should be either 128/256/512/1024")',
                          fix="set solver.scaler: 1024")
        for step in ("warmup_steps", "decay_steps"):
            if getattr(s, step) == 0 and not p.has("lr_steps_zero"):
                self.fail(("solver", step),
                          f'HugeCTR {p.name} requires {step} >= 1 ("base_lr < 0 || warmup_steps < 1 || decay_steps < 1 '
                          f'|| decay_power < 1.0 || end_lr < 0.f"); 0 is accepted from 23.04',
                          fix=f"set solver.{step}: 1 (HugeCTR's default)")
        if s.model_name and not p.has("model_name"):
            self.fail(("solver", "model_name"), V.BEHAVIOUR["model_name"].describe().join(
                ("CreateSolver(model_name=...) needs ", f"; the target is {p.name}")), fix="remove it")
        t = self.spec.training
        if s.repeat_dataset and t.num_epochs is not None:
            self.fail(("training", "num_epochs"), "num_epochs needs epoch mode (solver.repeat_dataset: false)",
                      fix="use training.max_iter, or set solver.repeat_dataset: false")
        if not s.repeat_dataset and not t.num_epochs:
            self.fail(("training", "num_epochs"), '"Require num_epochs>0 under epoch mode" (repeat_dataset is false)',
                      fix="set training.num_epochs")
        if s.repeat_dataset and not t.max_iter:
            self.fail(("training", "max_iter"), '"Require max_iter>0 under non-epoch mode"', fix="set training.max_iter")

    def _check_files(self, gpu_count: int) -> None:
        d = self.spec.data
        # HugeCTR's Parquet reader runs one worker per GPU over the file list (HugeCTR#298: "The number of data reader
        # workers should be no greater than the number of files in the file list").
        if d.train_files is not None and d.format == "parquet" and d.train_files < gpu_count:
            self.fail(("data", "train_files"),
                      f"{d.train_files} Parquet file(s) for {gpu_count} GPUs in solver.vvgpu: HugeCTR's Parquet reader "
                      "runs one worker per GPU and needs at least one file per worker",
                      fix=f"write the dataset as at least {gpu_count} files (to_parquet(out_files_per_proc=...)) "
                          "or use fewer GPUs")

    def _solver_args(self, i64: bool) -> tuple:
        s = self.spec.solver
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
            values["model_name"] = self.spec.name
        typed = tuple((k, values[k]) for k in SOLVER_ORDER if k in values)
        return typed + self._extra_args("CreateSolver", ("solver", "args"), s.args, SOLVER_FIELDS)

    def _data_source(self) -> tuple | None:
        d = self.spec.data.data_source
        if d is None:
            return None
        msg = self.profile.missing_function("data.DataSource")
        if msg:
            self.fail(("data", "data_source"), msg, fix="remove data_source or target another release")
            return None
        return self._extra_args("data.DataSourceParams", ("data", "data_source", "params"), d.params, ()), \
            d.move_to_local

    def _model_class(self) -> str:
        cls = self.spec.script.model_class
        msg = self.profile.missing_function(cls)
        if msg:
            self.fail(("script", "model_class"), msg, fix="use Model, or target another release")
        return cls

    def _offline_inference(self) -> OfflineInference | None:
        o = self.spec.offline_inference
        if o is None:
            return None
        loc = ("offline_inference",)
        api = o.api or V.default_inference_api(self.profile.release)
        msg = self.profile.missing(V.API, f"inference.{api}", "hugectr.inference API")
        if msg:
            self.fail(loc, msg, fix="remove offline_inference or target another release")
        return OfflineInference(
            api=api, graph_json=o.graph_json or self.spec.training.graph_json or f"{self.spec.name}.json",
            params=self._extra_args("inference.InferenceParams", (*loc, "params"), o.params, ()),
            predict=self._extra_args(f"inference.{api}.predict", (*loc, "predict"), o.predict, ()),
            compare_with=o.compare_with, max_mse=o.max_mse, then=self._inference_calls(api, o.then))

    def _inference_calls(self, api: str, calls) -> tuple:
        out = []
        for i, call in enumerate(calls):
            loc = ("offline_inference", "then", i)
            func = f"{V.INFERENCE_CLASS[api]}.{call.method}"
            msg = self.profile.missing_function(func)
            if msg:
                self.fail((*loc, "method"), msg, fix="remove it or target another release")
                continue
            out.append((call.method, self._extra_args(func, (*loc, "args"), call.args, ())))
        return tuple(out)

    def _model_call(self, i: int, call, where: str = "then") -> tuple:
        if call.method not in V.MODEL_METHODS:
            self.fail(("training", where, i, "method"), f"Model.{call.method} has no spec support",
                      fix="use one of " + ", ".join(sorted(V.MODEL_METHODS)))
            return ()
        msg = self.profile.missing_function(f"Model.{call.method}")
        if msg:
            self.fail(("training", where, i, "method"), msg, fix="remove it or target another release")
            return ()
        return self._extra_args(f"Model.{call.method}", ("training", where, i, "args"), call.args, ())

    def _extra_args(self, func: str, loc: tuple, args: dict, typed: tuple[str, ...]) -> tuple:
        """A spec's ``args:`` map -> checked keyword arguments (enum members from "Type.Member" strings)."""
        out = []
        for name, value in args.items():
            if name in typed:
                self.fail((*loc, name), f"{name!r} has its own field; give it there, not under args",
                          fix=f"move it to {'.'.join(loc[:-1])}.{name}")
                continue
            msg = self.profile.missing_arg(func, name)
            if msg:
                self.fail((*loc, name), msg, fix="remove it or check its spelling")
                continue
            why = arg_problem(func, self.profile.name, name, value)
            if why:
                self.fail((*loc, name), f"{func} argument {name!r}: {why}", fix="give a value of that type")
                continue
            out.append((name, enum_values(value)))
        return tuple(out)

    # ---- reader ---------------------------------------------------------------------------------------------------
    def _reader_args(self, cats: tuple[Column, ...], continuous=None) -> tuple:
        d = self.spec.data
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
            ("check_type", Enum("Check_t", self.spec.reader_check_type())),
        ]
        if d.slot_size_array if d.slot_size_array is not None else d.format == "parquet":
            # The reader adds per-slot offsets from these (hugectr.md §1.2); order = slot order.
            args.append(("slot_size_array", [int(c.cardinality or 0) for c in cats]))
        if d.num_workers is not None:
            args.append(("num_workers", d.num_workers))
        typed = ("data_reader_type", "source", "keyset", "eval_source", "check_type", "slot_size_array", "num_workers")
        return tuple(args) + self._extra_args("DataReaderParams", ("data", "args"), d.args, typed)

    # ---- optimizer ------------------------------------------------------------------------------------------------
    def _optimizer(self) -> Optimizer:
        o, p = self.spec.optimizer, self.profile
        msg = p.missing(V.OPTIMIZERS, o.type, "optimizer")
        if msg:
            self.fail(("optimizer", "type"), msg, fix="choose another optimizer or target a newer release")
        hparams: list[tuple[str, object]] = []
        if o.update_type is not None:
            hparams.append(("update_type", Enum("Update_t", o.update_type)))
        for name in OPTIMIZER_FIELDS:
            value = getattr(o, name)
            if value is None:
                continue
            if not p.has_arg("CreateOptimizer", name):
                self.fail(("optimizer", name), p.missing(V.ARGS["CreateOptimizer"], name, "CreateOptimizer argument")
                          or "", fix="remove it")
            hparams.append((name, value))
        hparams += self._extra_args("CreateOptimizer", ("optimizer", "args"), o.args,
                                    ("optimizer_type", "update_type", *OPTIMIZER_FIELDS))
        defaults = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-7, "initial_accu_value": 0.0, "momentum_factor": 0.0,
                    "atomic_update": True, "beta": 0.0, "lambda1": 0.0, "lambda2": 0.0}
        values = {**defaults, **{k: v for k, v in hparams if k != "update_type"}}
        return Optimizer(type=o.type, update_type=o.update_type or "Global", hparams=tuple(hparams), values=values)

    # ---- fit ------------------------------------------------------------------------------------------------------
    def _fit_args(self) -> tuple:
        t = self.spec.training
        args: list[tuple[str, object]] = []
        if not self.spec.solver.repeat_dataset:
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
        return tuple(args) + self._extra_args("Model.fit", ("training", "args"), t.args, typed)


def build_job(loaded: LoadedSpec, features: Features, lock_path: str) -> TrainingJob:
    return Builder(loaded, features, lock_path).build()
