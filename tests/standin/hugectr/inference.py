"""hugectr.inference: InferenceParams, CreateInferenceSession, InferenceSession.evaluate/predict.

docs/hugectr.md gives no signatures here, so they come from upstream bindings (NVIDIA-Merlin/HugeCTR
inference_wrapper.hpp): for 3.2/3.3 the 3.x binding (seed 004's trainer); for 4.3/23.06 a 2023 binding of the
newer line, whose required arguments are the same nine and whose optional arguments are accepted as listed there
(a few of them, e.g. fp8_quant, may postdate the release: that part is lenient). Nothing is computed: evaluate()
returns 0.0 and predict() zeros, after checking that the graph JSON, the model files and (unless
CTRGEN_STANDIN_SKIP_DATA=1) the data exist.
"""

from __future__ import annotations

from . import _files
from ._api import HugeCTRError, _Obj, _overload
from ._record import record
from ._enums import Enum
from ._release import Span
from ._sig import P, bind

_NEW = (4, 0)  # the 2023 binding's line (4.x and 23.x)
PARAMS = [P("model_name", kind="str"), P("max_batchsize", kind="int"), P("hit_rate_threshold", kind="float"),
          P("dense_model_file", kind="str"), P("sparse_model_files", kind="list[str]"),
          P("device_id", kind="int", span=Span((3, 2), _NEW)), P("device_id", 0, "int", Span(_NEW)),
          P("use_gpu_embedding_cache", kind="bool"), P("cache_size_percentage", kind="float"),
          P("i64_input_key", kind="bool"), P("use_mixed_precision", False, "bool"), P("scaler", 1.0, "float"),
          P("use_algorithm_search", True, "bool"), P("use_cuda_graph", True, "bool")]
PARAMS += [P(name, default, kind, Span(_NEW)) for name, default, kind in [
    ("number_of_worker_buffers_in_pool", 2, "int"), ("number_of_refresh_buffers_in_pool", 1, "int"),
    ("thread_pool_size", 16, "int"), ("cache_refresh_percentage_per_iteration", 0.0, "float"),
    ("deployed_devices", lambda: [0], "list[int]"), ("default_value_for_each_table", lambda: [0.0], "list[float]"),
    ("volatile_db", None, "any"), ("persistent_db", None, "any"), ("update_source", None, "any"),
    ("maxnum_des_feature_per_sample", 26, "int"), ("refresh_delay", 0.0, "float"), ("refresh_interval", 0.0, "float"),
    ("maxnum_catfeature_query_per_table_per_sample", lambda: [26], "list[int]"),
    ("embedding_vecsize_per_table", lambda: [128], "list[int]"), ("embedding_table_names", lambda: [""], "list[str]"),
    ("network_file", "", "str"), ("label_dim", 1, "int"), ("slot_num", 10, "int"),
    ("non_trainable_params_file", "", "str"), ("use_static_table", False, "bool"),
    ("embedding_cache_type", None, "any"), ("use_context_stream", True, "bool"), ("fuse_embedding_table", False, "bool"),
    ("use_hctr_cache_implementation", True, "bool"), ("init_ec", True, "bool"), ("enable_pagelock", False, "bool"),
    ("fp8_quant", False, "bool")]]
EmbeddingCacheType_t = Enum("EmbeddingCacheType_t", {n: Span(_NEW) for n in ("Dynamic", "UVM", "Static",
                                                                              "Stochastic")})


class InferenceParams(_Obj):
    _kind = "InferenceParams"

    def __init__(self, *args, **kwargs):
        record("hugectr.inference.InferenceParams", args, kwargs)
        super().__init__(bind("hugectr.inference.InferenceParams", PARAMS, args, kwargs))


class InferenceSession(_Obj):
    _kind = "InferenceSession"

    def __init__(self, model_config_path: str, params: InferenceParams):
        super().__init__({})
        self._params = params

    def evaluate(self, *args, **kwargs) -> float:
        record("InferenceSession.evaluate", args, kwargs)
        b = bind("InferenceSession.evaluate", _READ, args, kwargs)
        _files.check_source(b["source"], b["data_reader_type"].name, "InferenceSession.evaluate")
        return 0.0

    def predict(self, *args, **kwargs) -> list:
        record("InferenceSession.predict", args, kwargs)
        b = _overload("InferenceSession.predict", [_READ, [P("dense_feature", kind="list[float]"),
                                                           P("embeddingcolumns", kind="list[int]"),
                                                           P("row_ptrs", kind="list[int]")]], args, kwargs)
        if "source" in b:
            _files.check_source(b["source"], b["data_reader_type"].name, "InferenceSession.predict")
            return [0.0] * (self._params.max_batchsize * b["num_batches"])
        return [0.0] * max(len(b["row_ptrs"]) - 1, 0)


_READ = [P("num_batches", kind="int"), P("source", kind="str"), P("data_reader_type", kind="DataReaderType_t"),
         P("check_type", kind="Check_t"), P("slot_size_array", lambda: [], "list[int]"),
         P("num_samples", 0, "int", Span(_NEW)), P("data_source_params", None, "any", Span(_NEW))]


def CreateInferenceSession(*args, **kwargs) -> InferenceSession:
    record("hugectr.inference.CreateInferenceSession", args, kwargs)
    b = bind("hugectr.inference.CreateInferenceSession", [P("model_config_path", kind="str"),
                                                          P("inference_params", kind="obj:InferenceParams")],
             args, kwargs)
    p = b["inference_params"]
    for path, what in [(b["model_config_path"], "graph JSON"), (p.dense_model_file, "dense model"),
                       *[(f, "sparse model") for f in p.sparse_model_files]]:
        if not _files.resolve(path).exists():
            raise HugeCTRError(f"CreateInferenceSession: {what} {path!r} does not exist")
    return InferenceSession(b["model_config_path"], p)
