"""The spec: a compact YAML description of one model (pydantic v2, strict, frozen).

Field names follow HugeCTR's own argument names where a field maps to one argument, so a reader of the spec and of the
generated ``model.py`` sees the same words. Everything derivable from the features (``slot_size_array``,
``leading_dim``, ``dense_dim``, ``slot_num``, ``i64_input_key``, label dims) is derived, never typed here.
"""

from __future__ import annotations

import posixpath
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from ..inputs import FLT_MAX
from .embedding_collection import EmbeddingCollectionSpec
from .etl import EtlSpec
from .graph import ExplicitGraph, ModelSpec
from .fields import ExtraArgs, Float32, Ident, NonNegInt, PosInt, Strict, TensorName, Uint64
from .launch import TARGETS, ClusterSpec, VertexSpec
from .reader_check import ReaderCheckSpec
from .serving import TritonSpec


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
    init: Literal["uniform", "normal"] = Field(
        "uniform", description="the PyTorch target's initial rows: uniform in [-0.05, 0.05], or normal: N(0, 1) as "
                               "torch's nn.Embedding (NVTabular's Model, seed 001); HugeCTR initializes its own tables")


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

    def reader_check_type(self) -> str:
        """DataReaderParams check_type, one value for the model's reader and the Norm files the ETL writes for it:
        data.check_type; without it etl.output.norm.check_type where the reader reads the ETL's Norm files; else
        HugeCTR's framing of the format (Non for Parquet, Sum for Norm and Raw)."""
        d = self.data
        if d.check_type is not None:
            return d.check_type
        if d.format == "norm" and self.etl is not None and self.etl.output.format == "norm" and \
                self.etl.output.norm.check_type is not None:
            return self.etl.output.norm.check_type
        return "Non" if d.format == "parquet" else "Sum"

    @model_validator(mode="before")
    @classmethod
    def _data_from_etl(cls, data: Any) -> Any:
        # Without data:, a spec with etl: reads what ctrgen etl writes: etl.output.dir's file lists, as written
        # (relative to the spec's folder, as etl.output.dir is).
        if isinstance(data, dict) and "data" not in data and isinstance(data.get("etl"), dict):
            out = (data["etl"].get("output") or {}).get("dir") if isinstance(data["etl"].get("output"), dict) else None
            if isinstance(out, str) and out:
                root = out.rstrip("/") or "/"
                data = {**data, "data": {"train": [posixpath.join(root, "train", "_file_list.txt")],
                                         "eval": posixpath.join(root, "valid", "_file_list.txt")}}
        return data

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
