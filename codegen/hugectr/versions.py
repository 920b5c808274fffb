"""HugeCTR release profiles: which API arguments, enum members and JSON rules each release has.

Every rule is one row: a name with the first release that has it and, where it was removed, the first release that
no longer does. API facts (functions, arguments, enum members) are not written here: they come from
``api_table.json`` (see ``api.py``; extracted from each release's pybind sources by tools/hugectr_api.py). What is
written here are the JSON writer's and the model's behaviour rules (docs/hugectr.md, section numbers in the
comments). A spec that needs a thing its target release lacks fails with a message naming the releases that
have it.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import api as A

Release = tuple[int, int]

# Every release the API table covers (3.2 to 25.03, named as its tag without the leading v and the patch), oldest
# first; ctrgen generates for all of them.
RELEASES: dict[str, Release] = {name: A.release_key(name) for name in A.RELEASES}
SUPPORTED: dict[str, Release] = RELEASES
# The releases the HugeCTR stand-in imitates (tests/standin) and the committed goldens are checked at.
STANDIN: tuple[str, ...] = ("3.2", "3.3", "4.3", "23.06")
NEWEST: Release = (99, 0)


def fmt(r: Release) -> str:
    return f"{r[0]}.{r[1]:02d}" if r[0] >= 23 else f"{r[0]}.{r[1]}"


@dataclass(frozen=True)
class Span:
    since: Release
    until: Release = NEWEST  # first release without it

    def covers(self, r: Release) -> bool:
        return self.since <= r < self.until

    def describe(self) -> str:
        if self.until == NEWEST:
            return f"HugeCTR {fmt(self.since)} and later"
        return f"HugeCTR {fmt(self.since)} up to (not including) {fmt(self.until)}"


def _s(since: Release, until: Release = NEWEST) -> Span:
    return Span(since, until)


ALL = _s((3, 2))


def _api(name: str, arg: str | None = None) -> Span:
    """The span of an API fact (function, ``Enum.Member``, or argument ``arg`` of function ``name``) in the table."""
    spans = A.spans(name, arg)
    if len(spans) != 1:
        raise AssertionError(f"{name} {arg or ''}: {spans} is not one span")
    since, until = spans[0]
    return Span(RELEASES[since], RELEASES[until] if until else NEWEST)


def _enum(enum: str) -> dict[str, Span]:
    return {m: _api(f"{enum}.{m}") for m in A.members_ever(enum)}


def _args(func: str, skip: tuple[str, ...] = ()) -> dict[str, Span]:
    return {a: _api(func, a) for a in A.params_ever(func) if a not in skip}

# ---- JSON writer and model behaviour (hugectr.md §2.9, §2.7, §2.8, §1.3) ---------------------------------------
BEHAVIOUR: dict[str, Span] = {
    "model_name": _api("CreateSolver", "model_name"),  # CreateSolver(model_name=) and the top-level JSON key
    # graph_analysis() inserts Slice layers for multi-use tensors: from 3.3 (release 3.2 is the v3.2 tag, which has
    # no graph_analysis; the v3.2.1 patch already had it, see tools/hugectr_api.py PINNED_TAGS)
    "auto_slice": _s((3, 3)),
    "auto_slice_last_dim": _s((3, 4)),       # v3.3 sliced dimension [1]; later the last dimension (§2.7)
    "vocab_optimizer_states": _s((3, 5)),    # max_vocabulary_size_per_gpu divides by (1+k) (§2.8)
    "multi_label": _api("Input", "label_dims"),  # Input(label_dims=[...], label_names=[...])
    "concat_axis": _s((3, 6)),               # Concat writes "axis"
    "sparse_type_key": _s((3, 2), (24, 4)),  # sparse inputs carry "type": "DistributedSlot"
    "summary_batch_shapes": _s((4, 0)),      # model.summary() prints (batch,...) instead of (None, ...)
    "summary_row_rules": _s((3, 3)),         # model.summary() separates rows with '-' rules
    # CreateSolver(warmup_steps=0 / decay_steps=0): up to 23.02 the learning-rate schedulers throw "warmup_steps < 1
    # || decay_steps < 1"; from 23.04 (learning_rate_scheduler.hpp, gpu_learning_rate_scheduler.cu) only negative
    # values are refused, which a size_t cannot be, and 0 means no warmup / no decay
    "lr_steps_zero": _s((23, 4)),
}


def _where(test) -> Span:
    """The span of the releases where ``test(release name)`` holds (they must be consecutive)."""
    ks = [k for k, r in enumerate(A.RELEASES) if test(r)]
    if not ks or ks != list(range(ks[0], ks[-1] + 1)):
        raise AssertionError("not one span")
    return Span(RELEASES[A.RELEASES[ks[0]]],
                RELEASES[A.RELEASES[ks[-1] + 1]] if ks[-1] + 1 < len(A.RELEASES) else NEWEST)


# ---- what the graph builder, the shape rules and the JSON writer do by release (hugectr.md §1.1, §1.6, §2) ----------
BEHAVIOUR.update({
    # CreateSolver refuses a mixed-precision scaler other than 128/256/512/1024 up to 4.3 (v4.3.1's
    # pybind/solver_wrapper.hpp); v23.02.00 comments the check out (§1.1: "the check is commented out by v23.06")
    "solver_scaler_check": _s((3, 2), (23, 2)),
    "softmax_mask": _s((3, 9)),              # Softmax takes a second input, the mask (masked softmax)
    "softmax_factor_json": _s((3, 9)),       # graph_to_json writes Softmax's "factor"
    # AsyncParam's positional order changed in 4.1 (the importer binds positional arguments by it)
    "async_param_order_4_1": _s((4, 1)),
    # MaskedSoftMaxLayer in mixed precision: refused from 23.06; before, a plain Softmax that drops the mask is built
    "masked_softmax_mixed_refused": _s((23, 6)),
    # MaskedSoftmaxLayer reads a (rows, S) mask block per sample from 23.08; before, one row of S (masked_softmax_layer.cu)
    "masked_softmax_rows": _s((23, 8)),
    # Model::add(SparseEmbedding) throws "Raw async reader and hybrid embedding must come together" from v3.3.1 (the
    # first pybind with RawAsync) to v23.12.00 (pybind/model.cpp); v24.04.00 drops HybridSparseEmbedding and the check
    "raw_async_with_hybrid": _s((3, 3), (24, 4)),
    "matmul_2d_by_3d_check": _s((23, 6)),    # MatrixMultiply of a 2D by a 3D tensor: the rhs batch is checked
    "matmul_4d": _s((4, 3)),                 # 4D MatrixMultiply
    "mha_as_4_3": _s((4, 3)),                # MultiHeadAttention as ctrgen models it (4.3 and later)
    "mha_23_09": _s((23, 9)),                # MultiHeadAttention's 23.09 form (Q, K, V and a mask)
    # SequenceMask reads max_sequence_len_from / _to (and the JSON writes them) where DenseLayer has them
    "sequence_mask_from_to": _api("DenseLayer", "max_sequence_len_from"),
    # The embedding collection (model.cpp / embedding_collection_wrapper.hpp of each release):
    "collection_one_slot_inputs": _s((23, 4)),  # add(Input) requires one slot per sparse input
    "collection_grouped_lookup": _s((23, 4)),   # embedding_lookup's list overload
    "collection_lookup_3d": _s((3, 8)),         # a lookup's top is (batch, 1, dims); 3.7 reserves (batch, dims)
    # Layer_t.Gather is built as a Select of dimension 0 from 23.08 (add_dense_layer_helpers.cpp), which SelectLayer
    # rejects; before, as a GatherLayer whose output no model builder allocates
    "gather_is_select": _s((23, 8)),
    # Ftrl's kernels take sqrt(n + FLT_EPSILON) from 23.04 (src/optimizers/ftrl_optimizer.cu, embedding_storage/
    # optimizers.cuh), sqrt(n) before; the embedding collection's static tables update with Ftrl from 23.06
    # (ragged_static_embedding.cu's FtrlOptimizer; before, its update throws "optimizer not implemented")
    "ftrl_epsilon": _s((23, 4)),
    "collection_static_ftrl": _s((23, 6)),
})


def holds(rule: str, release: str | Release) -> bool:
    """Whether BEHAVIOUR ``rule`` holds in ``release`` (a name such as "23.06", or its (major, minor))."""
    return BEHAVIOUR[rule].covers(RELEASES[release] if isinstance(release, str) else release)


# SparseEmbedding(workspace_size_per_gpu_in_mb=) has a default (0), so a spec may leave it out.
BEHAVIOUR["workspace_optional"] = _where(lambda r: any(
    p.name == "workspace_size_per_gpu_in_mb" and not p.required for p in A.signature("SparseEmbedding", r)))

# ---- Continuous training: the embedding cache and the low-level loop (hugectr.md §1.8, §1.9) ----------------------
CONTINUOUS: dict[str, Span] = {
    "CreateMOS": _api("CreateMOS"),                    # model oversubscriber; Model(..., mos) (mos_params)
    "get_model_oversubscriber": _api("Model.get_model_oversubscriber"),
    "CreateETC": _api("CreateETC"),                    # embedding training cache; deprecated 23.09, removed 23.12
    "CreateHMemCache": _api("CreateHMemCache"),
    "TrainPSType_t": _api("TrainPSType_t"),            # Staged / Cached
    "get_embedding_training_cache": _api("Model.get_embedding_training_cache"),
    "set_source_keyset": _api("Model.set_source", "keyset"),  # Model.set_source(source, keyset, eval_source)
    "get_incremental_model": _api("Model.get_incremental_model"),
    "train_is_first_batch": _api("Model.train", "is_first_batch"),  # train(is_first_batch=True) / eval(...)
}
# Either cache: what a spec's continuous_training section needs at all.
CONTINUOUS_ANY = Span(CONTINUOUS["CreateMOS"].since, CONTINUOUS["CreateETC"].until)

# ---- Layer_t, Embedding_t, Optimizer_t members (from the API table) -------------------------------------------
LAYERS: dict[str, Span] = _enum("Layer_t")

# Layers HugeCTR can build in mixed precision (LAYER_TYPE_TO_STRING_MP, hugectr.md §1.6).
MIXED_PRECISION_LAYERS = frozenset(
    "BatchNorm LayerNorm BinaryCrossEntropyLoss Cast Concat Dropout ELU InnerProduct Interaction ReLU Reshape Sigmoid "
    "Slice WeightMultiply MultiHeadAttention FmOrder2 Add ReduceSum Softmax ElementwiseMultiply FusedInnerProduct "
    "MultiCross MLP SequenceMask".split())
SINGLE_PRECISION_EXCLUDED = frozenset({"FusedInnerProduct"})

EMBEDDINGS: dict[str, Span] = _enum("Embedding_t")
OPTIMIZERS: dict[str, Span] = _enum("Optimizer_t")

# Optimizer state copies per embedding weight (k in hugectr.md §2.8).
# A label's loss weight where Model.compile(loss_names, loss_weights) does not name it: Input's constructors set 1.0
# in the C++ body (HugeCTR/src/pybind/model.cpp, Input::Input, 3.5 - 25.03), so the API table has no default for it.
LABEL_WEIGHT = 1.0
# FtrlOptHyperParams' in-class defaults (include/optimizer.hpp, v4.3 - v23.02.00): what Ftrl reads in the releases
# whose CreateOptimizer takes no beta, lambda1 or lambda2 (from 23.04 the API table has them, with the same values).
FTRL_STRUCT_DEFAULTS = {"beta": 0.0, "lambda1": 0.0, "lambda2": 0.0}
OPTIMIZER_STATES = {"Adam": 2, "AdaGrad": 1, "MomentumSGD": 1, "Nesterov": 1, "SGD": 0, "Ftrl": 2, "RMSProp": 1}

# ---- Keyword arguments by function (from the API table) ---------------------------------------------------------
ARGS: dict[str, dict[str, Span]] = {
    func: _args(func) for func in ("CreateSolver", "CreateOptimizer", "DataReaderParams", "SparseEmbedding")}
# DenseLayer keywords (layer_type, bottom_names, top_names are the spec's type, bottom, top).
DENSE_LAYER_ARGS: dict[str, Span] = _args("DenseLayer", skip=("layer_type", "bottom_names", "top_names"))
ARGS["DenseLayer"] = DENSE_LAYER_ARGS
# Model methods a spec calls: compile and fit (training:), and those it may call after training (training.then);
# their keyword arguments come from the API table.
MODEL_METHODS: tuple[str, ...] = (
    "export_predictions", "save_params_to_files", "eval", "load_dense_weights", "load_sparse_weights",
    "load_dense_optimizer_states", "load_sparse_optimizer_states", "freeze_dense", "freeze_embedding",
    "unfreeze_dense", "unfreeze_embedding", "check_out_tensor", "reset_learning_rate_scheduler",
    "get_incremental_model", "get_eval_metrics", "get_current_loss")
for _m in ("compile", "fit", *MODEL_METHODS):
    ARGS[f"Model.{_m}"] = _args(f"Model.{_m}")

# hugectr.tools.DataGeneratorParams (data.generate of a spec), from the API table.
ARGS["tools.DataGeneratorParams"] = _args("tools.DataGeneratorParams")

# hugectr.inference, for offline_inference after training.
API: dict[str, Span] = {f: _api(f) for f in ("inference.InferenceModel", "inference.CreateInferenceSession")}
ARGS["inference.InferenceParams"] = _args("inference.InferenceParams")
ARGS["inference.InferenceModel.predict"] = _args("inference.InferenceModel.predict")
# CreateInferenceSession returns an InferenceSession; scripts call its predict.
ARGS["inference.CreateInferenceSession.predict"] = _args("inference.InferenceSession.predict")
ARGS["data.DataSourceParams"] = _args("data.DataSourceParams")


def default_inference_api(release: str | Release) -> str:
    """The offline inference API a script uses when it names none: InferenceModel where the release has it."""
    r = RELEASES[release] if isinstance(release, str) else release
    return "InferenceModel" if API["inference.InferenceModel"].covers(r) else "CreateInferenceSession"


# The class of the object each offline inference API returns, and its methods (offline_inference.then).
INFERENCE_CLASS = {"InferenceModel": "inference.InferenceModel", "CreateInferenceSession": "inference.InferenceSession"}
for _f in A.functions_ever():
    if _f.startswith(tuple(c + "." for c in INFERENCE_CLASS.values())):
        ARGS.setdefault(_f, _args(_f))

# HugeCTR enum types (values of these are written hugectr.<Type>.<Member>).
ENUM_TYPE_NAMES = frozenset(A.enums()) | {"TrainPSType_t"}
# DenseLayer keywords whose values are hugectr objects (written {hugectr.X: {...}} in a spec); not in the JSON.
DENSE_LAYER_OBJECTS = {"dense_layer_switches": "DenseLayerSwitchs", "compute_config": "DenseLayerComputeConfig"}
DENSE_LAYER_NOT_GENERATED = frozenset(DENSE_LAYER_OBJECTS)  # no default to compare with


def _python_default(value: object) -> object:
    """A table default as the generator holds it: enum members by their member name ("Initializer_t.Default" ->
    "Default")."""
    if isinstance(value, str) and not isinstance(value, A.Unparsed) and "." in value:
        enum, _, member = value.partition(".")
        if enum in A.enums():
            return member
    return value


def dense_layer_defaults(release: str) -> dict[str, object]:
    """DenseLayer keyword -> its default in ``release``, in that release's order; keywords the release lacks follow
    with the default of the nearest release that has them (so a lookup never fails)."""
    return dict(_dense_layer_defaults(release))


_DENSE_CACHE: dict[str, tuple] = {}


def _dense_layer_defaults(release: str) -> tuple:
    if release not in _DENSE_CACHE:
        k = A.RELEASES.index(release)
        nearest = sorted(A.RELEASES, key=lambda r: abs(A.RELEASES.index(r) - k))
        out: dict[str, object] = {}
        for r in nearest:
            for p in A.signature("DenseLayer", r):
                if p.name in DENSE_LAYER_ARGS and p.name not in DENSE_LAYER_NOT_GENERATED and p.name not in out:
                    out[p.name] = _python_default(p.default)
        _DENSE_CACHE[release] = tuple(out.items())
    return _DENSE_CACHE[release]


@dataclass(frozen=True)
class Profile:
    """What one target release has. Use :meth:`has` / :meth:`require` instead of comparing versions."""

    name: str
    release: Release

    def has(self, behaviour: str) -> bool:
        return BEHAVIOUR[behaviour].covers(self.release)

    def has_layer(self, layer: str) -> bool:
        return layer in LAYERS and LAYERS[layer].covers(self.release)

    def has_optimizer(self, opt: str) -> bool:
        return OPTIMIZERS[opt].covers(self.release)

    def has_api(self, name: str) -> bool:
        return CONTINUOUS[name].covers(self.release)

    def has_arg(self, func: str, arg: str) -> bool:
        if func not in ARGS:
            return A.has(func, self.name, arg)
        span = ARGS[func].get(arg)
        return span is not None and span.covers(self.release)

    def signature(self, func: str) -> tuple[A.Param, ...]:
        """The parameters of ``func`` in this release, in order (see api.signature)."""
        return A.signature(func, self.name)

    def dense_layer_defaults(self) -> dict[str, object]:
        """DenseLayer keyword -> default in this release (enum members by member name), in declaration order."""
        return dense_layer_defaults(self.name)

    def missing(self, table: dict[str, Span], key: str, what: str) -> str | None:
        """None if the release has ``key``; else a message naming the releases that do."""
        span = table.get(key)
        if span is None:
            return f"{what} {key!r} does not exist in any HugeCTR release"
        if span.covers(self.release):
            return None
        return f"{what} {key!r} is not in HugeCTR {self.name}; it exists in {span.describe()}"


    def missing_function(self, func: str) -> str | None:
        """None if the release has ``func`` (from the API table); else which releases do."""
        try:
            return A.missing(func, self.name)
        except A.ApiError as exc:
            return str(exc)

    def missing_arg(self, func: str, arg: str) -> str | None:
        """None if ``func`` takes keyword ``arg`` in this release; else why not (with the releases that do)."""
        table = ARGS.get(func)
        if table is None:
            return f"ctrgen cannot pass further arguments to {func}"
        return self.missing(table, arg, f"{func} argument")


def profile(version: str) -> Profile | None:
    """The profile of any release in RELEASES (or SUPPORTED); None for an unknown one. Whether ctrgen generates for
    it is ``version in SUPPORTED``."""
    rel = SUPPORTED.get(version) or RELEASES.get(version)
    return Profile(version, rel) if rel else None


def max_vocabulary_size_per_gpu(p: Profile, workspace_mb: int, vec: int, optimizer: str, update_type: str) -> int:
    """hugectr.md §2.8: integer arithmetic, as Model::add(SparseEmbedding&) does it."""
    if not p.has("vocab_optimizer_states"):
        return workspace_mb * 1024 * 1024 // (4 * vec)
    k = OPTIMIZER_STATES[optimizer] + (1 if optimizer == "Adam" and update_type == "LazyGlobal" else 0)
    return workspace_mb * 1024 * 1024 // ((1 + k) * 4 * vec)
