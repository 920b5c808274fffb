"""hugectr.inference of HugeCTR 3.2/3.3: InferenceParams, CreateInferenceSession, InferenceSession.evaluate/predict.

Signatures from the 3.x binding (upstream NVIDIA-Merlin/HugeCTR HugeCTR/pybind/inference_wrapper.hpp, the release
line of seed 004's trainer); the shared reference gives none for later releases, so importing this module at 4.3 or
23.06 fails instead of guessing. Nothing is computed: evaluate() returns 0.0 and predict() zeros, after checking
that the graph JSON, the model files and (unless CTRGEN_STANDIN_SKIP_DATA=1) the data exist.
"""

from __future__ import annotations

from . import _files
from ._api import HugeCTRError, _Obj, _overload
from ._record import record
from ._release import NAME, RELEASE
from ._sig import P, bind

if RELEASE >= (3, 4):
    raise ImportError(f"hugectr stand-in: hugectr.inference is modelled for HugeCTR 3.2/3.3 only (the shared "
                      f"reference gives no InferenceParams signature for {NAME})")

PARAMS = [P("model_name", kind="str"), P("max_batchsize", kind="int"), P("hit_rate_threshold", kind="float"),
          P("dense_model_file", kind="str"), P("sparse_model_files", kind="list[str]"), P("device_id", kind="int"),
          P("use_gpu_embedding_cache", kind="bool"), P("cache_size_percentage", kind="float"),
          P("i64_input_key", kind="bool"), P("use_mixed_precision", False, "bool"), P("scaler", 1.0, "float"),
          P("use_algorithm_search", True, "bool"), P("use_cuda_graph", True, "bool")]


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
         P("check_type", kind="Check_t"), P("slot_size_array", lambda: [], "list[int]")]


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
