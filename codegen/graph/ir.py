"""The intermediate graph: every HugeCTR object a model.py creates, with derived numbers and output shapes.

This is the HugeCTR part of the typed model (codegen.model.types.Model.job), which the renderers read instead of the
spec. Values are plain Python values; enum members are :class:`Enum` so each renderer spells them its own way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..hugectr import api as A
from ..hugectr.versions import ENUM_TYPE_NAMES, LABEL_WEIGHT, Profile
from .shapes import Shape


@dataclass(frozen=True)
class Enum:
    """A HugeCTR enum member, e.g. Enum("Optimizer_t", "Adam") -> hugectr.Optimizer_t.Adam."""

    type: str
    member: str


Args = tuple[tuple[str, object], ...]  # ordered keyword arguments of one API call


@dataclass(frozen=True)
class CallValue:
    """A hugectr value object passed as an argument, e.g. CallValue("AsyncParam", (("num_threads", 16), ...))."""

    func: str
    args: Args


def enum_values(value: object) -> object:
    """"Type.Member" strings of a spec's args: map -> :class:`Enum` (also as map keys); other values unchanged."""
    if isinstance(value, str):
        head, dot, member = value.partition(".")
        if dot and member.isidentifier() and head in ENUM_TYPE_NAMES:
            return Enum(head, member)
        return value
    if isinstance(value, list):
        return [enum_values(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1:
            (key, inner), = value.items()
            if isinstance(key, str) and key.startswith("hugectr.") and isinstance(inner, dict):
                return CallValue(key[len("hugectr."):], tuple((k, enum_values(v)) for k, v in inner.items()))
        return {enum_values(k): enum_values(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class SparseInput:
    name: str
    columns: tuple[str, ...]
    cardinalities: tuple[int, ...]
    nnz_per_slot: tuple[int, ...]     # one per slot, as HugeCTR stores it (hugectr.md §1.4)
    is_fixed_length: bool
    nnz_arg: int | tuple[int, ...]    # what model.py passes (an int when all slots agree)
    multi_hot: tuple[bool, ...] = ()

    @property
    def slot_num(self) -> int:
        return len(self.columns)


@dataclass(frozen=True)
class Optimizer:
    type: str
    update_type: str
    hparams: Args                     # the CreateOptimizer keywords the spec set (beyond optimizer_type)
    values: dict = field(default_factory=dict, compare=False)  # effective values incl. HugeCTR defaults


@dataclass(frozen=True)
class Embedding:
    name: str                         # sparse_embedding_name = the JSON "top" = the HPS table name
    bottom: str
    embedding_type: str
    vec_size: int
    combiner: str
    workspace_mb: int | None          # as given (model.py passes it only then)
    workspace_in_effect: int          # the given one, else the release's default (graph/sparse.py resolves it)
    slot_size_array: tuple[int, ...] | None
    explicit_optimizer: bool          # model.py passes optimizer=optimizer
    optimizer: Optimizer
    max_vocabulary_size_global: int
    slot_num: int
    extra: Args = ()                  # further SparseEmbedding keywords the spec set (args:)
    init: str = "uniform"             # the PyTorch target's initial rows: uniform | normal

    @property
    def shape(self) -> Shape:
        return Shape((self.slot_num, self.vec_size))


@dataclass(frozen=True)
class Layer:
    type: str
    bottoms: tuple[str, ...]
    tops: tuple[str, ...]
    params: Args                      # DenseLayer keywords other than layer_type/bottom_names/top_names
    out_shapes: tuple[Shape, ...]
    in_shapes: tuple[Shape, ...]
    auto: bool = False                # inserted by HugeCTR's graph_analysis(), not by model.py
    origin: tuple = ()                # spec location, for error messages
    # Part of a GroupDenseLayer model.py adds as one call, which HugeCTR expands into these layers:
    # (group type, bottom_name_list, top_name_list, num_outputs, last_act_type member).
    group: tuple | None = None
    # Every DenseLayer argument in effect: ``params`` over the release's defaults (dense_values); what the renderers
    # and the shape rules read, so that no default is written twice.
    values: dict = field(default_factory=dict, compare=False, repr=False)

    def param(self, name: str, default: object = None) -> object:
        for k, v in self.params:
            if k == name:
                return v
        return default


def call_values(func: str, params: Args | dict, release: str) -> dict:
    """A ``func`` call's arguments in effect in ``release``: the given ones over HugeCTR's defaults from the API
    table (enum defaults as :class:`Enum`). Arguments the release lacks are absent, never guessed."""
    return {**{k: enum_values(v) for k, v in A.defaults(func, release).items()}, **dict(params)}


def dense_values(params: Args | dict, release: str) -> dict:
    """A DenseLayer call's arguments in effect in ``release`` (:func:`call_values`)."""
    return call_values("DenseLayer", params, release)


# ---- the embedding collection API (codegen.graph.embedding_collection builds it) ----

CONFIG = "EmbeddingCollectionConfig"


@dataclass(frozen=True)
class CollectionTable:
    func: str                     # EmbeddingTableConfig | EmbeddingTablePlaceHolder
    args: Args                    # in the release's parameter order (as model.py prints them)
    rows: int                     # max_vocabulary_size (-1: a dynamic hash table)
    ev_size: int
    label: str                    # its name (4.2+), id (3.8 - 4.1) or id space (3.7); its index where it has none
    key_range: tuple[int, int] | None = None    # (min_key, max_key) of a 3.7 - 4.0 table; None where it has none


@dataclass(frozen=True)
class Lookup:
    table: int | tuple[int, ...]  # index into EmbeddingCollection.tables (a tuple: the grouped form)
    bottom: str | tuple[str, ...]
    top: str
    combiner: str | tuple[str, ...]
    shape: Shape                  # of top, batch left out

    @property
    def bottoms(self) -> tuple[str, ...]:
        return self.bottom if isinstance(self.bottom, tuple) else (self.bottom,)


@dataclass(frozen=True)
class EmbeddingCollection:
    api: str                      # EmbeddingCollectionConfig | EmbeddingPlanner
    args: Args                    # constructor arguments
    tables: tuple[CollectionTable, ...]
    lookups: tuple[Lookup, ...]
    shard: Args                   # EmbeddingCollectionConfig.shard / EmbeddingPlanner.create_embedding_collection
    table_arg: str = "table_config"   # embedding_lookup's table parameter (3.7: emb_table)

    @property
    def shard_method(self) -> str:
        return "shard" if self.api == CONFIG else "create_embedding_collection"

    def outputs(self) -> dict[str, Shape]:
        return {lk.top: lk.shape for lk in self.lookups}


@dataclass(frozen=True)
class Graph:
    label_names: tuple[str, ...]
    label_dims: tuple[int, ...]
    dense_name: str
    dense_dim: int
    sparse: tuple[SparseInput, ...]
    embeddings: tuple[Embedding, ...]
    layers: tuple[Layer, ...]         # as model.py adds them
    analysed: tuple[Layer, ...]       # after graph_analysis(): what the JSON and summary show
    collection: EmbeddingCollection | None = None   # the embedding collection API's tables and lookups

    def tensor_shapes(self) -> dict[str, Shape]:
        shapes = {name: Shape((dim,)) for name, dim in zip(self.label_names, self.label_dims)}
        shapes[self.dense_name] = Shape((self.dense_dim,))
        for s in self.sparse:
            shapes[s.name] = Shape((s.slot_num,))
        for e in self.embeddings:
            shapes[e.name] = e.shape
        if self.collection is not None:
            shapes.update(self.collection.outputs())
        for layer in self.analysed:
            shapes.update(zip(layer.tops, layer.out_shapes))
        return shapes


@dataclass(frozen=True)
class DataPass:
    """One incremental pass of continuous training: file lists with their keyset files, and the eval list."""

    source: tuple[str, ...]
    keyset: tuple[str, ...]
    eval_source: str
    fit: bool = True                  # False: set_source only (the cache loads the keysets), no fit


@dataclass(frozen=True)
class ContinuousTraining:
    """The embedding cache a continuous-training script creates, and the passes it trains (seed 003)."""

    cache: str                        # "mos" (CreateMOS) or "etc" (CreateETC)
    ps_types: tuple[str, ...]         # etc: "Staged"/"Cached" per embedding; mos: one of "host_memory"/"ssd"
    sparse_models: tuple[str, ...]    # one per embedding, in add() order
    train_from_scratch: bool
    dense_model: str | None
    local_paths: tuple[str, ...]      # etc with cached tables: one per node
    hmem_cache: Args | None           # CreateHMemCache keywords, when a table is cached
    passes: tuple[DataPass, ...]
    save_prefix: str
    incremental_model: bool
    low_level: bool
    first_batch_flag: bool            # train(is_first_batch) / eval(is_first_batch) exist (3.3 up to 23.06)
    num_epochs: int
    display: int
    eval_interval: int
    max_eval_batches: int
    # model_low_level.py's own settings (seed 003 keeps them apart from model.py's); empty/None: model.py's.
    low_sparse_models: tuple[str, ...] = ()
    low_eval_source: str | None = None
    low_save_prefix: str | None = None


@dataclass(frozen=True)
class OfflineInference:
    """hugectr.inference.InferenceModel(graph_json, InferenceParams(...)).predict(...) after training."""

    api: str                          # "InferenceModel" or "CreateInferenceSession"
    graph_json: str
    params: Args
    predict: Args
    compare_with: str | None
    max_mse: float
    then: tuple[tuple[str, Args], ...] = ()   # methods of the inference model after predict (check_out_tensor)


@dataclass(frozen=True)
class ReaderCheck:
    """model.py reads ``batches`` batches with the model's ``reader`` ("train"/"eval") data reader and makes
    ``calls`` for each: (of "reader" or "model", method, keyword arguments)."""

    reader: str
    batches: int
    calls: tuple[tuple[str, str, Args], ...]


# ---- the settings in effect, resolved once by the builder (graph/build.py's _settings: the spec's values over the
# release's defaults from the API table); the renderers read these fields, never a call's arguments by name ----

@dataclass(frozen=True)
class LrSchedule:
    """CreateSolver's learning-rate schedule in effect."""

    lr: float
    warmup_steps: int
    decay_start: int
    decay_steps: int
    decay_power: float
    end_lr: float


@dataclass(frozen=True)
class SolverSettings:
    """What the renderers read of CreateSolver's arguments, in effect."""

    vvgpu: tuple[tuple[int, ...], ...]
    batchsize: int
    batchsize_eval: int
    max_eval_batches: int
    seed: int
    schedule: LrSchedule
    use_mixed_precision: bool
    enable_tf32_compute: bool
    scaler: float | None              # the spec's loss scaler; None: not given (each target keeps its own)


@dataclass(frozen=True)
class FitPlan:
    """Model.fit's arguments in effect."""

    by_epochs: bool                   # epoch mode (solver.repeat_dataset false): fit runs num_epochs
    num_epochs: int
    max_iter: int | None              # as given (None in epoch mode unless given; HugeCTR then ignores it)
    display: int
    eval_interval: int
    snapshot: int
    snapshot_prefix: str


@dataclass(frozen=True)
class ReaderPlan:
    """DataReaderParams' arguments in effect that the renderers read."""

    data_reader_type: Enum
    source: tuple[str, ...]           # the training file lists
    eval_source: str
    check_type: Enum
    slot_sizes: bool                  # slot_size_array is passed (the Parquet reader then adds per-slot offsets)
    num_workers: int


@dataclass(frozen=True)
class TrainingJob:
    """Everything model.py does, in call order."""

    name: str
    profile: Profile                  # the target release's profile, resolved once by the builder
    solver: Args
    optimizer: Optimizer
    reader: Args
    graph: Graph
    fit: Args
    graph_json: str
    setup_order: tuple[str, ...]      # "solver" / "reader" / "optimizer", as model.py creates them
    after_compile: tuple[str, ...]    # "summary" / "graph_to_json" / "fit", as model.py calls them
    compile_args: Args
    before_compile: tuple[str, ...]   # "summary" / "graph_to_json" called before compile(), in order
    data_generator: Args | None       # DataGeneratorParams keywords when model.py synthesizes its data first
    offline_inference: OfflineInference | None
    then: tuple[tuple[str, Args], ...]  # Model methods called last: (method, keyword arguments)
    before_fit: tuple[tuple[str, Args], ...]  # Model methods called just before fit
    gpu_count: int
    batchsize: int
    mixed_precision: bool
    i64_input_key: bool
    model_name: str                   # "" unless CreateSolver(model_name=...) is passed
    # CreateSolver's, DataReaderParams' and Model.fit's settings in effect, resolved once by the builder; solver,
    # reader and fit above are the calls' arguments as given, which only the script renderer prints.
    settings: SolverSettings
    reader_plan: ReaderPlan
    fit_plan: FitPlan
    continuous: ContinuousTraining | None = None
    model_class: str = "Model"        # or "ModelPerfExt" (3.3 up to 3.8)
    data_source: tuple[Args, bool] | None = None   # DataSourceParams keywords, move_to_local (3.4 up to 3.9)
    nodes: int = 1                    # rows of solver.vvgpu: one HugeCTR process per node, over MPI
    save_weights: bool = True         # training.save_weights: see final_save
    reader_check: "ReaderCheck | None" = None   # a data-reader test instead of compile and fit
    # An imported script's Parquet reader with one label of label_dim > 1: the script names no label columns, which
    # HugeCTR reads from the data's _metadata.json at run time (and so does train_torch.py: runtime/label_names.py).
    labels_from_metadata: bool = False

    @property
    def hugectr_version(self) -> str:
        return self.profile.name

    def label_weight(self, label: str) -> float:
        """The weight of ``label``'s loss: Model.compile's loss_weights where its loss_names names it, else HugeCTR's
        (LABEL_WEIGHT)."""
        compiled: dict[str, Any] = dict(self.compile_args)
        weights = dict(zip(compiled.get("loss_names") or [], compiled.get("loss_weights") or []))
        return float(weights.get(label, LABEL_WEIGHT))

    @property
    def last_snapshot(self) -> int | None:
        """The iteration of fit's last snapshot (written when ``snapshot > 0 and iter % snapshot == 0 and iter != 0``
        for iter < max_iter, hugectr.md §1.9); 0 when fit writes none; None when fit runs by epochs."""
        fit = self.fit_plan
        if fit.max_iter is None or fit.by_epochs:     # max_iter beside num_epochs is ignored
            return None
        return (fit.max_iter - 1) // fit.snapshot * fit.snapshot if fit.snapshot else 0

    @property
    def weights_iteration(self) -> int | None:
        """The iteration in the names of the weight files that serving loads: fit's last snapshot, else max_iter
        (the training script then saves them itself, see ``final_save``); None when fit runs by epochs."""
        last = self.last_snapshot
        return None if last is None else (last or self.fit_plan.max_iter)

    @property
    def final_save(self) -> tuple[str, int] | None:
        """(prefix, iteration) of the ``save_params_to_files`` call model.py makes after fit when fit writes no
        snapshot (snapshot 0, or >= max_iter), so that the files ps.json names exist; None when not needed."""
        if not self.save_weights or self.continuous is not None or self.last_snapshot != 0:
            return None
        if any(method == "save_params_to_files" for method, _ in self.then):
            return None
        assert self.fit_plan.max_iter is not None      # (last_snapshot is 0 in iteration mode only)
        return self.fit_plan.snapshot_prefix, self.fit_plan.max_iter
