"""HugeCTR release profiles: which API arguments, enum members and JSON rules each release has.

Every rule is one row: a name with the first release that has it and, where it was removed, the first release that
no longer does. Sources are shared/reference/hugectr.md (section numbers in the comments). A spec that needs a thing
its target release lacks fails with a message naming the releases that have it.
"""

from __future__ import annotations

from dataclasses import dataclass

Release = tuple[int, int]

# Releases ctrgen generates for. Adding one is adding a key here (and checking the tables below).
# Every release from 3.2 to 25.03, named as its tag without the leading v and the patch (v23.04.00 -> "23.04").
SUPPORTED: dict[str, Release] = {name: (int(name.split(".")[0]), int(name.split(".")[1])) for name in (
    "3.2 3.3 3.4 3.5 3.6 3.7 3.8 3.9 4.0 4.1 4.2 4.3 23.02 23.04 23.05 23.06 23.08 23.09 23.12 24.04 24.06 "
    "25.03").split()}
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

# ---- JSON writer and model behaviour (hugectr.md §2.9, §2.7, §2.8, §1.3) ---------------------------------------
BEHAVIOUR: dict[str, Span] = {
    "model_name": _s((3, 3)),                # CreateSolver(model_name=) and the top-level JSON key
    "auto_slice": _s((3, 3)),                # graph_analysis() inserts Slice layers for multi-use tensors
    "auto_slice_last_dim": _s((3, 4)),       # v3.3 sliced dimension [1]; later the last dimension (§2.7)
    "vocab_optimizer_states": _s((3, 5)),    # max_vocabulary_size_per_gpu divides by (1+k) (§2.8)
    "multi_label": _s((3, 5)),               # Input(label_dims=[...], label_names=[...])
    "concat_axis": _s((3, 6)),               # Concat writes "axis"
    "sparse_type_key": _s((3, 2), (24, 4)),  # sparse inputs carry "type": "DistributedSlot"
    "workspace_optional": _s((23, 6)),       # SparseEmbedding workspace_size_per_gpu_in_mb defaults to 0
    "summary_batch_shapes": _s((4, 0)),      # model.summary() prints (batch,...) instead of (None, ...)
    "summary_row_rules": _s((3, 3)),         # model.summary() separates rows with '-' rules
}

# ---- Continuous training: the embedding cache and the low-level loop (hugectr.md §1.8, §1.9) ----------------------
CONTINUOUS: dict[str, Span] = {
    "CreateMOS": _s((3, 1), (3, 3)),                   # model oversubscriber; Model(..., mos) (mos_params)
    "get_model_oversubscriber": _s((3, 1), (3, 3)),
    "CreateETC": _s((3, 3), (23, 12)),                 # embedding training cache; deprecated 23.09, removed 23.12
    "CreateHMemCache": _s((3, 3), (23, 12)),
    "TrainPSType_t": _s((3, 3), (23, 12)),             # Staged / Cached
    "get_embedding_training_cache": _s((3, 3), (23, 12)),
    "set_source_keyset": _s((3, 1), (23, 12)),         # Model.set_source(source, keyset, eval_source)
    "get_incremental_model": _s((3, 1), (23, 12)),
    "train_is_first_batch": _s((3, 3), (23, 6)),       # train(is_first_batch=True) / eval(is_first_batch=True)
}
# Either cache: what a spec's continuous_training section needs at all.
CONTINUOUS_ANY = Span(CONTINUOUS["CreateMOS"].since, CONTINUOUS["CreateETC"].until)

# ---- Layer_t members (hugectr.md §1.6) ------------------------------------------------------------------------
LAYERS: dict[str, Span] = {name: ALL for name in (
    "BatchNorm BinaryCrossEntropyLoss Reshape Concat CrossEntropyLoss Dropout ElementwiseMultiply ELU InnerProduct "
    "Interaction MultiCrossEntropyLoss ReLU ReLUHalf Sigmoid Slice WeightMultiply FmOrder2 Add ReduceSum Softmax "
    "Gather PReLU_Dice GRU MatrixMultiply Scale FusedReshapeConcat FusedReshapeConcatGeneral Sub ReduceMean "
    "MultiCross Cast").split()}
LAYERS.update({
    "FusedInnerProduct": _s((3, 2), (23, 12)),
    "DotProduct": _s((3, 2), (3, 5)),
    "LayerNorm": _s((3, 7)),
    "MultiHeadAttention": _s((3, 7)),
    "SequenceMask": _s((3, 9)),
    "MLP": _s((4, 2)),
    "Select": _s((23, 8)),
})

# Layers HugeCTR can build in mixed precision (LAYER_TYPE_TO_STRING_MP, hugectr.md §1.6).
MIXED_PRECISION_LAYERS = frozenset(
    "BatchNorm LayerNorm BinaryCrossEntropyLoss Cast Concat Dropout ELU InnerProduct Interaction ReLU Reshape Sigmoid "
    "Slice WeightMultiply MultiHeadAttention FmOrder2 Add ReduceSum Softmax ElementwiseMultiply FusedInnerProduct "
    "MultiCross MLP SequenceMask".split())
SINGLE_PRECISION_EXCLUDED = frozenset({"FusedInnerProduct"})

EMBEDDINGS: dict[str, Span] = {name: ALL for name in (
    "DistributedSlotSparseEmbeddingHash", "LocalizedSlotSparseEmbeddingHash", "LocalizedSlotSparseEmbeddingOneHot",
    "HybridSparseEmbedding")}

# ---- Optimizer_t (hugectr.md §1.7) ----------------------------------------------------------------------------
OPTIMIZERS: dict[str, Span] = {name: ALL for name in ("Adam", "AdaGrad", "MomentumSGD", "Nesterov", "SGD")}
OPTIMIZERS.update({"Ftrl": _s((4, 3)), "RMSProp": _s((4, 3))})

# Optimizer state copies per embedding weight (k in hugectr.md §2.8).
OPTIMIZER_STATES = {"Adam": 2, "AdaGrad": 1, "MomentumSGD": 1, "Nesterov": 1, "SGD": 0, "Ftrl": 2, "RMSProp": 1}

# ---- Keyword arguments by function (hugectr.md §1.1, §1.2, §1.6, §1.7) -------------------------------------------
ARGS: dict[str, dict[str, Span]] = {
    "CreateSolver": {
        **{a: ALL for a in ("seed", "lr_policy", "lr", "warmup_steps", "decay_start", "decay_steps", "decay_power",
                            "end_lr", "max_eval_batches", "batchsize_eval", "batchsize", "vvgpu", "repeat_dataset",
                            "use_mixed_precision", "enable_tf32_compute", "scaler", "metrics_spec", "i64_input_key",
                            "use_algorithm_search", "use_cuda_graph", "device_layout", "all_reduce_algo",
                            "grouped_all_reduce", "num_iterations_statistics")},
        "model_name": _s((3, 3)),
        "gen_loss_summary": _s((3, 3)),
        "kafka_brockers": _s((3, 3)),
        "is_dlrm": _s((3, 2), (3, 8)),
        "drop_incomplete_batch": _s((3, 8)),
        "perf_logging": _s((3, 8)),
        "training_callbacks": _s((23, 6)),
    },
    "CreateOptimizer": {
        **{a: ALL for a in ("optimizer_type", "update_type", "beta1", "beta2", "epsilon", "initial_accu_value",
                            "momentum_factor", "atomic_update")},
        "beta": _s((23, 4)), "lambda1": _s((23, 4)), "lambda2": _s((23, 4)),
    },
    "DataReaderParams": {
        **{a: ALL for a in ("data_reader_type", "source", "keyset", "eval_source", "check_type", "cache_eval_data",
                            "num_samples", "eval_num_samples", "float_label_dense", "num_workers",
                            "slot_size_array", "async_param")},
        "read_file_sequentially": _s((4, 0)),
        "data_source_params": _s((4, 1)),
    },
    "SparseEmbedding": {a: ALL for a in (
        "embedding_type", "workspace_size_per_gpu_in_mb", "embedding_vec_size", "combiner", "sparse_embedding_name",
        "bottom_name", "slot_size_array", "optimizer", "hybrid_embedding_param")},
}

# DenseLayer arguments with the HugeCTR default of each (hugectr.md §1.6); an argument equal to its default is not
# written into model.py.
DENSE_LAYER_DEFAULTS: dict[str, object] = {
    "factor": 1.0, "eps": 1e-5, "gamma_init_type": "Default", "beta_init_type": "Default", "dropout_rate": 0.5,
    "elu_alpha": 1.0, "num_output": 1, "weight_init_type": "Default", "bias_init_type": "Default", "num_layers": 0,
    "leading_dim": 1, "time_step": 0, "batchsize": 1, "SeqLength": 1, "vector_size": 1, "selected": False,
    "selected_slots": [], "ranges": [], "indices": [], "weight_dims": [], "projection_dim": 0, "out_dim": 0,
    "axis": 1, "max_sequence_len": 1, "num_attention_heads": 1, "transpose_b": False, "target_weight_vec": [],
    "use_regularizer": False, "regularizer_type": "L1", "lambda": 0.0, "pos_type": "Non", "act_type": "Relu",
    "num_outputs": [], "use_bias": True, "activations": [], "biases": [],
}
DENSE_LAYER_ARGS: dict[str, Span] = {a: ALL for a in DENSE_LAYER_DEFAULTS}
DENSE_LAYER_ARGS.update({
    "max_sequence_len": _s((3, 9), (23, 8)),
    "num_attention_heads": _s((4, 1)),
    "num_outputs": _s((4, 2)), "use_bias": _s((4, 2)), "activations": _s((4, 2)), "biases": _s((4, 2)),
    "projection_dim": _s((4, 3)), "transpose_b": _s((4, 3)),
})
ARGS["DenseLayer"] = DENSE_LAYER_ARGS
ARGS["Model.compile"] = {"loss_names": _s((3, 5)), "loss_weights": _s((3, 5))}  # hugectr.md §1.9
ARGS["Model.fit"] = {a: ALL for a in ("num_epochs", "max_iter", "display", "eval_interval", "snapshot",
                                      "snapshot_prefix")}
ARGS["Model.fit"]["data_source_params"] = _s((4, 1))

# Model methods a spec may call after training (training.then), with their keyword arguments (hugectr.md §1.9).
MODEL_METHODS: dict[str, dict[str, Span]] = {
    "export_predictions": {"output_prediction_file_name": ALL, "output_label_file_name": ALL},
    "save_params_to_files": {"prefix": ALL, "iter": ALL},
    "eval": {"eval_batch": _s((3, 2), (3, 3)), "is_first_batch": _s((3, 3), (23, 6))},
    "load_dense_weights": {"dense_model_file": ALL},
    "load_sparse_weights": {"sparse_embedding_files": ALL},
    "load_dense_optimizer_states": {"dense_opt_states_file": ALL},
    "load_sparse_optimizer_states": {"sparse_opt_states_files": ALL},
    "freeze_dense": {}, "freeze_embedding": {"embedding_name": _s((3, 3))},
    "unfreeze_dense": {}, "unfreeze_embedding": {"embedding_name": _s((3, 3))},
    "check_out_tensor": {"tensor_name": ALL, "tensor_type": ALL},
    "reset_learning_rate_scheduler": {a: ALL for a in ("base_lr", "warmup_steps", "decay_start", "decay_steps",
                                                       "decay_power", "end_lr")},
    "get_incremental_model": {},
    "get_eval_metrics": {}, "get_current_loss": {},
}
for _m, _args in MODEL_METHODS.items():
    ARGS[f"Model.{_m}"] = _args

# hugectr.tools.DataGeneratorParams (HugeCTR/include/pybind/data_generator_wrapper.hpp; num_threads from 3.4).
ARGS["tools.DataGeneratorParams"] = {a: ALL for a in (
    "format", "label_dim", "dense_dim", "num_slot", "i64_input_key", "source", "eval_source", "slot_size_array",
    "nnz_array", "check_type", "dist_type", "power_law_type", "alpha", "num_files", "eval_num_files",
    "num_samples_per_file", "num_samples", "eval_num_samples", "float_label_dense")}
ARGS["tools.DataGeneratorParams"]["num_threads"] = _s((3, 4))

# hugectr.inference (offline inference after training); InferenceModel from 3.4 up to (not incl.) 23.09 (the
# releases' inference_wrapper.hpp).
API: dict[str, Span] = {"inference.InferenceModel": _s((3, 4), (23, 9)),
                        "inference.CreateInferenceSession": _s((3, 2), (23, 9))}
ARGS["inference.InferenceParams"] = {a: ALL for a in (
    "model_name", "max_batchsize", "hit_rate_threshold", "dense_model_file", "sparse_model_files", "device_id",
    "use_gpu_embedding_cache", "cache_size_percentage", "i64_input_key", "use_mixed_precision", "scaler",
    "use_algorithm_search", "use_cuda_graph", "number_of_worker_buffers_in_pool", "number_of_refresh_buffers_in_pool",
    "cache_refresh_percentage_per_iteration", "deployed_devices", "default_value_for_each_table", "volatile_db",
    "persistent_db", "update_source", "maxnum_des_feature_per_sample", "refresh_delay", "refresh_interval",
    "maxnum_catfeature_query_per_table_per_sample", "embedding_vecsize_per_table", "embedding_table_names",
    "network_file", "label_dim", "slot_num", "non_trainable_params_file", "use_static_table",
    "embedding_cache_type", "use_context_stream", "fuse_embedding_table", "thread_pool_size")}
ARGS["inference.InferenceModel.predict"] = {a: ALL for a in (
    "num_batches", "source", "data_reader_type", "check_type", "slot_size_array", "data_source_params",
    "reading_file_sequentially")}
ARGS["inference.CreateInferenceSession.predict"] = {a: ALL for a in (
    "num_batches", "source", "data_reader_type", "check_type", "slot_size_array")}
ARGS["inference.CreateInferenceSession.predict"].update({"num_samples": _s((3, 9)), "data_source_params": _s((4, 1))})

# HugeCTR enum types (values of these are written hugectr.<Type>.<Member>).
ENUM_TYPE_NAMES = frozenset({
    "Layer_t", "Embedding_t", "Optimizer_t", "Update_t", "DataReaderType_t", "Check_t", "Initializer_t",
    "Regularizer_t", "MetricsType", "Alignment_t", "TrainPSType_t", "LrPolicy_t", "AllReduceAlgo", "FcPosition_t",
    "Activation_t", "SourceType_t", "DataSourceType_t", "EmbeddingLayout_t", "CommunicationType", "DeviceMap",
    "Distribution_t", "PowerLaw_t", "Tensor_t", "GroupLayer_t", "HybridEmbeddingType", "DeviceLayout",
    "CommunicationDirection", "EvictionPolicy_t", "DataSourceType_t", "EmbeddingLayout_t", "TableType_t",
})


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
        span = ARGS[func].get(arg)
        return span is not None and span.covers(self.release)

    def missing(self, table: dict[str, Span], key: str, what: str) -> str | None:
        """None if the release has ``key``; else a message naming the releases that do."""
        span = table.get(key)
        if span is None:
            return f"{what} {key!r} does not exist in any HugeCTR release"
        if span.covers(self.release):
            return None
        return f"{what} {key!r} is not in HugeCTR {self.name}; it exists in {span.describe()}"


    def missing_arg(self, func: str, arg: str) -> str | None:
        """None if ``func`` takes keyword ``arg`` in this release; else why not (with the releases that do)."""
        table = ARGS.get(func)
        if table is None:
            return f"ctrgen cannot pass further arguments to {func}"
        return self.missing(table, arg, f"{func} argument")


def profile(version: str) -> Profile | None:
    rel = SUPPORTED.get(version)
    return Profile(version, rel) if rel else None


def max_vocabulary_size_per_gpu(p: Profile, workspace_mb: int, vec: int, optimizer: str, update_type: str) -> int:
    """hugectr.md §2.8: integer arithmetic, as Model::add(SparseEmbedding&) does it."""
    if not p.has("vocab_optimizer_states"):
        return workspace_mb * 1024 * 1024 // (4 * vec)
    k = OPTIMIZER_STATES[optimizer] + (1 if optimizer == "Adam" and update_type == "LazyGlobal" else 0)
    return workspace_mb * 1024 * 1024 // ((1 + k) * 4 * vec)
