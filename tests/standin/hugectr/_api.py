"""Factories and parameter objects of the HugeCTR Python API: CreateSolver, CreateOptimizer, DataReaderParams,
Input, DataReaderSparseParam, SparseEmbedding, DenseLayer, AsyncParam, HybridEmbeddingParam, CreateMOS/CreateETC.

Signatures per release follow docs/hugectr.md §1.1-§1.8; checks raise RuntimeError with HugeCTR's text.
"""

from __future__ import annotations

from ._enums import (Activation_t, AllReduceAlgo, Alignment_t, CommunicationType, DeviceLayout, FcPosition_t,
                     HybridEmbeddingType, Initializer_t, LrPolicy_t, MetricsType, Optimizer_t, Regularizer_t,
                     Update_t)
from ._record import next_id, record
from ._release import NAME, RELEASE, Span
from ._sig import P, _convert, _kind_ok, bind

V32, V33 = (3, 2), (3, 3)


def _s(since, until=(99, 0)) -> Span:
    return Span(since, until)


class HugeCTRError(RuntimeError):
    """What HugeCTR's checks raise (a RuntimeError in Python)."""


class _Obj:
    """A parameter object: attributes are the bound arguments."""

    _kind = "Obj"

    def __init__(self, bound: dict):
        self.__dict__.update(bound)
        self._id = next_id(self._kind)

    def _standin_repr(self) -> str:
        return self._id


def _call(qualname: str, params, args, kwargs) -> dict:
    record(qualname, args, kwargs)
    return bind(qualname, params, args, kwargs)


# ---- CreateSolver (§1.1) -----------------------------------------------------------------------------------------
SOLVER = [
    P("model_name", "", "str", _s(V33)),
    P("seed", 0, "int"), P("lr_policy", LrPolicy_t.fixed, "LrPolicy_t"), P("lr", 0.001, "float"),
    P("warmup_steps", 1, "int"), P("decay_start", 0, "int"), P("decay_steps", 1, "int"),
    P("decay_power", 2.0, "float"), P("end_lr", 0.0, "float"), P("max_eval_batches", 100, "int"),
    P("batchsize_eval", 2048, "int"), P("batchsize", 2048, "int"), P("vvgpu", lambda: [[0]], "list"),
    P("repeat_dataset", True, "bool"), P("use_mixed_precision", False, "bool"),
    P("enable_tf32_compute", False, "bool"), P("scaler", 1.0, "float"),
    P("metrics_spec", lambda: {MetricsType.AUC: 1.0}, "any"), P("i64_input_key", False, "bool"),
    P("use_algorithm_search", True, "bool"), P("use_cuda_graph", True, "bool"),
    P("async_mlp_wgrad", False, "bool", _s(V33, (23, 6))),
    P("gen_loss_summary", True, "bool", _s(V33)),
    P("overlap_lr", False, "bool", _s(V33, (4, 0))), P("overlap_init_wgrad", False, "bool", _s(V33, (4, 0))),
    P("overlap_ar_a2a", False, "bool", _s(V33, (4, 0))),
    P("eval_overlap", False, "bool", _s((3, 7), (4, 0))),
    P("data_source_params", None, "any", _s((3, 5), (4, 1))),
    P("train_intra_iteration_overlap", False, "bool", _s((4, 0))),
    P("train_inter_iteration_overlap", False, "bool", _s((4, 0))),
    P("eval_intra_iteration_overlap", False, "bool", _s((4, 0))),
    P("eval_inter_iteration_overlap", False, "bool", _s((4, 0))),
    P("device_layout", DeviceLayout.LocalFirst, "DeviceLayout"),
    P("use_holistic_cuda_graph", False, "bool", _s(V32, (4, 0))),
    P("use_overlapped_pipeline", False, "bool", _s(V32, (4, 0))),
    P("use_embedding_collection", False, "bool", _s((3, 7))),
    P("all_reduce_algo", AllReduceAlgo.NCCL, "AllReduceAlgo"), P("grouped_all_reduce", False, "bool"),
    P("num_iterations_statistics", 20, "int"), P("is_dlrm", False, "bool", _s(V32, (3, 8))),
    P("perf_logging", False, "bool", _s((3, 8))), P("drop_incomplete_batch", True, "bool", _s((3, 8))),
    P("kafka_brockers", "", "str", _s(V33)),
    P("training_callbacks", lambda: [], "list", _s((23, 6))),
]


class Solver(_Obj):
    _kind = "Solver"

    @property
    def gpu_count(self) -> int:
        return sum(len(node) for node in self.vvgpu)


def CreateSolver(*args, **kwargs) -> Solver:
    b = _call("hugectr.CreateSolver", SOLVER, args, kwargs)
    if not all(isinstance(n, (list, tuple)) and all(isinstance(g, int) for g in n) for n in b["vvgpu"]) \
            or not b["vvgpu"]:
        raise TypeError(f"hugectr.CreateSolver(): vvgpu must be a list of lists of GPU ids, got {b['vvgpu']!r}")
    if b["use_mixed_precision"] and b["enable_tf32_compute"]:
        raise HugeCTRError("use_mixed_precision and enable_tf32_compute cannot be true at the same time")
    # pybind/solver_wrapper.hpp checks the scaler from v3.2 up to v4.3.1; v23.02.00 comments the check out.
    if RELEASE < (23, 2) and b["use_mixed_precision"] and b["scaler"] not in (128, 256, 512, 1024):
        raise HugeCTRError("Scaler of mixed precision training should be either 128/256/512/1024")
    if RELEASE == V33:
        for flag in ("use_holistic_cuda_graph", "use_overlapped_pipeline", "grouped_all_reduce"):
            if b[flag] and not b["is_dlrm"]:
                raise HugeCTRError(f"{flag} can only be used with is_dlrm=True (HugeCTR 3.3)")
        for flag in ("use_holistic_cuda_graph", "async_mlp_wgrad"):
            if b[flag] and b["use_cuda_graph"]:
                raise HugeCTRError(f"{flag} needs use_cuda_graph=False (HugeCTR 3.3)")
    return Solver(b)


# ---- CreateOptimizer (§1.7) --------------------------------------------------------------------------------------
OPTIMIZER = [
    P("optimizer_type", Optimizer_t.Adam, "Optimizer_t"), P("update_type", Update_t.Global, "Update_t"),
    P("beta", 0.0, "float", _s((23, 4))), P("lambda1", 0.0, "float", _s((23, 4))),
    P("lambda2", 0.0, "float", _s((23, 4))),
    P("beta1", 0.9, "float"), P("beta2", 0.999, "float"), P("epsilon", 1e-7, "float"),
    P("initial_accu_value", 0.0, "float"), P("momentum_factor", 0.0, "float"), P("atomic_update", True, "bool"),
]


class OptParams(_Obj):
    _kind = "OptParams"


def CreateOptimizer(*args, **kwargs) -> OptParams:
    return OptParams(_call("hugectr.CreateOptimizer", OPTIMIZER, args, kwargs))


# ---- AsyncParam, DataSourceParams, HybridEmbeddingParam ----------------------------------------------------------
ASYNC = [P("num_threads", kind="int"), P("num_batches_per_thread", kind="int"),
         P("io_block_size", kind="int", span=_s(V32, (3, 4))),
         P("max_num_requests_per_thread", kind="int", span=_s((3, 4))),
         P("io_depth", kind="int"), P("io_alignment", kind="int"), P("shuffle", kind="bool"),
         P("aligned_type", Alignment_t.Non, "Alignment_t"),
         P("multi_hot_reader", True, "bool", _s((3, 4))), P("is_dense_float", True, "bool", _s((3, 4)))]


class AsyncParam(_Obj):
    _kind = "AsyncParam"

    def __init__(self, *args, **kwargs):
        super().__init__(_call("hugectr.AsyncParam", ASYNC, args, kwargs))


class DataSourceParams(_Obj):
    _kind = "DataSourceParams"

    def __init__(self, *args, **kwargs):
        record("hugectr.DataSourceParams", args, kwargs)
        super().__init__({"args": args, "kwargs": kwargs})


HYBRID = [P("max_num_frequent_categories", 1, "int"), P("max_num_infrequent_samples", -1, "int"),
          P("p_dup_max", 0.01, "float"), P("max_all_reduce_bandwidth", 1.3e11, "float"),
          P("max_all_to_all_bandwidth", 2.6e11, "float"), P("efficiency_bandwidth_ratio", 1.0, "float"),
          P("communication_type", CommunicationType.NVLink_SingleNode, "CommunicationType"),
          P("hybrid_embedding_type", HybridEmbeddingType.Distributed, "HybridEmbeddingType")]


class HybridEmbeddingParam(_Obj):
    _kind = "HybridEmbeddingParam"

    def __init__(self, *args, **kwargs):
        super().__init__(_call("hugectr.HybridEmbeddingParam", HYBRID, args, kwargs))


# ---- DataReaderParams (§1.2) -------------------------------------------------------------------------------------
def _reader_params(list_form: bool) -> list[P]:
    src = "list[str]" if list_form else "str"
    return [
        P("data_reader_type", kind="DataReaderType_t"), P("source", kind=src),
        P("keyset", (lambda: []) if list_form else "", src), P("eval_source", kind="str"),
        P("check_type", kind="Check_t"), P("cache_eval_data", 0, "int"), P("num_samples", 0, "int"),
        P("eval_num_samples", 0, "int"), P("float_label_dense", False, "bool"),
        P("read_file_sequentially", False, "bool", _s((4, 0))), P("num_workers", 12, "int"),
        P("slot_size_array", lambda: [], "list[int]"),
        P("data_source_params", None, "obj:DataSourceParams", _s((4, 0))),
        P("async_param", None, "obj:AsyncParam"),
    ]


class DataReaderParams(_Obj):
    _kind = "DataReaderParams"

    def __init__(self, *args, **kwargs):
        record("hugectr.DataReaderParams", args, kwargs)
        b = _overload("hugectr.DataReaderParams", [_reader_params(True), _reader_params(False)], args, kwargs)
        if isinstance(b["source"], str):
            b["source"] = [b["source"]] if b["source"] else []
        if isinstance(b["keyset"], str):
            b["keyset"] = [b["keyset"]] if b["keyset"] else []
        super().__init__(b)


def _overload(qualname: str, signatures: list[list[P]], args, kwargs) -> dict:
    """pybind11 overload resolution: the first signature that binds; otherwise every overload's complaint."""
    errors = []
    for params in signatures:
        try:
            return bind(qualname, params, args, kwargs)
        except TypeError as e:
            errors.append(str(e))
    if len(set(errors)) == 1:
        raise TypeError(errors[0])
    raise TypeError(f"{qualname}(): incompatible arguments for every overload in HugeCTR {NAME}:\n  "
                    + "\n  ".join(errors))


# ---- Input, DataReaderSparseParam (§1.3, §1.4) -------------------------------------------------------------------
SPARSE_PARAM = [P("top_name", kind="str"), P("nnz_per_slot", kind="any"), P("is_fixed_length", kind="bool"),
                P("slot_num", kind="int")]


class DataReaderSparseParam(_Obj):
    _kind = "DataReaderSparseParam"

    def __init__(self, *args, **kwargs):
        b = _call("hugectr.DataReaderSparseParam", SPARSE_PARAM, args, kwargs)
        nnz = b["nnz_per_slot"]  # two overloads: int or List[int]
        if _kind_ok("int", nnz):
            nnz = _convert("int", nnz)
        elif _kind_ok("list[int]", nnz):
            nnz = _convert("list[int]", nnz)
        else:
            raise TypeError("hugectr.DataReaderSparseParam(): nnz_per_slot must be an int or a list of ints, "
                            f"got {nnz!r}")
        if b["slot_num"] <= 0:
            raise HugeCTRError("Illegal value for slot_num!")
        if isinstance(nnz, int):
            b["nnz_per_slot"] = [nnz] * b["slot_num"]
        elif len(nnz) != b["slot_num"]:
            raise HugeCTRError("slot num != nnz_per_slot.size().")
        else:
            b["nnz_per_slot"] = list(nnz)
        super().__init__(b)


SPARSE_ARRAY = P("data_reader_sparse_param_array", kind="obj:DataReaderSparseParam")
INPUT_SIGS = [
    [P("label_dim", kind="int"), P("label_name", kind="str"), P("dense_dim", kind="int"),
     P("dense_name", kind="str"), P("data_reader_sparse_param_array", kind="list")],
    [P("label_dims", kind="list[int]", span=_s((3, 5))), P("label_names", kind="list[str]", span=_s((3, 5))),
     P("dense_dim", kind="int"), P("dense_name", kind="str"), P("data_reader_sparse_param_array", kind="list")],
    [P("label_dims", kind="list[int]", span=_s((3, 5))), P("label_names", kind="list[str]", span=_s((3, 5))),
     P("label_weights", kind="list[float]", span=_s((3, 5))),
     P("dense_dim", kind="int"), P("dense_name", kind="str"), P("data_reader_sparse_param_array", kind="list")],
]


class Input(_Obj):
    _kind = "Input"

    def __init__(self, *args, **kwargs):
        record("hugectr.Input", args, kwargs)
        sigs = INPUT_SIGS if RELEASE >= (3, 5) else INPUT_SIGS[:1]
        b = _overload("hugectr.Input", sigs, args, kwargs)
        for sp in b["data_reader_sparse_param_array"]:
            if not isinstance(sp, DataReaderSparseParam):
                raise TypeError("hugectr.Input(): data_reader_sparse_param_array must hold "
                                f"hugectr.DataReaderSparseParam objects, got {sp!r}")
        if "label_dim" in b:
            labels = {b["label_name"]: b["label_dim"]}
        else:
            if len(b["label_dims"]) != len(b["label_names"]):
                raise HugeCTRError("Number of label names does not match number of label dimensions.")
            labels = dict(zip(b["label_names"], b["label_dims"]))
        if any(d < 1 for d in labels.values()):
            raise HugeCTRError("Each label dimension must be at lesat 1.")
        b["labels"] = dict(sorted(labels.items()))  # a std::map: alphabetical (§1.3)
        super().__init__(b)


# ---- SparseEmbedding (§1.5) --------------------------------------------------------------------------------------
EMBEDDING = [
    P("embedding_type", kind="Embedding_t"),
    P("workspace_size_per_gpu_in_mb", kind="int", span=_s(V32, (23, 6))),
    P("workspace_size_per_gpu_in_mb", 0, "int", _s((23, 6))),
    P("embedding_vec_size", kind="int"), P("combiner", kind="str"), P("sparse_embedding_name", kind="str"),
    P("bottom_name", kind="str"), P("slot_size_array", lambda: [], "list[int]"),
    P("optimizer", None, "obj:OptParams"), P("hybrid_embedding_param", None, "obj:HybridEmbeddingParam"),
]


class SparseEmbedding(_Obj):
    _kind = "SparseEmbedding"

    def __init__(self, *args, **kwargs):
        b = _call("hugectr.SparseEmbedding", EMBEDDING, args, kwargs)
        if b["combiner"] not in ("sum", "mean"):
            raise HugeCTRError(f"No such combiner type: {b['combiner']}")
        super().__init__(b)


# ---- DenseLayer (§1.6) -------------------------------------------------------------------------------------------
D = Initializer_t.Default
DENSE = [
    P("layer_type", kind="Layer_t"), P("bottom_names", kind="list[str]"), P("top_names", kind="list[str]"),
    P("factor", 1.0, "float"), P("eps", 1e-5, "float"), P("gamma_init_type", D, "Initializer_t"),
    P("beta_init_type", D, "Initializer_t"), P("dropout_rate", 0.5, "float"), P("elu_alpha", 1.0, "float"),
    P("num_output", 1, "int"), P("weight_init_type", D, "Initializer_t"), P("bias_init_type", D, "Initializer_t"),
    P("num_layers", 0, "int"), P("leading_dim", 1, "int"), P("time_step", 0, "int"), P("batchsize", 1, "int"),
    P("SeqLength", 1, "int"), P("vector_size", 1, "int"), P("selected", False, "bool"),
    P("selected_slots", lambda: [], "list[int]"), P("ranges", lambda: [], "list"),
    P("indices", lambda: [], "list[int]"), P("weight_dims", lambda: [], "list[int]"),
    P("projection_dim", 0, "int", _s((4, 3))), P("out_dim", 0, "int"), P("axis", 1, "int"),
    P("max_sequence_len", 1, "int", _s((3, 9), (23, 8))),
    P("num_attention_heads", 1, "int", _s((4, 1))), P("transpose_b", False, "bool", _s((4, 3))),
    P("target_weight_vec", lambda: [], "list[float]"), P("use_regularizer", False, "bool"),
    P("regularizer_type", Regularizer_t.L1, "Regularizer_t"), P("lambda", 0.0, "float"),
    P("pos_type", FcPosition_t.Non, "FcPosition_t"), P("act_type", Activation_t.Relu, "Activation_t"),
    P("num_outputs", lambda: [], "list[int]", _s((4, 2))), P("use_bias", True, "bool", _s((4, 2))),
    P("activations", lambda: [], "list", _s((4, 2))), P("biases", lambda: [], "list", _s((4, 2))),
    P("dense_layer_switches", None, "any", _s((3, 7), (23, 6))),
    P("compute_config", None, "obj:DenseLayerComputeConfig", _s((23, 4))),
]
COMPUTE_CONFIG_SPAN = _s((23, 4))


class DenseLayerComputeConfig(_Obj):
    """hugectr.DenseLayerComputeConfig (23.04+, src/pybind/model.cpp): per-layer compute options of a DenseLayer."""
    _kind = "DenseLayerComputeConfig"

    def __init__(self, *args, **kwargs):
        super().__init__(_call("hugectr.DenseLayerComputeConfig",
                               [P("async_wgrad", False, "bool"), P("fuse_wb", False, "bool")], args, kwargs))


class DenseLayer(_Obj):
    _kind = "DenseLayer"

    def __init__(self, *args, **kwargs):
        b = _call("hugectr.DenseLayer", DENSE, args, kwargs)
        for r in b["ranges"]:
            if not (isinstance(r, (list, tuple)) and len(r) == 2 and all(isinstance(x, int) for x in r)):
                raise TypeError(f"hugectr.DenseLayer(): ranges must be a list of (start, end) int pairs, got {r!r}")
        b["ranges"] = [tuple(r) for r in b["ranges"]]
        b["bottom_names"], b["top_names"] = list(b["bottom_names"]), list(b["top_names"])
        super().__init__(b)

    @property
    def type(self) -> str:
        return self.layer_type.name


# ---- Model oversubscriber (v3.2) / embedding training cache (v3.3+) (§1.8) ---------------------------------------
MOS = [P("train_from_scratch", kind="bool"), P("use_host_memory_ps", True, "bool"),
       P("trained_sparse_models", lambda: [], "list[str]"), P("dest_sparse_models", lambda: [], "list[str]")]
ETC = [P("ps_types", kind="list[TrainPSType_t]"), P("sparse_models", lambda: [], "list[str]"),
       P("local_paths", lambda: [], "list[str]"), P("hmem_cache_configs", lambda: [], "list[obj:HMemCacheConfig]")]
HMEM = [P("num_blocks", kind="int"), P("target_hit_rate", kind="float"), P("max_num_evict", kind="int")]
ETC_SPAN = _s(V33, (23, 12))
MOS_SPAN = _s(V32, V33)


class ModelOversubscriberParams(_Obj):
    _kind = "ModelOversubscriberParams"


class EmbeddingTrainingCacheParams(_Obj):
    _kind = "EmbeddingTrainingCacheParams"


class HMemCacheConfig(_Obj):
    _kind = "HMemCacheConfig"


def CreateMOS(*args, **kwargs):
    return ModelOversubscriberParams(_call("hugectr.CreateMOS", MOS, args, kwargs))


def CreateETC(*args, **kwargs):
    bound = _call("hugectr.CreateETC", ETC, args, kwargs)
    # CreateETC's hcache_configs rule (embedding_training_cache_wrapper.hpp of 3.3-23.09): one config for every
    # cached table, one per cached table, or one per table when every table is cached.
    types, configs = list(bound.get("ps_types") or []), list(bound.get("hmem_cache_configs") or [])
    cached = sum(1 for t in types if getattr(t, "name", str(t)).endswith("Cached"))
    if cached and len(configs) != 1 and len(configs) != cached:
        raise HugeCTRError("Wrong hcache_configs:\n  If hcache_configs.size() == 1, all Cached PS will use the same "
                           "HMemCacheConfig\n  Otherwise, hcache_configs.size() should be equal to the num of Cached PS")
    return EmbeddingTrainingCacheParams(bound)


def CreateHMemCache(*args, **kwargs):
    return HMemCacheConfig(_call("hugectr.CreateHMemCache", HMEM, args, kwargs))

