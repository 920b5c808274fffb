"""The spec: a compact YAML description of one model (pydantic v2, strict, frozen).

Field names follow HugeCTR's own argument names where a field maps to one argument, so a reader of the spec and of the
generated ``model.py`` sees the same words. Everything derivable from the features (``slot_size_array``,
``leading_dim``, ``dense_dim``, ``slot_num``, ``i64_input_key``, label dims) is derived, never typed here.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Union

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema, field_validator,
                      model_validator)
from pydantic_core import PydanticCustomError

from ..inputs import FLT_MAX, INT32_MAX, INT64_MAX, UINT64_MAX
from .etl import EtlSpec

# Names that become Python identifiers, HugeCTR tensor names, Triton model names or file names.
IDENT = r"^[A-Za-z_][A-Za-z0-9_]*$"
Ident = Annotated[str, Field(pattern=IDENT, max_length=64)]
# Integers are strict (no "2048", true or 1.0) and bounded by the C++ type they become: HugeCTR's counts, sizes,
# iterations and widths are int (CreateSolver, fit, DenseLayer) or size_t used as one, so int32; seed is uint64.
PosInt = Annotated[int, Field(gt=0, le=INT32_MAX, strict=True)]
NonNegInt = Annotated[int, Field(ge=0, le=INT32_MAX, strict=True)]
Uint64 = Annotated[int, Field(ge=0, le=UINT64_MAX, strict=True)]
# Floats take integers (1 is 1.0) but no strings or booleans.
Prob = Annotated[float, Field(ge=0.0, lt=1.0, allow_inf_nan=False, strict=True)]
Float = Annotated[float, Field(allow_inf_nan=False, strict=True)]
# Floats that become a C++ float (CreateSolver, CreateOptimizer, the serving backend): beyond FLT_MAX they would be inf.
Float32 = Annotated[float, Field(ge=-FLT_MAX, le=FLT_MAX, allow_inf_nan=False, strict=True)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, protected_namespaces=(), strict=True)


def _json_like(value: Any, depth: int = 0) -> Any:
    """Argument values of ``args:`` maps: YAML scalars, lists and string-keyed maps (no NaN, not too deep)."""
    if depth > 8:
        raise ValueError("nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if not -INT64_MAX - 1 <= value <= UINT64_MAX:
            raise ValueError(f"{value} does not fit a 64-bit integer")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value
    if isinstance(value, list):
        return [_json_like(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ValueError("map keys must be strings")
        return {k: _json_like(v, depth + 1) for k, v in value.items()}
    raise ValueError(f"unsupported value of type {type(value).__name__}")


def _arg_names(args: dict) -> dict:
    for k in args:
        if not isinstance(k, str) or not k.isidentifier():
            raise ValueError(f"{k!r} is not an argument name")
    return args


# Further arguments of one HugeCTR call, by HugeCTR's own names; checked against the target release's API table.
# Enum members are written "Type.Member" (e.g. "AllReduceAlgo.NCCL"); a map with enum keys as {"AUC": 1.0}. Each
# value is checked on its own, so that a problem names its argument (and its line). The C++ type of the parameter
# it becomes is checked by the build (codegen/hugectr/arg_types.py).
ExtraArgs = Annotated[dict[str, Annotated[Any, AfterValidator(lambda v: _json_like(v))]], AfterValidator(_arg_names)]
# Tensor and column names as HugeCTR accepts them (strings in the graph JSON; emitted as string literals).
TensorName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$", max_length=128)]


class DataSpec(Strict):
    """Where the training data lives, as seen by the machine that runs model.py."""

    format: Literal["parquet", "norm", "raw", "raw_async"] = Field(
        "parquet", description="HugeCTR DataReaderType_t: Parquet, Norm, Raw or RawAsync (with data.args.async_param)")
    train: list[Annotated[str, Field(min_length=1)]] = Field(
        ..., min_length=1, description="training file list(s) (NVTabular writes _file_list.txt)")
    eval: Annotated[str, Field(min_length=1)] = Field(..., description="evaluation file list")
    num_workers: PosInt | None = Field(None, description="DataReaderParams num_workers (HugeCTR default 12)")
    train_files: PosInt | None = Field(
        None, description="number of files the training file list names (checked against the readers: HugeCTR's "
                          "Parquet reader runs one worker per GPU and needs at least that many files)")
    check_type: Literal["Non", "Sum"] | None = Field(
        None, description="DataReaderParams check_type (default: Non for Parquet, Sum for Norm and Raw)")
    slot_size_array: bool | None = Field(
        None, description="pass the cardinalities as DataReaderParams slot_size_array (default: true for Parquet)")
    args: ExtraArgs = Field(default_factory=dict, description="other DataReaderParams arguments by HugeCTR's names "
                                                              "(num_samples, eval_num_samples, float_label_dense, ...)")
    generate: ExtraArgs | None = Field(
        None, description="synthesize the data first with hugectr.tools.DataGenerator: DataGeneratorParams arguments "
                          "(format, label_dim, dense_dim, num_slot, source, eval_source, slot_size_array, ...)")
    data_source: "DataSourceSpec | None" = Field(
        None, description="build hugectr.data.DataSource first (HugeCTR 3.4 up to 3.9: data and models on HDFS)")


class DataSourceSpec(Strict):
    """hugectr.data.DataSource(DataSourceParams(...)), made before the solver; move_to_local() copies the HDFS files."""

    params: ExtraArgs = Field(..., description="DataSourceParams arguments (use_hdfs, namenode, port, hdfs_*, local_*)")
    move_to_local: bool = False


class FeaturesSpec(Strict):
    """Column roles. Default: what the workflow's output schema tags categorical / continuous / target."""

    categorical: list[str] | None = Field(None, min_length=1, description="categorical columns, in slot order")
    continuous: list[str] | None = None
    label: list[str] | None = Field(None, min_length=1,
                                    description="label column(s); a single label in HugeCTR < 3.5")


class SolverSpec(Strict):
    batchsize: PosInt = 2048
    batchsize_eval: PosInt = 2048
    max_eval_batches: PosInt = 100
    vvgpu: list[list[NonNegInt]] = Field(default_factory=lambda: [[0]], min_length=1)
    lr: Annotated[float, Field(gt=0.0, le=FLT_MAX, allow_inf_nan=False, strict=True)] | None = None
    # 0 is valid from 23.04 (the build checks the release: BEHAVIOUR["lr_steps_zero"])
    warmup_steps: NonNegInt | None = None
    decay_start: NonNegInt | None = None
    decay_steps: NonNegInt | None = None
    decay_power: Float32 | None = None
    end_lr: Float32 | None = None
    repeat_dataset: bool = True
    use_mixed_precision: bool = False
    scaler: Float32 | None = None
    enable_tf32_compute: bool | None = None
    use_cuda_graph: bool | None = None
    seed: Uint64 | None = None
    model_name: bool = Field(False, description="pass the spec name as CreateSolver(model_name=...) (HugeCTR >= 3.3)")
    i64_input_key: bool | None = Field(
        None, description="64-bit keys. Parquet: derived from the categorical dtype (set only to assert it); Norm and "
                          "Raw files record no key width: this says it (default false, as HugeCTR's)")
    args: ExtraArgs = Field(default_factory=dict, description="other CreateSolver arguments by HugeCTR's names "
                                                              "(metrics_spec, use_algorithm_search, ...)")


class OptimizerSpec(Strict):
    type: Literal["Adam", "AdaGrad", "MomentumSGD", "Nesterov", "SGD", "Ftrl", "RMSProp"] = "Adam"
    update_type: Literal["Global", "Local", "LazyGlobal"] | None = None
    beta1: Float32 | None = None
    beta2: Float32 | None = None
    epsilon: Float32 | None = None
    initial_accu_value: Float32 | None = None
    momentum_factor: Float32 | None = None
    atomic_update: bool | None = None
    beta: Float32 | None = None
    lambda1: Float32 | None = None
    lambda2: Float32 | None = None
    args: ExtraArgs = Field(default_factory=dict, description="other CreateOptimizer arguments by HugeCTR's names")


class SparseInputSpec(Strict):
    name: Ident = "data1"
    columns: list[str] | None = Field(
        None, description="categorical columns of this input, a contiguous run in slot order "
                          "(default on the last input: the remaining slots)")
    nnz_per_slot: PosInt | list[PosInt] | None = Field(
        None, description="max keys per slot (default 1 for one-hot columns; multi-hot columns need it)")
    is_fixed_length: bool = False


class InputSpec(Strict):
    label_name: TensorName = "label"
    label_dim: Annotated[int, Field(ge=1, le=4096, strict=True)] = Field(
        1, description="Input(label_dim=...) of a single label (e.g. 2 for two-target Norm data)")
    dense_name: TensorName = "dense"
    sparse: list[SparseInputSpec] = Field(default_factory=lambda: [SparseInputSpec()], min_length=1)


class EmbeddingSpec(Strict):
    name: Ident = "sparse_embedding1"
    input: Ident = "data1"
    embedding_type: Literal[
        "DistributedSlotSparseEmbeddingHash",
        "LocalizedSlotSparseEmbeddingHash",
        "LocalizedSlotSparseEmbeddingOneHot",
        "HybridSparseEmbedding",
    ] = "DistributedSlotSparseEmbeddingHash"
    embedding_vec_size: Annotated[int, Field(ge=1, le=1024, strict=True)] = 16
    combiner: Literal["sum", "mean"] = "sum"
    workspace_size_per_gpu_in_mb: NonNegInt | None = Field(
        None, description="required by HugeCTR < 23.06; 0 with slot_size_array at 23.06")
    slot_size_array: bool = Field(False, description="pass this input's cardinalities as SparseEmbedding slot_size_array")
    optimizer: Literal["model", "default"] = Field(
        "model", description="'model': pass the model optimizer explicitly (as the notebooks do); 'default': omit")
    args: ExtraArgs = Field(default_factory=dict, description="other SparseEmbedding arguments by HugeCTR's names")


# ---- model graphs -------------------------------------------------------------------------------------------------

class MLPPreset(Strict):
    preset: Literal["mlp"]
    units: list[PosInt] = Field(default_factory=lambda: [128, 128], description="hidden layer widths")
    dropout: Prob | None = Field(None, description="Dropout rate after each hidden ReLU (none by default)")


class WDLPreset(Strict):
    """Wide & Deep (HugeCTR samples/wdl): wide embedding (vec 1) summed, deep embedding + dense through an MLP."""

    preset: Literal["wdl"]
    wide: Ident = Field(..., description="name of the wide embedding (embedding_vec_size 1)")
    deep: Ident = Field(..., description="name of the deep embedding")
    units: list[PosInt] = Field(default_factory=lambda: [1024, 1024])
    dropout: Prob | None = 0.5


class DCNPreset(Strict):
    """Deep & Cross (HugeCTR samples/dcn): MultiCross beside an MLP over [embeddings, dense]."""

    preset: Literal["dcn"]
    cross_layers: PosInt = 6
    projection_dim: PosInt | None = Field(None, description="DCNv2 low-rank projection (HugeCTR >= 4.3)")
    units: list[PosInt] = Field(default_factory=lambda: [1024, 1024])
    dropout: Prob | None = 0.5


class DLRMPreset(Strict):
    """DLRM (HugeCTR samples/dlrm): bottom MLP on dense, Interaction with the embeddings, top MLP."""

    preset: Literal["dlrm"]
    bottom_units: list[PosInt] = Field(default_factory=lambda: [512, 256, 128],
                                       description="bottom MLP; the last width must equal embedding_vec_size")
    top_units: list[PosInt] = Field(default_factory=lambda: [1024, 1024, 512, 256])


class DeepFMPreset(Strict):
    """DeepFM (HugeCTR samples/deepfm, seed 004): embedding of vec k+1 = k factors + a first-order weight."""

    preset: Literal["deepfm"]
    units: list[PosInt] = Field(default_factory=lambda: [400, 400, 400])
    dropout: Prob | None = 0.5


class LayerSpec(BaseModel):
    """One explicit HugeCTR DenseLayer; parameters are DenseLayer's argument names."""

    model_config = ConfigDict(extra="allow", frozen=True, protected_namespaces=())
    type: Ident
    bottom: TensorName | list[TensorName]
    top: TensorName | list[TensorName]


class ExplicitGraph(Strict):
    preset: Literal["layers"]
    layers: list[LayerSpec] = Field(..., description="at least one, except in a reader_check spec")


ModelSpec = Annotated[Union[MLPPreset, WDLPreset, DCNPreset, DLRMPreset, DeepFMPreset, ExplicitGraph],
                     Field(discriminator="preset")]


class ModelCall(Strict):
    """One call of a Model method, e.g. {method: export_predictions, args: {output_prediction_file_name: ...}}."""

    method: Ident
    args: ExtraArgs = Field(default_factory=dict)


class TrainingSpec(Strict):
    max_iter: NonNegInt | None = None
    num_epochs: NonNegInt | None = None
    display: PosInt = 200
    eval_interval: PosInt = 1000
    snapshot: NonNegInt | None = Field(None, description="snapshot interval (omitted: HugeCTR's default 10000)")
    snapshot_prefix: str = ""
    save_weights: bool = Field(True, description="when fit writes no snapshot (snapshot 0, or >= max_iter), save the "
                                                 "weights serving loads after fit (save_params_to_files at max_iter)")
    graph_json: str | None = Field(None, description="where model.py writes the graph JSON (default <name>.json)")
    compile: ExtraArgs = Field(default_factory=dict, description="Model.compile arguments (loss_names, loss_weights)")
    before_fit: list["ModelCall"] = Field(default_factory=list,
                                          description="Model methods called just before fit (load_dense_weights, "
                                                      "load_sparse_optimizer_states, freeze_dense, ...)")
    then: list["ModelCall"] = Field(default_factory=list,
                                    description="Model methods called after the calls of script.after_compile, in "
                                                "order (export_predictions, save_params_to_files, ...)")
    args: ExtraArgs = Field(default_factory=dict, description="other Model.fit arguments by HugeCTR's names")

    @model_validator(mode="after")
    def _one_loop(self) -> "TrainingSpec":
        if self.max_iter is None and self.num_epochs is None:
            object.__setattr__(self, "max_iter", 2000)
        return self


class OfflineInferenceSpec(Strict):
    """After training, predict with HugeCTR's offline inference API (hugectr.inference.InferenceModel) and,
    optionally, compare with the predictions training exported (model.export_predictions)."""

    api: Literal["InferenceModel", "CreateInferenceSession"] | None = Field(
        None, description="InferenceModel (3.4 up to 23.09) or the older CreateInferenceSession (up to 23.09); "
                          "default: InferenceModel where the release has it")
    graph_json: Annotated[str, Field(min_length=1)] | None = Field(
        None, description="the graph JSON InferenceModel reads (default: training.graph_json)")
    params: ExtraArgs = Field(..., description="InferenceParams arguments (model_name, max_batchsize, "
                                               "dense_model_file, sparse_model_files, ...)")
    predict: ExtraArgs = Field(..., description="InferenceModel.predict arguments (num_batches, source, "
                                                "data_reader_type, check_type, ...)")
    then: list[ModelCall] = Field(default_factory=list,
                                  description="methods of the inference model called after predict, in order "
                                              "(e.g. {method: check_out_tensor, args: {tensor_name: emb1}})")
    compare_with: Annotated[str, Field(min_length=1)] | None = Field(
        None, description="a prediction file export_predictions wrote: fail when the mean squared difference "
                          "exceeds max_mse")
    max_mse: Annotated[float, Field(ge=0.0, allow_inf_nan=False, strict=True)] = 1e-3


class ScriptSpec(Strict):
    """The order of independent statements in model.py. The defaults are the order HugeCTR's samples use; the
    MovieLens notebooks create the optimizer before the reader and write the graph JSON after fit."""

    setup: list[Literal["solver", "reader", "optimizer"]] = Field(
        default_factory=lambda: ["solver", "reader", "optimizer"],
        description="order of CreateSolver, DataReaderParams and CreateOptimizer")
    model_class: Literal["Model", "ModelPerfExt"] = Field(
        "Model", description="the hugectr class model.py builds: Model, or ModelPerfExt (HugeCTR 3.3 up to 3.8, the "
                             "performance variant the DLRM benchmark scripts use)")
    before_compile: list[Literal["summary", "graph_to_json"]] = Field(
        default_factory=list, description="calls made after the last model.add and before model.compile(), in order")
    after_compile: list[Literal["summary", "graph_to_json", "fit"]] = Field(
        default_factory=lambda: ["summary", "graph_to_json", "fit"],
        description="the calls after model.compile(), in order (leave one out to omit it)")

    @model_validator(mode="after")
    def _orders(self) -> "ScriptSpec":
        if sorted(self.setup) != ["optimizer", "reader", "solver"]:
            raise ValueError("setup must name solver, reader and optimizer once each")
        if len(set(self.after_compile)) != len(self.after_compile):
            raise ValueError("after_compile names a call twice")
        if set(self.before_compile) & set(self.after_compile):
            raise ValueError("a call is named both before and after compile")
        return self


# ---- continuous training (seed 003) --------------------------------------------------------------------------

PSKind = Literal["host_memory", "ssd", "staged", "cached"]


class HMemCacheSpec(Strict):
    """CreateHMemCache(num_blocks, target_hit_rate, max_num_evict): the host-memory cache of 'cached' tables."""

    num_blocks: PosInt = 1
    target_hit_rate: Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False, strict=True)] = 0.5
    max_num_evict: NonNegInt = 0


class PassSpec(Strict):
    """One incremental pass: train on these file lists (one keyset file each), evaluate on eval_source."""

    source: list[Annotated[str, Field(min_length=1)]] | None = Field(
        None, description="training file lists of this pass (the first pass defaults to data.train)")
    keyset: list[Annotated[str, Field(min_length=1)]] = Field(
        ..., min_length=1, description="one keyset file per source, in the same order ('ctrgen keysets' writes them)")
    eval_source: Annotated[str, Field(min_length=1)] | None = Field(
        None, description="evaluation file list (default: the previous pass's, data.eval for the first)")
    fit: bool = Field(True, description="false: only set_source (the embedding cache loads the keysets), no fit on "
                                        "it here (a later pass, and not with low_level)")


class LowLevelSpec(Strict):
    """model_low_level.py apart from model.py, as seed 003 keeps it: its own sparse model folders (wdl_low_*), one
    evaluation list for every pass, its own save prefix."""

    sparse_models: list[Annotated[str, Field(min_length=1)]] | None = Field(
        None, min_length=1, description="one folder per embedding (default: continuous_training.sparse_models)")
    eval_source: Annotated[str, Field(min_length=1)] | None = Field(
        None, description="one evaluation file list for every pass (default: each pass's eval_source)")
    save_prefix: Annotated[str, Field(min_length=1)] | None = Field(
        None, description="save_params_to_files prefix (default: continuous_training.save_prefix)")


class ContinuousTrainingSpec(Strict):
    """Incremental training with HugeCTR's embedding cache: CreateMOS (3.2) or CreateETC (3.3 up to 23.09)."""

    ps: PSKind | list[PSKind] = Field(
        ..., description="parameter server: host_memory / ssd (CreateMOS, HugeCTR 3.2) or staged / cached "
                         "(CreateETC, one per embedding or one for all)")
    sparse_models: list[Annotated[str, Field(min_length=1)]] = Field(
        ..., min_length=1, description="one sparse model folder per embedding, in embeddings order")
    train_from_scratch: bool = Field(
        True, description="false: continue from existing sparse_models (and dense_model when given)")
    dense_model: Annotated[str, Field(min_length=1)] | None = Field(
        None, description="dense weights to load before training (only when train_from_scratch is false)")
    local_paths: list[Annotated[str, Field(min_length=1)]] | None = Field(
        None, description="CreateETC local_paths for cached tables: one per node of solver.vvgpu")
    hmem_cache: HMemCacheSpec | None = Field(None, description="CreateHMemCache settings for cached tables")
    passes: list[PassSpec] = Field(..., min_length=1, description="incremental dataset passes, in order")
    save_prefix: Annotated[str, Field(min_length=1)] = Field(
        ..., description="save_params_to_files prefix after the last pass")
    incremental_model: bool = Field(True, description="call get_incremental_model() after the last pass")
    low_level: bool | LowLevelSpec = Field(
        True, description="also render model_low_level.py (the low-level training loop); a mapping: with its own "
                          "sparse models, evaluation list or save prefix")
# ---- serving ------------------------------------------------------------------------------------------------------

InstanceKind = Literal["KIND_GPU", "KIND_CPU", "KIND_AUTO"]


def _instance_count(value: Any) -> int | str:
    """'auto' or a positive C++ int; the messages read like the other integer fields' (spec/load.py)."""
    if value == "auto":
        return value
    if type(value) is not int:
        kinds = ((bool, "a boolean"), (str, "a string"), (float, "a float"), (list, "a list"), (dict, "a mapping"))
        name = next((n for t, n in kinds if isinstance(value, t)), type(value).__name__)
        shown = name if isinstance(value, (list, dict)) else f"{name} {value!r}"
        raise PydanticCustomError("instance_count", "must be 'auto' or an integer, not {got}", {"got": shown})
    if value < 1:
        raise PydanticCustomError("instance_count", "must be 'auto' or greater than 0, got {got}", {"got": value})
    if value > INT32_MAX:
        raise PydanticCustomError("instance_count", "must be 'auto' or less than or equal to {limit} (2**31-1, the "
                                  "C++ int it becomes), got {got}", {"limit": INT32_MAX, "got": value})
    return value


# One error line for both forms (a plain union would report one line per branch).
InstanceCount = Annotated[Union[int, Literal["auto"]], PlainValidator(_instance_count),
                          WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 1, "maximum": INT32_MAX},
                                                    {"const": "auto"}]})]


class InstanceSpec(Strict):
    """One Triton ``instance_group`` (NVTabular's exporter hard-coded these, triton.md §6.5, R11)."""

    kind: InstanceKind = "KIND_CPU"
    count: InstanceCount = Field(
        "auto", description="instances (per GPU on a GPU); auto: chosen for the machine by ctrgen assemble (--cores)")
    gpus: list[NonNegInt] | None = Field(None, description="GPU ids (KIND_GPU only; default: every GPU)")

    @model_validator(mode="after")
    def _gpus_need_gpu_kind(self) -> "InstanceSpec":
        if self.gpus is not None and self.kind != "KIND_GPU":
            raise ValueError("gpus is only valid with kind: KIND_GPU")
        return self


class DynamicBatchingSpec(Strict):
    """Triton's dynamic batcher for a python-backend model: requests that queue while an instance is busy reach it
    together in one ``execute`` (one transform or one forward for all of them)."""

    enabled: bool = True
    max_queue_delay_microseconds: Annotated[int, Field(ge=0, le=1_000_000)] = Field(
        0, description="how long a request may wait for others to join it (0: only those already queued)")


class PreprocessingSpec(Strict):
    """The ``<name>_nvt`` python-backend model that runs the saved NVTabular workflow (compiled to numpy lookups)."""

    instance: InstanceSpec = Field(default_factory=lambda: InstanceSpec(),
                                   description="instance_group (default: CPU instances, as many as ctrgen assemble "
                                               "chooses for the machine: one per core, at most 8)")
    dynamic_batching: DynamicBatchingSpec = Field(default_factory=DynamicBatchingSpec)


class HugeCTRServingSpec(Strict):
    """The ``<name>`` HugeCTR-backend model and its ``ps.json`` entry (triton.md §2, §4)."""

    gpus: list[NonNegInt] = Field(default_factory=lambda: [0], min_length=1,
                                  description="instance_group gpus and ps.json deployed_device_list")
    count: PosInt = Field(1, description="model instances (<= num_of_worker_buffer_in_pool)")
    gpucache: bool = True
    gpucacheper: Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False, strict=True)] = 0.5
    hit_rate_threshold: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False, strict=True)] = 0.9
    num_of_worker_buffer_in_pool: PosInt | None = Field(None, description="default: count")
    num_of_refresher_buffer_in_pool: PosInt = 1
    cache_refresh_percentage_per_iteration: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False,
                                                                   strict=True)] = 0.2
    default_value_for_each_table: Float32 = 0.0
    output_name: Ident = "OUTPUT0"
    snapshot_iteration: PosInt | None = Field(
        None, description="iteration in the weight file names (default: fit's last snapshot, else max_iter)")
    snapshot_prefix: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]*$",
                                        description="weight file prefix (default: training.snapshot_prefix)")

    @model_validator(mode="after")
    def _enough_buffers(self) -> "HugeCTRServingSpec":
        if self.num_of_worker_buffer_in_pool is not None and self.num_of_worker_buffer_in_pool < self.count:
            raise ValueError("num_of_worker_buffer_in_pool must be >= count (the backend refuses more instances "
                             "than worker buffers)")
        return self


class TorchServingSpec(Strict):
    """The ``<name>`` python-backend model of ``generated/<name>/triton_torch/`` (rendered when ``torch`` is among
    ``targets``): it loads train_torch.py's ``Model`` with the trained ``model.pt`` + ``features.json``."""

    instance: InstanceSpec = Field(default_factory=lambda: InstanceSpec(kind="KIND_AUTO"),
                                   description="instance_group (default KIND_AUTO: a GPU when the server has one; "
                                               "count auto: ctrgen assemble chooses one per GPU, else one per "
                                               "2 x `threads` cores)")
    threads: Annotated[int, Field(ge=1, le=256)] = Field(
        1, description="torch.set_num_threads of each instance on the CPU (instances x threads <= cores)")
    dynamic_batching: DynamicBatchingSpec = Field(default_factory=DynamicBatchingSpec)
    output_name: Ident = Field("OUTPUT0", description="the prediction tensor (sigmoid of the logits), as the HugeCTR "
                                                      "model names it")


class TritonSpec(Strict):
    """The Triton model repository written to generated/<name>/triton/ (on by default)."""

    enabled: bool = True
    max_batch_size: PosInt = Field(64, description="samples per request, equal in every config.pbtxt and ps.json")
    model_root: str = Field("/model", pattern=r"^/[A-Za-z0-9_./-]*$",
                            description="where the repository is mounted in the serving container")
    version: PosInt = 1
    preprocessing: PreprocessingSpec = Field(default_factory=PreprocessingSpec)
    hugectr: HugeCTRServingSpec = Field(default_factory=HugeCTRServingSpec)
    torch: TorchServingSpec = Field(default_factory=TorchServingSpec,
                                    description="the PyTorch repository generated/<name>/triton_torch/ (targets: torch)")


# ---- launch targets (task.py, Vertex AI, clusters) ---------------------------------------------------------------

TARGETS = ("hugectr", "task", "vertex", "cluster", "torch")
# #SBATCH lines are read by sbatch, not by a shell: their values must be plain tokens (no spaces, quotes, newlines).
SlurmToken = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:@%+=,/-]+$", max_length=128)]


class StudyParameter(Strict):
    """One tuned task.py argument (a Vertex AI StudySpec.ParameterSpec)."""

    name: Ident = Field(..., description="the task.py argument it sets, e.g. lr or dropout_rate")
    type: Literal["double", "integer", "discrete", "categorical"]
    min: Float | None = Field(None, description="double / integer: lower bound")
    max: Float | None = Field(None, description="double / integer: upper bound")
    values: list[Float] | list[str] | None = Field(None, description="discrete (numbers) / categorical (strings)")
    scale: Literal["linear", "log", "reverse_log"] | None = Field(None, description="double / integer / discrete")


class StudySpec(Strict):
    metric: Literal["AUC"] = Field("AUC", description="the metric task.py reports to hypertune")
    goal: Literal["maximize", "minimize"] = "maximize"
    parameters: list[StudyParameter] = Field(..., min_length=1)
    max_trial_count: PosInt = 4
    parallel_trial_count: PosInt = 2
    max_failed_trial_count: NonNegInt | None = None
    algorithm: Literal["grid", "random"] | None = Field(None, description="omitted: Vertex AI's default (Bayesian)")


# An image reference pinned by a tag (other than "latest") or a sha256 digest: registry/path:tag or ...@sha256:hex.
PINNED_IMAGE = (r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+"
                r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[a-f0-9]{64})$")


class VertexSpec(Strict):
    """Vertex AI custom training (seed 004): one node, the GPUs of solver.vvgpu, task.py in a container."""

    display_name: Annotated[str, Field(min_length=1, max_length=128)] | None = Field(
        None, description="job display name (default: hugectr-<name>)")
    image_uri: Annotated[str, Field(min_length=1)] = Field(
        ..., description="training container; {project} and {region} are filled in by submit.py")
    machine_type: Annotated[str, Field(pattern=r"^[a-z0-9-]+$")] = "a2-highgpu-1g"
    accelerator_type: Annotated[str, Field(pattern=r"^[A-Z0-9_]+$")] = "NVIDIA_TESLA_A100"
    command: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=lambda: ["python", "-m", "task"])
    base_image: Annotated[str, Field(pattern=PINNED_IMAGE, max_length=255)] = Field(
        "nvcr.io/nvidia/merlin/merlin-training:22.04",
        description="FROM of vertex/Dockerfile: a Merlin image with the HugeCTR release the spec targets, pinned by "
                    "tag or digest (not :latest); default: seed 004's image")

    @field_validator("base_image")
    @classmethod
    def _pinned(cls, value: str) -> str:
        if value.endswith(":latest"):
            raise ValueError("':latest' moves: pin the image by a release tag or a sha256 digest")
        return value
    train_data: list[Annotated[str, Field(min_length=1)]] | None = Field(
        None, min_length=1, description="--train_data as the container sees it, e.g. /gcs/{bucket}/train/_file_list.txt "
                                        "(default: data.train); {bucket} is filled in by submit.py")
    valid_data: Annotated[str, Field(min_length=1)] | None = Field(None, description="--valid_data (default: data.eval)")
    schema_path: Annotated[str, Field(min_length=1)] | None = Field(
        None, description="--schema: the transformed dataset's schema.pbtxt as the container sees it")
    eval_batches: PosInt | None = Field(None, description="--eval_batches: batches of the final evaluation")
    study: StudySpec | None = Field(None, description="hyperparameter tuning job (omitted: custom job only)")


class SlurmSpec(Strict):
    partition: SlurmToken | None = None
    account: SlurmToken | None = None
    time: SlurmToken | None = Field(None, description="e.g. 04:00:00")


class ClusterSpec(Strict):
    """Multi-node launchers: one process per node for HugeCTR (mpirun, srun), torchrun for the PyTorch trainer."""

    hosts: list[Annotated[str, Field(min_length=1)]] | None = Field(
        None, description="mpirun hosts, one per node (default: the HOSTFILE environment variable)")
    gpus_per_node: PosInt | None = Field(None, description="default: the length of each solver.vvgpu row")
    python: Annotated[str, Field(min_length=1)] = "python3"
    rdzv_endpoint: Annotated[str, Field(min_length=1)] = Field(
        "localhost:29500", description="torchrun --rdzv-endpoint (host:port of node 0)")
    rdzv_backend: Literal["c10d", "etcd", "etcd-v2", "static"] = "c10d"
    slurm: SlurmSpec = Field(default_factory=SlurmSpec)


from .embedding_collection import EmbeddingCollectionSpec  # noqa: E402  (it builds on the classes above)
from .reader_check import ReaderCheckSpec  # noqa: E402  (it builds on the classes above)


class Spec(Strict):
    """A ctrgen model spec (version 1)."""

    version: Literal[1] = Field(..., description="spec format version")
    name: Ident = Field(..., description="model name: output folder, graph JSON and Triton model names")
    hugectr_version: str = Field(..., description="target HugeCTR release, e.g. '3.3' or '23.06'")
    workflow: str | None = Field(
        None, description="saved NVTabular workflow directory, or a dataset's schema.pbtxt / .merlin/schema.json "
                          "(relative to the spec)")
    features_lock: str | None = Field(None, description="features lock file (default: <spec stem>.features.lock.json)")
    data: DataSpec
    features: FeaturesSpec = Field(default_factory=FeaturesSpec)
    solver: SolverSpec = Field(default_factory=SolverSpec)
    optimizer: OptimizerSpec = Field(default_factory=OptimizerSpec)
    input: InputSpec = Field(default_factory=InputSpec)
    embeddings: list[EmbeddingSpec] = Field(default_factory=lambda: [EmbeddingSpec()])
    embedding_collection: EmbeddingCollectionSpec | None = Field(
        None, description="the embedding collection API (EmbeddingTableConfig, EmbeddingCollectionConfig / "
                          "EmbeddingPlanner, embedding_lookup, shard) instead of SparseEmbedding")
    model: ModelSpec
    training: TrainingSpec = Field(default_factory=TrainingSpec)
    script: ScriptSpec = Field(default_factory=ScriptSpec, description="statement order of model.py")
    offline_inference: OfflineInferenceSpec | None = Field(
        None, description="predict with hugectr.inference.InferenceModel after training (and compare)")
    reader_check: ReaderCheckSpec | None = Field(
        None, description="a data-reader test instead of training: read batches and check tensors (no loss, "
                          "compile or fit)")
    continuous_training: ContinuousTrainingSpec | None = Field(
        None, description="incremental passes with the embedding training cache (renders model.py with fit per "
                          "pass and model_low_level.py)")
    targets: list[Literal[TARGETS]] = Field(
        default_factory=lambda: ["hugectr"],
        description="what to render besides model.py: task (task.py), vertex (Vertex AI jobs), cluster (launchers), "
                    "torch (train_torch.py + features.json)")
    vertex: VertexSpec | None = None
    cluster: ClusterSpec | None = None
    triton: TritonSpec = Field(default_factory=TritonSpec,
                               description="the Triton repository in generated/<name>/triton/ (on by default)")
    etl: EtlSpec | None = Field(None, description="the NVTabular ETL from raw files (ctrgen etl; generated/<name>/etl.py)")

    @model_validator(mode="before")
    @classmethod
    def _no_default_embedding(cls, data: Any) -> Any:
        # An embedding collection replaces the default SparseEmbedding; without one a model needs an embedding.
        if isinstance(data, dict) and data.get("embedding_collection") is not None and "embeddings" not in data:
            data = {**data, "embeddings": []}
        return data

    @model_validator(mode="after")
    def _some_embedding(self) -> "Spec":
        if self.reader_check is None and isinstance(self.model, ExplicitGraph) and not self.model.layers:
            raise ValueError("model.layers: at least one layer is needed (none only with reader_check)")
        if not self.embeddings and self.embedding_collection is None and self.reader_check is None:
            raise ValueError("embeddings: at least one embedding (or an embedding_collection) is needed")
        return self
