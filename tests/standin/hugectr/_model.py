"""hugectr.Model: builds the graph with HugeCTR's add() checks, runs graph_analysis (auto Slices), writes the graph
JSON and the summary, and validates the training calls without training (docs/hugectr.md §1.8, §1.9,
§2, §4)."""

from __future__ import annotations

import json
import os
from collections import Counter

from . import _files
from ._api import (ETC_SPAN, MOS_SPAN, CreateOptimizer, DataReaderParams, DataReaderSparseParam, DenseLayer,
                   EmbeddingTrainingCacheParams, HugeCTRError, Input, ModelOversubscriberParams, OptParams, Solver, SparseEmbedding, _Obj, _overload)
from ._enums import (Activation_t, Embedding_t, FcPosition_t, Initializer_t, Layer_t, Optimizer_t, Regularizer_t,
                     Update_t)
from ._collection import SPAN as EBC_SPAN, EmbeddingCollectionConfig
from ._record import quiet, record
from ._release import NAME, RELEASE, Span, at_least
from ._shapes import LOSSES, Tensor, infer
from ._sig import P, bind
from . import _writer as W
from . import _params

MP_LAYERS = frozenset(
    "BatchNorm LayerNorm BinaryCrossEntropyLoss Cast Concat Dropout ELU InnerProduct Interaction ReLU Reshape Sigmoid "
    "Slice WeightMultiply MultiHeadAttention FmOrder2 Add ReduceSum Softmax ElementwiseMultiply FusedInnerProduct "
    "MultiCross MLP SequenceMask".split())
BATCHES_ENV = "CTRGEN_STANDIN_BATCHES"  # batches each data source yields to train()/eval() (default 3)


def _batches() -> int:
    return int(os.environ.get(BATCHES_ENV, "3"))


class DataReader(_Obj):
    """What get_data_reader_train()/get_data_reader_eval() return: set_source(file_name=""), is_eof()."""

    _kind = "DataReader"

    def __init__(self, model: "Model", role: str, source: str):
        super().__init__({})
        self._model, self._role, self._source = model, role, source
        self._left, self._checked, self._started = _batches(), False, False

    def set_source(self, *args, **kwargs):
        record("DataReader.set_source", args, kwargs)
        b = bind("DataReader.set_source", [P("file_name", "", "str")], args, kwargs)
        if b["file_name"]:
            self._source = b["file_name"]
        self._left, self._checked, self._started = _batches(), False, True

    def is_eof(self, *args, **kwargs) -> bool:
        record("DataReader.is_eof", args, kwargs)
        bind("DataReader.is_eof", [], args, kwargs)
        return self._left <= 0

    def read_a_batch_to_device(self, *args, **kwargs) -> int:
        """One batch onto the GPUs (HugeCTR's data-reader tests call this without compile); returns its size."""
        record("DataReader.read_a_batch_to_device", args, kwargs)
        bind("DataReader.read_a_batch_to_device", [], args, kwargs)
        if self._model._input is None:
            raise HugeCTRError("hugectr stand-in: the data reader is created by Model.add(Input); "
                               "read_a_batch_to_device before it")
        self._started = True
        if not self._next_batch():
            if not self._model._solver.repeat_dataset:
                return 0
            self._left = _batches()     # repeat_dataset: the file list starts over
            self._next_batch()
        return self._model._solver.batchsize

    def _next_batch(self) -> bool:
        if not self._started:
            what = "train" if self._role == "train" else "eval"
            raise HugeCTRError(f"Start the data reader first before calling Model::{what}()")
        if not self._checked:
            _files.check_source(self._source, self._model._reader.data_reader_type.name,
                                f"{self._role} data reader")
            self._checked = True
        if self._left <= 0:
            return False
        self._left -= 1
        return True


class LearningRateScheduler(_Obj):
    _kind = "LearningRateScheduler"

    def __init__(self, lr: float):
        super().__init__({})
        self._lr = lr

    def get_next(self, *args, **kwargs) -> float:
        record("LearningRateScheduler.get_next", args, kwargs)
        bind("LearningRateScheduler.get_next", [], args, kwargs)
        return float(self._lr)


class _Cache(_Obj):
    """The model oversubscriber (3.2) or embedding training cache (3.3+): update(keyset_file | [keyset_files])."""

    def __init__(self, kind: str):
        super().__init__({})
        self._kind_name = kind

    def update(self, *args, **kwargs) -> None:
        record(f"{self._kind_name}.update", args, kwargs)
        b = _overload(f"{self._kind_name}.update", [[P("keyset_file", kind="str")],
                                                     [P("keyset_file_list", kind="list[str]")]], args, kwargs)
        for f in b.get("keyset_file_list") or [b.get("keyset_file")]:
            _files.check_keyset(f, f"{self._kind_name}.update")


def _cache_name() -> str:
    return "ModelOversubscriber" if RELEASE < (3, 3) else "EmbeddingTrainingCache"


class Model(_Obj):
    _kind = "Model"

    def __init__(self, *args, **kwargs):
        record("hugectr.Model", args, kwargs)
        cache_arg = "mos_params" if RELEASE < (3, 3) else "etc_params"
        b = bind("hugectr.Model", [P("solver", kind="obj:Solver"), P("reader_params", kind="obj:DataReaderParams"),
                                   P("opt_params", kind="obj:OptParams"),
                                   P("mos_params", None, "obj:ModelOversubscriberParams", MOS_SPAN),
                                   P("etc_params", None, "obj:EmbeddingTrainingCacheParams", ETC_SPAN)],
                 args, kwargs)
        b.setdefault(cache_arg, None)
        super().__init__({})
        self._solver: Solver = b["solver"]
        self._reader: DataReaderParams = b["reader_params"]
        self._opt: OptParams = b["opt_params"]
        self._cache_params = b[cache_arg]
        s, r = self._solver, self._reader
        if not r.source or r.eval_source == "":
            raise HugeCTRError(" The data source for training and evaluation should be specified")
        if s.batchsize % s.gpu_count != 0:
            raise HugeCTRError("0 != batch_size%total_gpu_count")
        if self._cache_params is not None:
            # 3.2 names the model oversubscriber (upstream pre-3.3 HugeCTR/pybind/model.cpp), later the ETC (§4.1)
            cache = "model oversubscriber" if RELEASE < (3, 3) else "embedding training cache"
            if s.repeat_dataset:
                raise HugeCTRError(f"The {cache} can only be used under epoch mode, i.e., repeat_dataset is set False")
            if len(r.keyset) != len(r.source):
                raise HugeCTRError("The number of keyset files must equal that of training data source when using "
                                   f"{cache}")
        self._input: Input | None = None
        self._tensors: dict[str, Tensor] = {}
        self._sparse: dict[str, DataReaderSparseParam] = {}
        self._embeddings: list[tuple[SparseEmbedding, OptParams]] = []
        self._collections: list[EmbeddingCollectionConfig] = []
        self._layers: list[DenseLayer] = []
        self._analysed: list[tuple[DenseLayer, list[str], list[str]]] | None = None
        self._shapes: dict[int, list] = {}  # id(layer) -> (dims, built) per top, None for a loss
        self._compiled = False
        self._train_reader = DataReader(self, "train", r.source[0])
        self._eval_reader = DataReader(self, "eval", r.eval_source)
        self._cache = _Cache(_cache_name()) if self._cache_params is not None else None
        self._iteration = 0
        self._params = _params.Params()     # what load_dense_weights / load_sparse_weights read

    # ---- building ----------------------------------------------------------------------------------------------
    @property
    def _batch(self) -> int:
        return self._solver.batchsize // self._solver.gpu_count

    def add(self, *args, **kwargs) -> None:
        record("Model.add", args, kwargs)
        # one overload per kind, each with its own argument name (model_wrapper.hpp)
        overloads = [[P("input", kind="obj:Input")], [P("sparse_embedding", kind="obj:SparseEmbedding")],
                     [P("dense_layer", kind="obj:DenseLayer")], [P("group_dense_layer", kind="obj:GroupDenseLayer")]]
        if EBC_SPAN.covers():
            overloads.append([P("ebc_config", kind="obj:EmbeddingCollectionConfig")])
        b = _overload("Model.add", overloads, args, kwargs)
        (obj,) = b.values()
        if self._analysed is not None:
            raise HugeCTRError("hugectr stand-in: Model.add after compile()/graph_to_json(): HugeCTR has finalised "
                               "the graph")
        if isinstance(obj, Input):
            self._add_input(obj)
        elif isinstance(obj, SparseEmbedding):
            self._add_embedding(obj)
        elif isinstance(obj, DenseLayer):
            self._add_dense(obj)
        elif isinstance(obj, EmbeddingCollectionConfig):
            self._add_collection(obj)
        else:
            raise HugeCTRError("hugectr stand-in: GroupDenseLayer is not modelled")

    def _new_tensor(self, name: str, dims: tuple, built: tuple) -> None:
        if name in self._tensors:
            raise HugeCTRError(f"{name}, top tensor name already exists")
        self._tensors[name] = Tensor(name, dims, built)

    def _add_input(self, inp: Input) -> None:
        if self._input is not None:
            raise HugeCTRError("hugectr stand-in: the model already has an Input")
        if self._reader.data_reader_type.name == "RawAsync" and not self._solver.repeat_dataset:
            raise HugeCTRError("Epoch mode cannot be used with RawAsync reader, please set repeat_dataset as true")
        self._input = inp
        B = self._batch
        for name, dim in inp.labels.items():
            self._new_tensor(name, (dim,), (B, dim))
        self._new_tensor(inp.dense_name, (inp.dense_dim,), (B, inp.dense_dim))
        for sp in inp.data_reader_sparse_param_array:
            if getattr(self._solver, "use_embedding_collection", False) and sp.slot_num != 1:
                raise HugeCTRError("use_embedding_collection needs slot_num=1 in every DataReaderSparseParam")
            self._new_tensor(sp.top_name, (sp.slot_num,), (B, sp.slot_num))
            self._sparse[sp.top_name] = sp

    def _add_embedding(self, emb: SparseEmbedding) -> None:
        if self._input is None:
            raise HugeCTRError("hugectr stand-in: add the Input before the embeddings")
        hybrid = emb.embedding_type.name == "HybridSparseEmbedding"
        if RELEASE < (24, 4) and hybrid != (self._reader.data_reader_type.name == "RawAsync"):
            raise HugeCTRError("Raw async reader and hybrid embedding must come together")
        if hybrid and RELEASE == (3, 3) and not self._solver.is_dlrm:
            raise HugeCTRError("Hybrid embedding is restricted to DLRM use")
        if emb.bottom_name not in self._sparse:
            raise HugeCTRError("Cannot find bottom")
        slots = self._sparse[emb.bottom_name].slot_num
        vec = emb.embedding_vec_size
        if not 1 <= vec <= 1024:
            raise HugeCTRError(f"Embedding vector size({vec}) is invalid. It cannot be zero nor exceed 1024.")
        if emb.workspace_size_per_gpu_in_mb == 0 and not emb.slot_size_array:
            raise HugeCTRError("need workspace_size_per_gpu_in_mb or slot_size_array")
        self._new_tensor(emb.sparse_embedding_name, (slots, vec), (self._batch, slots, vec))
        self._embeddings.append((emb, emb.optimizer if emb.optimizer is not None else self._opt))

    def _add_collection(self, ebc: EmbeddingCollectionConfig) -> None:
        if self._input is None:
            raise HugeCTRError("hugectr stand-in: add the Input before the embedding collection")
        if not self._solver.use_embedding_collection:
            raise HugeCTRError("hugectr stand-in: model.add(EmbeddingCollectionConfig) needs "
                               "CreateSolver(use_embedding_collection=True)")
        if not ebc.lookups:
            raise HugeCTRError("hugectr stand-in: an EmbeddingCollectionConfig without lookups")
        if getattr(ebc, "output_layout", "feature_major") != "feature_major":
            raise HugeCTRError("hugectr stand-in: the batch-major output layout is not modelled")
        widths = []
        for lk in ebc.lookups:
            sp = self._sparse.get(lk["bottom_name"])
            if sp is None:
                raise HugeCTRError(f"{lk['bottom_name']}, bottom tensor name does not exists")
            ev = lk["table_config"].ev_size
            hot = max(sp.nnz_per_slot) if isinstance(sp.nnz_per_slot, list) else sp.nnz_per_slot
            widths.append(hot * ev if lk["combiner"] == "concat" else ev)
            if ebc.grouped is None:
                self._new_tensor(lk["top_name"], (1, widths[-1]), (self._batch, 1, widths[-1]))
        if ebc.grouped is not None:   # batch major: one (batch, sum of widths) tensor
            self._new_tensor(ebc.grouped, (sum(widths),), (self._batch, sum(widths)))
        self._collections.append(ebc)

    def _add_dense(self, layer: DenseLayer) -> None:
        t = layer.type
        if self._solver.use_mixed_precision and t not in MP_LAYERS:
            raise HugeCTRError(f"Mixed precision not supported for: {t}")
        if not self._solver.use_mixed_precision and t == "FusedInnerProduct":
            raise HugeCTRError(f"Single precision not supported for: {t}")
        if set(layer.bottom_names) & set(layer.top_names):
            raise HugeCTRError("bottom and top include a same layer name")
        for name in layer.bottom_names:
            if name not in self._tensors:
                raise HugeCTRError(f"{name}, bottom tensor name does not exists")
        for name in layer.top_names:
            if name in self._tensors:
                raise HugeCTRError(f"{name}, top tensor name already exists")
        ins = [self._tensors[n] for n in layer.bottom_names]
        outs = infer(layer, ins, bool(self._solver.use_mixed_precision))
        for name, (dims, built) in zip(layer.top_names, outs):
            self._new_tensor(name, dims, built)
        self._shapes[id(layer)] = [None if t in LOSSES else o for o in outs]
        self._layers.append(layer)

    # ---- graph_analysis (§2.7) --------------------------------------------------------------------------------
    def _graph_analysis(self) -> list[tuple[DenseLayer, list[str], list[str]]]:
        if self._analysed is not None:
            return self._analysed
        uses = Counter(n for layer in self._layers for n in layer.bottom_names)
        for _name, n in uses.items():
            if n > 5:
                raise HugeCTRError("The graph should not include more than 5-way branches")
        if not at_least(3, 3):
            shared = sorted(n for n, k in uses.items() if k > 1)
            if shared:
                raise HugeCTRError(f"hugectr stand-in (HugeCTR {NAME}): {', '.join(shared)} feeds several dense "
                                   "layers; this release has no automatic Slice insertion (graph_analysis came in "
                                   "3.3), so a branch must be an explicit Slice layer")
            self._analysed = [(layer, list(layer.bottom_names), list(layer.top_names)) for layer in self._layers]
            return self._analysed
        out: list = []
        next_slice: dict[str, int] = {}
        for layer in self._layers:
            bottoms = []
            for name in layer.bottom_names:
                if uses[name] > 1:
                    if name not in next_slice:
                        t = self._tensors[name]
                        # the width is read from the add()-time shape: its last dimension (3.4+), dimension 1 at 3.3
                        w = t.dims[-1] if at_least(3, 4) else t.dims[0]
                        tops = [f"{name}_slice{k}" for k in range(uses[name])]
                        sl = _AutoSlice(name, tops, w)
                        self._shapes[id(sl)] = [(t.dims[:-1] + (w,), t.built[:-1] + (w,))] * len(tops)
                        out.append((sl, [name], tops))
                        next_slice[name] = 0
                    bottoms.append(f"{name}_slice{next_slice[name]}")
                    next_slice[name] += 1
                else:
                    bottoms.append(name)
            out.append((layer, bottoms, list(layer.top_names)))
        self._analysed = out
        return out

    # ---- compile, summary, graph_to_json ---------------------------------------------------------------------
    def compile(self, *args, **kwargs) -> None:
        record("Model.compile", args, kwargs)
        sigs = [[]]
        if at_least(3, 5):
            sigs.append([P("loss_names", kind="list[str]"), P("loss_weights", kind="list[float]")])
        _overload("Model.compile", sigs, args, kwargs)
        if self._input is None or len(self._embeddings) + len(self._layers) < 2:
            raise HugeCTRError("The model should include input and at least two layers")
        self._graph_analysis()
        if isinstance(self._cache_params, ModelOversubscriberParams):  # pre-3.3 source: compile creates the MOS
            mos = self._cache_params
            files = mos.dest_sparse_models if mos.train_from_scratch else mos.trained_sparse_models
            if not files:
                raise HugeCTRError("must provide sparse_model_file. if train from scratch, please specify a name to "
                                   "store the trained embedding model")
            if not mos.train_from_scratch:
                for f in files:
                    _files.check_model_file(f, "Model.compile (model oversubscriber)")
        self._compiled = True

    def summary(self, *args, **kwargs) -> None:
        record("Model.summary", args, kwargs)
        bind("Model.summary", [], args, kwargs)
        if self._input is None or len(self._embeddings) + len(self._layers) < 2:
            raise HugeCTRError("The model should include input and at least two layers")
        if at_least(3, 3):  # summary() finalises the graph like compile() (graph_analysis, auto Slices)
            self._graph_analysis()
        rows = []
        for emb, _ in self._embeddings:
            t = self._tensors[emb.sparse_embedding_name]
            rows.append((emb.embedding_type.name, [emb.bottom_name], [emb.sparse_embedding_name],
                         [(t.dims, t.built)]))
        layers = self._analysed if self._analysed is not None else \
            [(layer, layer.bottom_names, layer.top_names) for layer in self._layers]
        for layer, bottoms, tops in layers:
            rows.append((layer.type, list(bottoms), list(tops), self._shapes[id(layer)]))
        inp = self._input
        text = W.summary_text(rows, inp.labels, (inp.dense_name, inp.dense_dim),
                              [sp.top_name for sp in inp.data_reader_sparse_param_array], self._batch)
        print(text, end="", flush=True)

    def graph_to_json(self, *args, **kwargs) -> None:
        record("Model.graph_to_json", args, kwargs)
        b = bind("Model.graph_to_json", [P("graph_config_file", kind="str")], args, kwargs)
        if self._input is None:
            raise HugeCTRError("hugectr stand-in: graph_to_json() of a model without Input")
        if self._collections:
            raise HugeCTRError("hugectr stand-in: what graph_to_json writes for an embedding collection is not "
                               "modelled")
        analysed = self._graph_analysis()
        layers = [W.data_json(self._input)]
        layers += [W.embedding_json(emb, opt, self._solver.gpu_count) for emb, opt in self._embeddings]
        layers += [W.dense_json(layer, bottoms, tops) for layer, bottoms, tops in analysed
                   if not (at_least(3, 9) and "combined_multi_label" in bottoms)]
        obj = {"layers": layers}
        if at_least(3, 3) and self._solver.model_name:
            obj["model_name"] = self._solver.model_name
        _files.output(b["graph_config_file"]).write_text(W.dumps(obj), encoding="utf-8")

    def construct_from_json(self, *args, **kwargs) -> None:
        record("Model.construct_from_json", args, kwargs)
        b = bind("Model.construct_from_json", [P("graph_config_file", kind="str"),
                                               P("include_dense_network", kind="bool")], args, kwargs)
        path = _files.resolve(b["graph_config_file"])
        if not path.is_file():
            raise HugeCTRError(f"Cannot open {b['graph_config_file']}")
        with quiet():
            _load_graph(self, json.loads(path.read_text(encoding="utf-8")), b["include_dense_network"])

    # ---- training --------------------------------------------------------------------------------------------
    def _need_compiled(self) -> None:
        if not self._compiled:
            raise HugeCTRError("Cannot start the training process before calling Model.compile()")

    def fit(self, *args, **kwargs) -> None:
        record("Model.fit", args, kwargs)
        b = bind("Model.fit", [P("num_epochs", 0, "int"), P("max_iter", 2000, "int"), P("display", 200, "int"),
                               P("eval_interval", 1000, "int"), P("snapshot", 10000, "int"),
                               P("snapshot_prefix", "", "str")], args, kwargs)
        self._need_compiled()
        epoch_mode = not self._solver.repeat_dataset
        if epoch_mode:
            if self._cache_params is None and b["num_epochs"] <= 0:
                raise HugeCTRError("Require num_epochs>0 under epoch mode")
        elif b["max_iter"] <= 0:
            raise HugeCTRError("Require max_iter>0 under non-epoch mode")
        rtype = self._reader.data_reader_type.name
        for src in self._reader.source:
            _files.check_source(src, rtype, "Model.fit (training data)")
        _files.check_source(self._reader.eval_source, rtype, "Model.fit (evaluation data)")
        if self._cache is not None:
            for k in self._reader.keyset:
                _files.check_keyset(k, "Model.fit")
        # fit starts the readers (start_data_reading in non-epoch mode, set_source per pass in epoch mode), so a
        # later low-level eval()/train() finds them started
        self._train_reader._started = self._eval_reader._started = True
        self._eval_reader._checked = self._train_reader._checked = True  # fit checked the files above
        if not epoch_mode and b["snapshot"] > 0:
            for it in range(b["snapshot"], b["max_iter"], b["snapshot"]):
                self._save_params(b["snapshot_prefix"], it)

    def start_data_reading(self, *args, **kwargs) -> None:
        record("Model.start_data_reading", args, kwargs)
        bind("Model.start_data_reading", [], args, kwargs)
        self._need_compiled()
        self._train_reader._started = self._eval_reader._started = True

    FIRST_BATCH = P("is_first_batch", True, "bool", Span((3, 3), (23, 6)))  # train/eval argument of 3.3 - 4.x

    def train(self, *args, **kwargs) -> bool:
        record("Model.train", args, kwargs)
        bind("Model.train", [self.FIRST_BATCH], args, kwargs)
        self._need_compiled()
        self._iteration += 1
        return self._train_reader._next_batch()

    def eval(self, *args, **kwargs) -> bool:
        record("Model.eval", args, kwargs)
        bind("Model.eval", [P("eval_batch", -1, "int", Span((3, 2), (3, 3))), self.FIRST_BATCH], args, kwargs)
        self._need_compiled()
        return self._eval_reader._next_batch()

    def get_current_loss(self, *args, **kwargs) -> float:
        record("Model.get_current_loss", args, kwargs)
        bind("Model.get_current_loss", [], args, kwargs)
        return 0.0

    def get_eval_metrics(self, *args, **kwargs) -> list:
        record("Model.get_eval_metrics", args, kwargs)
        bind("Model.get_eval_metrics", [], args, kwargs)
        return [(m.name, 0.0) for m in self._solver.metrics_spec]

    def set_learning_rate(self, *args, **kwargs) -> None:
        record("Model.set_learning_rate", args, kwargs)
        bind("Model.set_learning_rate", [P("lr", kind="float")], args, kwargs)

    def get_learning_rate_scheduler(self, *args, **kwargs) -> LearningRateScheduler:
        record("Model.get_learning_rate_scheduler", args, kwargs)
        bind("Model.get_learning_rate_scheduler", [], args, kwargs)
        return LearningRateScheduler(self._solver.lr)

    def reset_learning_rate_scheduler(self, *args, **kwargs) -> None:
        record("Model.reset_learning_rate_scheduler", args, kwargs)
        bind("Model.reset_learning_rate_scheduler",
             [P("base_lr", kind="float"), P("warmup_steps", 1, "int"), P("decay_start", 0, "int"),
              P("decay_steps", 1, "int"), P("decay_power", 2.0, "float"), P("end_lr", 0.0, "float")], args, kwargs)

    def get_data_reader_train(self, *args, **kwargs) -> DataReader:
        record("Model.get_data_reader_train", args, kwargs)
        bind("Model.get_data_reader_train", [], args, kwargs)
        return self._train_reader

    def get_data_reader_eval(self, *args, **kwargs) -> DataReader:
        record("Model.get_data_reader_eval", args, kwargs)
        bind("Model.get_data_reader_eval", [], args, kwargs)
        return self._eval_reader

    def _need_cache(self, what: str) -> _Cache:
        if self._cache is None:
            if RELEASE < (3, 3):
                raise HugeCTRError(f"{what}: the model oversubscriber should be created first (Model(solver, reader, "
                                   "optimizer, mos))")
            raise HugeCTRError("The embedding training cache should be created first")
        return self._cache

    def set_source(self, *args, **kwargs) -> None:
        record("Model.set_source", args, kwargs)
        b = _overload("Model.set_source", [
            [P("source", kind="list[str]"), P("keyset", kind="list[str]"), P("eval_source", kind="str")],
            [P("source", kind="str"), P("eval_source", kind="str")]], args, kwargs)
        cache = "model oversubscription" if RELEASE < (3, 3) else "embedding training cache"
        if isinstance(b["source"], list):  # the MOS/ETC overload
            if self._solver.repeat_dataset or self._cache is None:
                raise HugeCTRError(f"The set source method can only be used under the {cache} mode")
        elif self._solver.repeat_dataset or self._cache is not None:  # the epoch-mode overload
            raise HugeCTRError("The set source method can only be used under the epoch mode")
        source = b["source"] if isinstance(b["source"], list) else [b["source"]]
        keyset = b.get("keyset", self._reader.keyset)
        if "keyset" in b and len(source) != len(keyset):
            raise HugeCTRError("The number of training data sources should equal that of the keyset files")
        self._reader.source, self._reader.keyset, self._reader.eval_source = source, keyset, b["eval_source"]
        self._train_reader._source, self._eval_reader._source = source[0], b["eval_source"]

    def get_model_oversubscriber(self, *args, **kwargs) -> _Cache:
        record("Model.get_model_oversubscriber", args, kwargs)
        bind("Model.get_model_oversubscriber", [], args, kwargs)
        return self._need_cache("Model.get_model_oversubscriber")

    def get_embedding_training_cache(self, *args, **kwargs) -> _Cache:
        record("Model.get_embedding_training_cache", args, kwargs)
        bind("Model.get_embedding_training_cache", [], args, kwargs)
        return self._need_cache("Model.get_embedding_training_cache")

    def get_incremental_model(self, *args, **kwargs) -> list:
        record("Model.get_incremental_model", args, kwargs)
        bind("Model.get_incremental_model", [], args, kwargs)
        if self._cache is None:
            raise HugeCTRError("Get incremental is only supported in ETC")
        return [([], []) for _ in self._embeddings]

    def dump_incremental_model_2kafka(self, *args, **kwargs) -> None:
        record("Model.dump_incremental_model_2kafka", args, kwargs)
        bind("Model.dump_incremental_model_2kafka", [], args, kwargs)
        if self._cache is None:
            raise HugeCTRError("Get incremental is only supported in ETC")

    # ---- parameters ------------------------------------------------------------------------------------------
    def save_params_to_files(self, *args, **kwargs) -> None:
        record("Model.save_params_to_files", args, kwargs)
        b = bind("Model.save_params_to_files", [P("prefix", kind="str"), P("iter", 0, "int")], args, kwargs)
        self._need_compiled()
        self._save_params(b["prefix"], b["iter"])

    def _cache_sparse_paths(self) -> list[str] | None:
        """Where the MOS/ETC keeps the sparse models (it dumps them there instead of <prefix><i>_sparse_<iter>)."""
        c = self._cache_params
        if isinstance(c, ModelOversubscriberParams):
            return c.dest_sparse_models if c.train_from_scratch else c.trained_sparse_models
        if isinstance(c, EmbeddingTrainingCacheParams):
            return c.sparse_models
        return None

    def _save_params(self, prefix: str, it: int) -> None:
        """The files of §5 (_params.py: the values a load_* call read, else placeholders of the real sizes). With
        MOS/ETC the sparse models go to the cache's own paths (Model::download_params_to_files)."""
        _params.save_dense(self._params, _files.output(f"{prefix}_dense_{it}.model"), self._dense_param_count(),
                           self._batch_norm_widths())
        _files.output(f"{prefix}_opt_dense_{it}.model").write_bytes(b"")
        cache_paths = self._cache_sparse_paths()
        for i, (emb, _) in enumerate(self._embeddings):
            if cache_paths is not None:
                if i >= len(cache_paths):
                    continue
                d = _files.output(cache_paths[i])
            else:
                d = _files.output(f"{prefix}{i}_sparse_{it}.model")
                _files.output(f"{prefix}{i}_opt_sparse_{it}.model").write_bytes(b"")
            _params.save_sparse(self._params, i, d, "Localized" in emb.embedding_type.name)

    def _batch_norm_widths(self) -> list[int]:
        return [self._tensors[layer.bottom_names[0]].built[-1] for layer in self._layers if layer.type == "BatchNorm"]

    def _dense_param_count(self) -> int:
        n = 0
        for layer in self._layers:
            t = layer.type
            width = self._tensors[layer.bottom_names[0]].built[-1] if layer.bottom_names else 0
            if t in ("InnerProduct", "FusedInnerProduct"):
                n += width * layer.num_output + layer.num_output
            elif t == "MultiCross":
                n += layer.num_layers * 2 * width
            elif t == "WeightMultiply":
                n += layer.weight_dims[0] * layer.weight_dims[1]
            elif t in ("BatchNorm", "LayerNorm"):
                n += 2 * width
            elif t == "MLP":
                for out in layer.num_outputs:
                    n += width * out + out
                    width = out
        return n

    def _need_compiled_for(self, what: str, sparse: bool = False) -> None:
        if not self._compiled:
            raise HugeCTRError(f"Cannot load {what} before calling Model.compile()")
        if sparse and self._cache is not None:
            cache = "model oversubscriber" if RELEASE < (3, 3) else "embedding training cache"
            raise HugeCTRError(f"Cannot load {what} after {cache} is created")

    def load_dense_weights(self, *args, **kwargs) -> None:
        record("Model.load_dense_weights", args, kwargs)
        b = bind("Model.load_dense_weights", [P("dense_model_file", kind="str")], args, kwargs)
        self._need_compiled_for("the dense weights")
        _files.check_model_file(b["dense_model_file"], "Model.load_dense_weights")
        _params.load_dense(self._params, _files.resolve(b["dense_model_file"]), self._dense_param_count(),
                           self._batch_norm_widths(), "Model.load_dense_weights")

    def load_sparse_weights(self, *args, **kwargs) -> None:
        record("Model.load_sparse_weights", args, kwargs)
        sigs = [[P("sparse_embedding_files", kind="list[str]")]]
        if at_least(3, 3):
            sigs.append([P("sparse_embedding_files_map", kind="any")])
        b = _overload("Model.load_sparse_weights", sigs, args, kwargs)
        self._need_compiled_for("the sparse weights", sparse=True)
        if "sparse_embedding_files" in b:
            pairs = list(enumerate(b["sparse_embedding_files"]))
        else:
            names = [e.sparse_embedding_name for e, _ in self._embeddings]
            for name in b["sparse_embedding_files_map"]:
                if name not in names:
                    raise HugeCTRError(f"No such embedding name: {name}")
            pairs = [(names.index(n), f) for n, f in b["sparse_embedding_files_map"].items()]
        for i, f in pairs:
            _files.check_model_file(f, "Model.load_sparse_weights")
            if i < len(self._embeddings):
                emb = self._embeddings[i][0]
                _params.load_sparse(self._params, i, _files.resolve(f), emb.embedding_vec_size,
                                    "Localized" in emb.embedding_type.name, "Model.load_sparse_weights")

    def freeze_dense(self, *args, **kwargs) -> None:
        record("Model.freeze_dense", args, kwargs)
        bind("Model.freeze_dense", [], args, kwargs)

    def unfreeze_dense(self, *args, **kwargs) -> None:
        record("Model.unfreeze_dense", args, kwargs)
        bind("Model.unfreeze_dense", [], args, kwargs)

    def freeze_embedding(self, *args, **kwargs) -> None:
        record("Model.freeze_embedding", args, kwargs)
        self._embedding_name_overload("Model.freeze_embedding", args, kwargs)

    def unfreeze_embedding(self, *args, **kwargs) -> None:
        record("Model.unfreeze_embedding", args, kwargs)
        self._embedding_name_overload("Model.unfreeze_embedding", args, kwargs)

    def _embedding_name_overload(self, qualname, args, kwargs) -> None:
        sigs = [[]] + ([[P("embedding_name", kind="str")]] if at_least(3, 3) else [])
        b = _overload(qualname, sigs, args, kwargs)
        if "embedding_name" in b and b["embedding_name"] not in [e.sparse_embedding_name for e, _ in self._embeddings]:
            raise HugeCTRError(f"No such embedding name: {b['embedding_name']}")

    def load_dense_optimizer_states(self, *args, **kwargs) -> None:
        record("Model.load_dense_optimizer_states", args, kwargs)
        b = bind("Model.load_dense_optimizer_states", [P("dense_opt_states_file", kind="str")], args, kwargs)
        self._need_compiled_for("the dense optimizer states")
        _files.check_model_file(b["dense_opt_states_file"], "Model.load_dense_optimizer_states")

    def load_sparse_optimizer_states(self, *args, **kwargs) -> None:
        record("Model.load_sparse_optimizer_states", args, kwargs)
        sigs = [[P("sparse_opt_states_files", kind="list[str]")]]
        if at_least(3, 3):
            sigs.append([P("sparse_opt_states_files_map", kind="any")])
        b = _overload("Model.load_sparse_optimizer_states", sigs, args, kwargs)
        self._need_compiled_for("the sparse optimizer states", sparse=True)
        for f in b.get("sparse_opt_states_files") or list(b["sparse_opt_states_files_map"].values()):
            _files.check_model_file(f, "Model.load_sparse_optimizer_states")

    def check_out_tensor(self, *args, **kwargs) -> list:
        """A tensor's values after the last train/eval step: zeros of the built shape (nothing is computed)."""
        record("Model.check_out_tensor", args, kwargs)
        b = bind("Model.check_out_tensor", [P("tensor_name", kind="str"), P("tensor_type", kind="Tensor_t")],
                 args, kwargs)
        # The Input layer's tensors (label, dense, sparse) exist from Model.add(Input) on: HugeCTR's data-reader
        # tests check them out without compiling.
        if not self._is_input_tensor(b["tensor_name"]):
            self._need_compiled()
        if b["tensor_name"] not in self._tensors:
            raise HugeCTRError(f"Cannot find tensor: {b['tensor_name']}")
        built = self._tensors[b["tensor_name"]].built

        def zeros(dims):
            return [0.0] * dims[0] if len(dims) == 1 else [zeros(dims[1:]) for _ in range(dims[0])]
        return zeros(built)

    def _is_input_tensor(self, name: str) -> bool:
        inp = self._input
        if inp is None:
            return False
        return name in (*inp.labels, inp.dense_name, *(sp.top_name for sp in inp.data_reader_sparse_param_array))

    def export_predictions(self, *args, **kwargs) -> None:
        record("Model.export_predictions", args, kwargs)
        b = bind("Model.export_predictions", [P("output_prediction_file_name", kind="str"),
                                              P("output_label_file_name", kind="str")], args, kwargs)
        self._need_compiled()
        _files.output(b["output_prediction_file_name"]).write_text("")
        _files.output(b["output_label_file_name"]).write_text("")


# Methods that only some releases have (hugectr.md §1.8): absent elsewhere, with a message naming where they exist.
_METHOD_SPANS = {
    "get_model_oversubscriber": MOS_SPAN,
    "get_embedding_training_cache": ETC_SPAN,
    "set_source": Span((3, 2), ETC_SPAN.until),
    "get_incremental_model": Span((3, 2), ETC_SPAN.until),
    "dump_incremental_model_2kafka": ETC_SPAN,
}
_ABSENT_METHODS = {}
for _name, _span in _METHOD_SPANS.items():
    if not _span.covers():
        _ABSENT_METHODS[_name] = _span
        delattr(Model, _name)


def _model_getattr(self, name: str):
    if name in _ABSENT_METHODS:
        raise AttributeError(f"hugectr.Model.{name} does not exist in HugeCTR {NAME} (it exists in "
                             f"{_ABSENT_METHODS[name].describe()})")
    raise AttributeError(f"'hugectr.Model' object has no attribute {name!r} (HugeCTR {NAME} stand-in)")


Model.__getattr__ = _model_getattr


class _AutoSlice:
    """A Slice that graph_analysis() inserted (it is no DenseLayer the script made)."""

    type = "Slice"

    def __init__(self, bottom: str, tops: list[str], width: int):
        self.bottom_names, self.top_names = [bottom], tops
        self.ranges = [(0, width)] * len(tops)


# ---- construct_from_json (§2.10) -------------------------------------------------------------------------------
def _init(d: dict, key: str):
    return getattr(Initializer_t, d[key]) if key in d else Initializer_t.Default


def _load_graph(model: Model, graph: dict, include_dense: bool) -> None:
    layers = graph.get("layers") or []
    if not layers or layers[0].get("type") != "Data":
        raise HugeCTRError("The first layer of the graph JSON must be the Data layer")
    data = layers[0]
    label = data["label"]
    sparse = [DataReaderSparseParam(s["top"], s["nnz_per_slot"], s["is_fixed_length"], s["slot_num"])
              for s in data["sparse"]]
    if isinstance(label["top"], list):
        inp = Input(label_dims=label["label_dim"], label_names=label["top"], dense_dim=data["dense"]["dense_dim"],
                    dense_name=data["dense"]["top"], data_reader_sparse_param_array=sparse)
    else:
        inp = Input(label_dim=label["label_dim"], label_name=label["top"], dense_dim=data["dense"]["dense_dim"],
                    dense_name=data["dense"]["top"], data_reader_sparse_param_array=sparse)
    model.add(inp)
    i = 1
    while i < len(layers) and layers[i]["type"] in Embedding_t.__members__:
        e = layers[i]
        hp = e["sparse_embedding_hparam"]
        opt = None
        if "optimizer" in e and "type" in e["optimizer"]:
            o = e["optimizer"]
            kw = {"optimizer_type": getattr(Optimizer_t, o["type"]), "update_type": getattr(Update_t, o["update_type"])}
            kw.update({k: v for k, v in next((v for k, v in o.items() if k.endswith("_hparam")), {}).items()})
            opt = CreateOptimizer(**kw)
        model.add(SparseEmbedding(
            embedding_type=getattr(Embedding_t, e["type"]),
            workspace_size_per_gpu_in_mb=hp.get("workspace_size_per_gpu_in_mb", 0),
            embedding_vec_size=hp["embedding_vec_size"], combiner=hp["combiner"], sparse_embedding_name=e["top"],
            bottom_name=e["bottom"], slot_size_array=hp.get("slot_size_array", []), optimizer=opt))
        i += 1
    if not include_dense:
        return
    for d in layers[i:]:
        t = d["type"]
        kw = {"layer_type": getattr(Layer_t, t),
              "bottom_names": d["bottom"] if isinstance(d["bottom"], list) else [d["bottom"]],
              "top_names": d["top"] if isinstance(d["top"], list) else [d["top"]]}
        fc = d.get("fc_param") or d.get("mc_param") or d.get("mlp_param") or {}
        if "num_output" in fc:
            kw["num_output"] = fc["num_output"]
        if "num_layers" in fc:
            kw["num_layers"] = fc["num_layers"]
        if fc:
            kw["weight_init_type"], kw["bias_init_type"] = _init(fc, "weight_init"), _init(fc, "bias_init")
        if t == "FusedInnerProduct":
            kw["act_type"] = Activation_t.Relu if d["activation"] == "Relu" else Activation_t.Non
            kw["pos_type"] = FcPosition_t.Non if d["position"] == "None" else getattr(FcPosition_t, d["position"])
        if "rate" in d:
            kw["dropout_rate"] = d["rate"]
        if t == "Reshape":
            if "selected" in d:
                kw["selected"], kw["selected_slots"] = True, d["selected"]
            else:
                kw["leading_dim"], kw["time_step"] = d.get("leading_dim", 1), d.get("time_step", 0)
        if "axis" in d:
            kw["axis"] = d["axis"]
        if "ranges" in d:
            kw["ranges"] = [tuple(r) for r in d["ranges"]]
        if "weight_dims" in d:
            kw["weight_dims"] = d["weight_dims"]
            kw["weight_init_type"] = _init(d, "weight_init")
        if "out_dim" in d:
            kw["out_dim"] = d["out_dim"]
        if "bn_param" in d:
            kw["eps"], kw["factor"] = d["bn_param"]["eps"], d["bn_param"]["factor"]
            kw["gamma_init_type"], kw["beta_init_type"] = _init(d["bn_param"], "gamma_init"), \
                _init(d["bn_param"], "beta_init")
        if "regularizer" in d:
            kw["use_regularizer"], kw["regularizer_type"] = True, getattr(Regularizer_t, d["regularizer"])
            kw["lambda"] = d["lambda"]
        if "target_weight" in d:
            kw["target_weight_vec"] = d["target_weight"]
        model.add(DenseLayer(**kw))


__all__ = ["Model", "DataReader", "LearningRateScheduler"]
