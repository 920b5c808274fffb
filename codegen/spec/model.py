"""The spec: a compact YAML description of one model (pydantic v2, strict, frozen).

Field names follow HugeCTR's own argument names where a field maps to one argument, so a reader of the spec and of the
generated ``model.py`` sees the same words. Everything derivable from the features (``slot_size_array``,
``leading_dim``, ``dense_dim``, ``slot_num``, ``i64_input_key``, label dims) is derived, never typed here.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Names that become Python identifiers, HugeCTR tensor names, Triton model names or file names.
IDENT = r"^[A-Za-z_][A-Za-z0-9_]*$"
Ident = Annotated[str, Field(pattern=IDENT, max_length=64)]
PosInt = Annotated[int, Field(gt=0)]
NonNegInt = Annotated[int, Field(ge=0)]
Prob = Annotated[float, Field(ge=0.0, lt=1.0, allow_inf_nan=False)]
Float = Annotated[float, Field(allow_inf_nan=False)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, protected_namespaces=())


class DataSpec(Strict):
    """Where the training data lives, as seen by the machine that runs model.py."""

    format: Literal["parquet", "norm", "raw"] = Field("parquet", description="HugeCTR DataReaderType_t: Parquet, Norm or Raw")
    train: list[Annotated[str, Field(min_length=1)]] = Field(
        ..., min_length=1, description="training file list(s) (NVTabular writes _file_list.txt)")
    eval: Annotated[str, Field(min_length=1)] = Field(..., description="evaluation file list")
    num_workers: PosInt | None = Field(None, description="DataReaderParams num_workers (HugeCTR default 12)")


class FeaturesSpec(Strict):
    """Column roles. Default: what the workflow's output schema tags categorical / continuous / target."""

    categorical: list[str] | None = None
    continuous: list[str] | None = None
    label: list[str] | None = Field(None, description="label column(s); a single label in HugeCTR < 3.5")


class SolverSpec(Strict):
    batchsize: PosInt = 2048
    batchsize_eval: PosInt = 2048
    max_eval_batches: PosInt = 100
    vvgpu: list[list[NonNegInt]] = Field(default_factory=lambda: [[0]], min_length=1)
    lr: Annotated[float, Field(gt=0.0, allow_inf_nan=False)] | None = None
    warmup_steps: PosInt | None = None
    decay_start: NonNegInt | None = None
    decay_steps: PosInt | None = None
    decay_power: Float | None = None
    end_lr: Float | None = None
    repeat_dataset: bool = True
    use_mixed_precision: bool = False
    scaler: Float | None = None
    enable_tf32_compute: bool | None = None
    use_cuda_graph: bool | None = None
    seed: NonNegInt | None = None
    model_name: bool = Field(False, description="pass the spec name as CreateSolver(model_name=...) (HugeCTR >= 3.3)")
    i64_input_key: bool | None = Field(None, description="derived from the categorical dtype; set only to assert it")


class OptimizerSpec(Strict):
    type: Literal["Adam", "AdaGrad", "MomentumSGD", "Nesterov", "SGD", "Ftrl", "RMSProp"] = "Adam"
    update_type: Literal["Global", "Local", "LazyGlobal"] | None = None
    beta1: Float | None = None
    beta2: Float | None = None
    epsilon: Float | None = None
    initial_accu_value: Float | None = None
    momentum_factor: Float | None = None
    atomic_update: bool | None = None
    beta: Float | None = None
    lambda1: Float | None = None
    lambda2: Float | None = None


class SparseInputSpec(Strict):
    name: Ident = "data1"
    columns: list[str] | None = Field(
        None, description="categorical columns of this input, a contiguous run in slot order "
                          "(default on the last input: the remaining slots)")
    nnz_per_slot: PosInt | list[PosInt] | None = Field(
        None, description="max keys per slot (default 1 for one-hot columns; multi-hot columns need it)")
    is_fixed_length: bool = False


class InputSpec(Strict):
    label_name: Ident = "label"
    dense_name: Ident = "dense"
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
    embedding_vec_size: Annotated[int, Field(ge=1, le=1024)] = 16
    combiner: Literal["sum", "mean"] = "sum"
    workspace_size_per_gpu_in_mb: NonNegInt | None = Field(
        None, description="required by HugeCTR < 23.06; 0 with slot_size_array at 23.06")
    slot_size_array: bool = Field(False, description="pass this input's cardinalities as SparseEmbedding slot_size_array")
    optimizer: Literal["model", "default"] = Field(
        "model", description="'model': pass the model optimizer explicitly (as the notebooks do); 'default': omit")


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
    bottom: Ident | list[Ident]
    top: Ident | list[Ident]


class ExplicitGraph(Strict):
    preset: Literal["layers"]
    layers: list[LayerSpec] = Field(..., min_length=1)


ModelSpec = Annotated[Union[MLPPreset, WDLPreset, DCNPreset, DLRMPreset, DeepFMPreset, ExplicitGraph],
                     Field(discriminator="preset")]


class TrainingSpec(Strict):
    max_iter: NonNegInt | None = None
    num_epochs: NonNegInt | None = None
    display: PosInt = 200
    eval_interval: PosInt = 1000
    snapshot: NonNegInt | None = Field(None, description="snapshot interval (omitted: HugeCTR's default 10000)")
    snapshot_prefix: str = ""
    graph_json: str | None = Field(None, description="where model.py writes the graph JSON (default <name>.json)")
    graph_to_json_before_fit: bool = False

    @model_validator(mode="after")
    def _one_loop(self) -> "TrainingSpec":
        if self.max_iter is None and self.num_epochs is None:
            object.__setattr__(self, "max_iter", 2000)
        return self


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
    embeddings: list[EmbeddingSpec] = Field(default_factory=lambda: [EmbeddingSpec()], min_length=1)
    model: ModelSpec
    training: TrainingSpec = Field(default_factory=TrainingSpec)
    targets: list[Literal["hugectr", "torch"]] = Field(
        default_factory=lambda: ["hugectr"], min_length=1,
        description="what to render: 'hugectr' (model.py + graph JSON), 'torch' (train_torch.py + features.json)")

    @model_validator(mode="after")
    def _unique_targets(self) -> "Spec":
        if len(set(self.targets)) != len(self.targets):
            raise ValueError("targets must not repeat")
        return self
