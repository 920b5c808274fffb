"""Plan a Triton model repository for one model: three models and ps.json, as plain data (no text).

The layout is the one NVTabular's ``export_hugectr_ensemble`` wrote (triton.md §6.2-§6.3)::

    ps.json                      (the exporter wrote none; here it comes with the configs, R12)
    <name>_nvt/                  preprocessing: python backend, raw request columns -> DES, CATCOLUMN, ROWINDEX
    <name>/                      the model step (HugeCTR backend)
    <name>_ens/                  ensemble: <name>_nvt, then <name>, wired through "<X>_nvt" tensors

The model step is a :class:`ModelStep`: :class:`HugeCTRStep` (``generated/<name>/triton/``) or :class:`TorchStep`,
a python-backend model running train_torch.py's ``Model`` (``generated/<name>/triton_torch/``). Both consume the same
VCSR tensors, so the preprocessing model is the same in both repositories (generated/ keeps it once, in triton/:
codegen.triton.layout); the ensemble wiring is planned from the tensors the step consumes.

Every number comes from the training job (graph) and the features lock, never from a JSON scraped later (R10).
"""

from __future__ import annotations

from pathlib import PurePosixPath

import json
import math
from dataclasses import dataclass
from typing import Protocol

from ...errors import Located
from ...features import Column, Features
from ...graph.ir import TrainingJob
from ...hugectr import backend
from ...specfile.serving import TritonSpec
from ...torch_target import LOSSES

def PlanError(source: str, loc: tuple[str | int, ...], message: str, fix: str = "") -> Located:  # noqa: N802
    """A repository that cannot be planned; the pipeline reports it against the spec (``source="spec"``, with the
    field's line) or the features lock (``source="lock"``)."""
    return Located(message, fix=fix, loc=loc, source=source)


# numpy dtype name of a raw request column -> Triton DataType name.
TRITON_DTYPES = {
    "bool": "TYPE_BOOL", "uint8": "TYPE_UINT8", "uint16": "TYPE_UINT16", "uint32": "TYPE_UINT32",
    "uint64": "TYPE_UINT64", "int8": "TYPE_INT8", "int16": "TYPE_INT16", "int32": "TYPE_INT32", "int64": "TYPE_INT64",
    "float16": "TYPE_FP16", "float32": "TYPE_FP32", "float64": "TYPE_FP64", "object": "TYPE_STRING",
    "str": "TYPE_STRING",
}
NVT_SUFFIX, MODEL_SUFFIX, ENSEMBLE_SUFFIX = "_nvt", "", "_ens"


@dataclass(frozen=True)
class Tensor:
    name: str
    dtype: str                        # Triton DataType name, e.g. "TYPE_FP32"
    dims: tuple[int, ...] = (-1,)
    ragged: bool = False              # allow_ragged_batch: queued requests of other lengths may share an execute

@dataclass(frozen=True)
class Instance:
    kind: str                         # "KIND_GPU", "KIND_CPU", "KIND_AUTO"
    count: int | None = None          # None: Triton's default (1) in generated/, chosen for the machine at assemble
    gpus: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Step:
    model_name: str
    input_map: tuple[tuple[str, str], ...]     # model input -> ensemble tensor
    output_map: tuple[tuple[str, str], ...]    # model output -> ensemble tensor


@dataclass(frozen=True)
class ModelPlan:
    """One ``config.pbtxt`` (fields of Triton's ModelConfig) plus the files of its version folder."""

    name: str
    max_batch_size: int
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    backend: str = ""
    platform: str = ""
    instances: tuple[Instance, ...] = ()
    parameters: tuple[tuple[str, str], ...] = ()
    steps: tuple[Step, ...] = ()
    max_queue_delay_us: int | None = None        # dynamic_batching (None: none)
    version_files: tuple[str, ...] = ()          # names in <name>/<version>/ that generation writes
    required_files: tuple[str, ...] = ()         # names in <name>/<version>/ that `ctrgen assemble` adds


@dataclass(frozen=True)
class Slot:
    column: str
    cardinality: int
    offset: int                       # added to the column's ids: exclusive prefix sum of slot_size_array
    max_keys: int                     # keys per sample in this slot (1 for one-hot columns)
    multi_hot: bool
    nnz: int = 1                      # the graph's nnz_per_slot


@dataclass(frozen=True)
class Table:
    name: str                         # embedding "top" name = HPS table name
    input: str                        # sparse input feeding it
    slots: tuple[Slot, ...]
    vec_size: int

    @property
    def max_keys(self) -> int:
        """Keys per sample in this table: the slot count when every column is one-hot, else Σ nnz_per_slot, as
        HugeCTR derives it (get_max_feature_num_per_sample_from_nnz_per_slot; lint fixtures README)."""
        if any(s.multi_hot for s in self.slots):
            return sum(s.nnz for s in self.slots)
        return len(self.slots)


@dataclass(frozen=True)
class Preprocessing:
    """What the generated ``<name>_nvt/1/model.py`` bakes in (a VCSR request, triton.md §3)."""

    request: tuple[Column, ...]       # raw columns the request carries
    tables: tuple[Table, ...]
    continuous: tuple[str, ...]
    key_dtype: str                    # numpy name of CATCOLUMN: "int64" or "uint32"
    labels: tuple[str, ...]           # removed from the workflow before transforming
    workflow_dir: str = "workflow"    # in the version folder


@dataclass(frozen=True)
class RepositoryPlan:
    name: str
    version: int
    model_root: str
    preprocessing: Preprocessing
    models: tuple[ModelPlan, ...]     # preprocessing, model step, ensemble
    ps: dict | None                   # ps.json document, or None when the model step needs none
    graph_json: str                   # file name of the graph JSON in the model step's version folder ("": none)
    step: str = "hugectr"             # ModelStep.kind

    def model(self, suffix: str) -> ModelPlan:
        return next(m for m in self.models if m.name == self.name + suffix)

    def served_path(self, model: str, *parts: str) -> str:
        """A path as the serving container sees it (``model_root/<model>/<version>/...``)."""
        return "/".join([self.model_root.rstrip("/"), model, str(self.version), *parts])


class ModelStep(Protocol):
    """The model that consumes the preprocessing outputs."""

    kind: str                         # "hugectr" or "torch"

    def consumes(self, job: TrainingJob) -> tuple[Tensor, ...]: ...

    def plan(self, ctx: "PlanContext") -> ModelPlan: ...

    def ps_json(self, ctx: "PlanContext", model: ModelPlan) -> dict | None: ...


@dataclass(frozen=True)
class PlanContext:
    job: TrainingJob
    features: Features
    spec: TritonSpec
    pre: Preprocessing
    name: str

    def served_path(self, model: str, *parts: str) -> str:
        return "/".join([self.spec.model_root.rstrip("/"), model, str(self.spec.version), *parts])


# ---- preprocessing ------------------------------------------------------------------------------------------------

def plan_preprocessing(job: TrainingJob, features: Features) -> Preprocessing:
    g = job.graph
    by_col = {c.name: c for c in features.categorical}
    slot_order = [c for s in g.sparse for c in s.columns]
    # The Parquet reader adds per-slot offsets (exclusive prefix sums of slot_size_array, hugectr.md §1.3); serving
    # must send the same shifted keys (triton.md §3, R3). Other readers read the keys as they are.
    shifted = job.reader_plan.slot_sizes
    offsets, total = {}, 0
    for col in slot_order:
        offsets[col] = total if shifted else 0
        total += by_col[col].cardinality or 0
    inputs = {s.name: s for s in g.sparse}
    tables = []
    for e in g.embeddings:
        s = inputs[e.bottom]
        slots = tuple(Slot(column=col, cardinality=int(by_col[col].cardinality or 0), offset=offsets[col],
                           max_keys=_slot_keys(by_col[col], nnz), multi_hot=by_col[col].multi_hot, nnz=nnz)
                      for col, nnz in zip(s.columns, s.nnz_per_slot))
        tables.append(Table(name=e.name, input=s.name, slots=slots, vec_size=e.vec_size))
    request = features.request_columns()
    for i, c in enumerate(request):
        if c.dtype not in TRITON_DTYPES:
            raise PlanError("lock", ("inputs", i), f"request column {c.name!r} has dtype {c.dtype!r}, which has no "
                            "Triton data type", "cast the column in the workflow, or set triton: {enabled: false}")
    return Preprocessing(request=tuple(request), tables=tuple(tables),
                         continuous=tuple(c.name for c in features.continuous),
                         key_dtype="int64" if job.i64_input_key else "uint32",
                         labels=tuple(c.name for c in features.labels))


def _slot_keys(col: Column, nnz: int) -> int:
    """Keys one sample has in a slot: 1 for a one-hot column, else up to nnz_per_slot (capped by the list length)."""
    if not col.multi_hot:
        return 1
    return min(nnz, col.max_len) if col.max_len else nnz


def _instance(spec_instance) -> Instance:
    """``count: auto`` plans no count: the generated config.pbtxt is the same on every machine and ``ctrgen assemble``
    writes the count for the machine (deploy/instances.py)."""
    gpus = tuple(spec_instance.gpus) if spec_instance.gpus is not None else None
    count = None if spec_instance.count == "auto" else spec_instance.count
    return Instance(kind=spec_instance.kind, count=count, gpus=gpus)


# NVTabular's exporter names the consumer's input format in the _nvt model's output_model parameter (triton.md §6.3).
# Both model steps consume the HugeCTR backend's inputs, so it is "hugectr" for both: one preprocessing model.
OUTPUT_MODEL = "hugectr"


def plan_preprocessing_model(ctx: PlanContext, consumed: tuple[Tensor, ...]) -> ModelPlan:
    pre = ctx.pre
    inputs = tuple(t for c in pre.request for t in request_tensors(c))
    outputs = tuple(t for t in _preprocess_outputs(pre) if t.name in {c.name for c in consumed})
    params = (
        ("cats", json.dumps([s.column for t in pre.tables for s in t.slots])),
        ("conts", json.dumps(list(pre.continuous))),
        ("output_model", OUTPUT_MODEL),
        # Multi-hot slots and several tables: one CSR per table (triton.md §3), unlike NVTabular's runner (R19).
        ("key_layout", "vcsr"),
    )
    batching = ctx.spec.preprocessing.dynamic_batching
    return ModelPlan(name=ctx.name + NVT_SUFFIX, max_batch_size=ctx.spec.max_batch_size,
                     inputs=_ragged(inputs, batching), outputs=outputs, backend="python",
                     instances=(_instance(ctx.spec.preprocessing.instance),), parameters=params,
                     max_queue_delay_us=batching.max_queue_delay_microseconds if batching.enabled else None, version_files=("model.py",), required_files=(pre.workflow_dir,))


def _ragged(inputs: tuple[Tensor, ...], batching) -> tuple[Tensor, ...]:
    """A python-backend model gets each queued request on its own, so requests of any length may be batched."""
    if not batching.enabled:
        return inputs
    return tuple(Tensor(t.name, t.dtype, t.dims, ragged=True) for t in inputs)


def request_tensors(col: Column) -> tuple[Tensor, ...]:
    """A scalar column is one tensor [batch, 1]. A list column is ``<col>`` [batch, longest list] padded with
    anything, plus ``<col>__lengths`` [batch, 1] int32 (Triton requires one batch size for all inputs of a request,
    so the flat values + lengths pair of merlin-systems would not pass its checks here)."""
    if col.multi_hot:
        return (Tensor(col.name, TRITON_DTYPES[col.dtype]), Tensor(f"{col.name}__lengths", "TYPE_INT32"))
    return (Tensor(col.name, TRITON_DTYPES[col.dtype]),)


def _preprocess_outputs(pre: Preprocessing) -> tuple[Tensor, ...]:
    return tuple(Tensor(name, dtype) for name, dtype in backend.input_types(pre.key_dtype == "int64"))


# ---- the HugeCTR model step ---------------------------------------------------------------------------------------

class HugeCTRStep:
    """``backend: "hugectr"`` with the parameters of NVTabular's ``_generate_hugectr_config`` (triton.md §2, §6.3)."""

    kind = "hugectr"

    def consumes(self, job: TrainingJob) -> tuple[Tensor, ...]:
        return tuple(Tensor(name, dtype) for name, dtype in backend.input_types(job.i64_input_key))

    def weight_files(self, ctx: PlanContext) -> tuple[str, tuple[str, ...]]:
        h = ctx.spec.hugectr
        c = ctx.job.continuous
        if c is not None and h.snapshot_iteration is None and h.snapshot_prefix is None:
            # Continuous training ends with save_params_to_files(save_prefix): the dense file of iteration 0
            # (hugectr.md §1.9, §5), while the embedding cache writes the tables back into its sparse model folders
            # (Model::download_params_to_files with a cache: dump + update_sparse_model_file, HugeCTR v3.3 model.cpp).
            return f"{c.save_prefix}_dense_0.model", tuple(PurePosixPath(m).name for m in c.sparse_models)
        prefix = h.snapshot_prefix if h.snapshot_prefix is not None else ctx.job.fit_plan.snapshot_prefix
        it = h.snapshot_iteration or last_snapshot(ctx.job)
        if it is None:
            raise PlanError("spec", ("triton", "hugectr", "snapshot_iteration"), "the weight file names need the "
                            "training iteration, and fit runs by epochs",
                            "set triton.hugectr.snapshot_iteration to the iteration of the saved model")
        dense = f"{prefix}_dense_{it}.model"
        sparse = tuple(f"{prefix}{i}_sparse_{it}.model" for i in range(len(ctx.job.graph.embeddings)))
        return dense, sparse

    def plan(self, ctx: PlanContext) -> ModelPlan:
        g, h, pre = ctx.job.graph, ctx.spec.hugectr, ctx.pre
        graph_json = f"{ctx.name}.json"
        slots = sum(s.slot_num for s in g.sparse)
        params = (
            ("cat_feature_num", str(sum(t.max_keys for t in pre.tables))),
            ("config", ctx.served_path(ctx.name, graph_json)),
            ("des_feature_num", str(g.dense_dim)),
            ("embedding_vector_size", str(sum(e.vec_size for e in g.embeddings))),
            ("embeddingkey_long_type", _bool(ctx.job.i64_input_key)),
            ("gpucache", _bool(h.gpucache)),
            ("gpucacheper", _num(h.gpucacheper)),
            ("hit_rate_threshold", _num(h.hit_rate_threshold)),
            ("label_dim", str(sum(g.label_dims))),
            ("max_nnz", str(max(n for s in g.sparse for n in s.nnz_per_slot))),
            ("slots", str(slots)),
        )
        dense, sparse = self.weight_files(ctx)
        return ModelPlan(name=ctx.name, max_batch_size=ctx.spec.max_batch_size, inputs=self.consumes(ctx.job),
                         outputs=(Tensor(h.output_name, "TYPE_FP32"),), backend="hugectr",
                         instances=(Instance("KIND_GPU", h.count, tuple(h.gpus)),), parameters=params,
                         version_files=(graph_json,), required_files=(dense, *sparse))

    def ps_json(self, ctx: PlanContext, model: ModelPlan) -> dict:
        g, h, pre = ctx.job.graph, ctx.spec.hugectr, ctx.pre
        dense, sparse = self.weight_files(ctx)
        tables = len(g.embeddings)
        entry = {
            "model": model.name,
            "sparse_files": [ctx.served_path(model.name, s) for s in sparse],
            "dense_file": ctx.served_path(model.name, dense),
            "network_file": ctx.served_path(model.name, f"{ctx.name}.json"),
            "num_of_worker_buffer_in_pool": h.num_of_worker_buffer_in_pool or h.count,
            "num_of_refresher_buffer_in_pool": h.num_of_refresher_buffer_in_pool,
            "cache_refresh_percentage_per_iteration": h.cache_refresh_percentage_per_iteration,
            "deployed_device_list": list(h.gpus),
            "max_batch_size": model.max_batch_size,
            "default_value_for_each_table": [h.default_value_for_each_table] * tables,
            "hit_rate_threshold": h.hit_rate_threshold,
            "gpucacheper": h.gpucacheper,
            "gpucache": h.gpucache,
            "maxnum_des_feature_per_sample": g.dense_dim,
            "maxnum_catfeature_query_per_table_per_sample": [t.max_keys for t in pre.tables],
            "embedding_vecsize_per_table": [e.vec_size for e in g.embeddings],
            "embedding_table_names": [e.name for e in g.embeddings],
            "label_dim": sum(g.label_dims),
            "slot_num": sum(s.slot_num for s in g.sparse),
        }
        return {"supportlonglong": ctx.job.i64_input_key, "models": [entry]}


def last_snapshot(job: TrainingJob) -> int | None:
    """The iteration of the weight files serving loads: fit's last snapshot, else ``max_iter`` (model.py and task.py
    then save them with ``save_params_to_files``); None when fit runs by epochs."""
    return job.weights_iteration


def _bool(v: bool) -> str:
    return "true" if v else "false"


def _num(v: float) -> str:
    return repr(float(v))


# ---- the PyTorch model step ---------------------------------------------------------------------------------------

TORCH_MODEL_FILES = ("model.py",)   # generated: the python-backend model (`ctrgen assemble` adds train_torch.py: Model)
TORCH_SCRIPT = "train_torch.py"
TORCH_CHECKPOINT_FILES = ("model.pt", "features.json")   # from training's --output-dir, added by `ctrgen assemble`


class TorchStep:
    """A python-backend model that rebuilds train_torch.py's ``Model`` from ``features.json``, loads ``model.pt`` and
    answers the VCSR tensors of the preprocessing model with ``sigmoid(logits)``, FP32, batch dimension 1 as the
    inputs: one label, ``output_name`` [1, batch] (the HugeCTR backend's output). Several labels, each one a column
    of the logits (one BinaryCrossEntropyLoss per label, MultiCrossEntropyLoss): one output per label, named after
    its label column, [1, batch] each, so that a client reads each label's scores by name. The HugeCTR backend has
    one output only (label_dim values per sample, interleaved); that layout stays for logits that do not line up
    with the label columns (a CrossEntropyLoss's two classes)."""

    kind = "torch"

    def consumes(self, job: TrainingJob) -> tuple[Tensor, ...]:
        return HugeCTRStep().consumes(job)

    def outputs(self, ctx: PlanContext) -> tuple[Tensor, ...]:
        labels = ctx.pre.labels
        if len(labels) < 2 or _logit_columns(ctx.job) != len(labels):
            return (Tensor(ctx.spec.torch.output_name, "TYPE_FP32"),)
        # The ensemble carries the request columns and the <X>_nvt tensors too: a label may not be one of them.
        taken = {t.name for c in ctx.pre.request for t in request_tensors(c)}
        taken |= {name + NVT_SUFFIX for name, _ in backend.input_types(ctx.job.i64_input_key)}
        for i, label in enumerate(labels):
            if label in taken:
                raise PlanError("lock", ("labels", i), f"label {label!r} names a served output, and the ensemble "
                                "already has a tensor of that name", "rename the label column in the workflow")
        return tuple(Tensor(label, "TYPE_FP32") for label in labels)

    def plan(self, ctx: PlanContext) -> ModelPlan:
        t = ctx.spec.torch
        batching = t.dynamic_batching
        return ModelPlan(name=ctx.name, max_batch_size=ctx.spec.max_batch_size,
                         inputs=_ragged(self.consumes(ctx.job), batching),
                         outputs=self.outputs(ctx), backend="python",
                         instances=(_instance(t.instance),), parameters=(("torch_num_threads", str(t.threads)),),
                         max_queue_delay_us=batching.max_queue_delay_microseconds if batching.enabled else None,
                         version_files=TORCH_MODEL_FILES,
                         required_files=TORCH_CHECKPOINT_FILES)

    def ps_json(self, ctx: PlanContext, model: ModelPlan) -> None:
        return None


def _logit_columns(job: TrainingJob) -> int | None:
    """Columns of Model.forward's output that are one label's logit each: the loss layers' inputs side by side
    (runtime/losses.py); None when a CrossEntropyLoss's softmax classes are among them."""
    losses = [x for x in job.graph.analysed if x.type in LOSSES]
    if any(x.type != "BinaryCrossEntropyLoss" and x.type != "MultiCrossEntropyLoss" for x in losses):
        return None
    return sum(math.prod(x.in_shapes[0].dims) for x in losses)


# ---- the ensemble -------------------------------------------------------------------------------------------------

def plan_ensemble(ctx: PlanContext, nvt: ModelPlan, model: ModelPlan) -> ModelPlan:
    """NVTabular's ``_generate_ensemble_config``: request columns in, the model's outputs out, the preprocessing
    outputs renamed ``<X>_nvt`` between the two steps (triton.md §6.3)."""
    consumed = {t.name for t in model.inputs}
    wired = [t.name for t in nvt.outputs if t.name in consumed]
    steps = (
        Step(nvt.name, tuple((t.name, t.name) for t in nvt.inputs), tuple((x, x + NVT_SUFFIX) for x in wired)),
        Step(model.name, tuple((x, x + NVT_SUFFIX) for x in wired), tuple((t.name, t.name) for t in model.outputs)),
    )
    inputs = tuple(Tensor(t.name, t.dtype, t.dims) for t in nvt.inputs)
    return ModelPlan(name=ctx.name + ENSEMBLE_SUFFIX, max_batch_size=nvt.max_batch_size, inputs=inputs,
                     outputs=model.outputs, platform="ensemble", steps=steps)


def plan_repository(job: TrainingJob, features: Features, spec: TritonSpec,
                    step: ModelStep | None = None) -> RepositoryPlan:
    step = step or HugeCTRStep()
    pre = plan_preprocessing(job, features)
    ctx = PlanContext(job=job, features=features, spec=spec, pre=pre, name=job.name)
    model = step.plan(ctx)
    nvt = plan_preprocessing_model(ctx, model.inputs)
    ens = plan_ensemble(ctx, nvt, model)
    return RepositoryPlan(name=job.name, version=spec.version, model_root=spec.model_root, preprocessing=pre,
                          models=(nvt, model, ens), ps=step.ps_json(ctx, model), step=step.kind,
                          graph_json=f"{job.name}.json" if step.kind == "hugectr" else "")
