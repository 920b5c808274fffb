"""The sections of an imported spec, one function per hugectr call, over the import state (:mod:`.state`): solver,
reader, optimizer, embeddings, layers, fit, the Input layer with the lock's columns, and the embedding cache of
continuous training."""

from __future__ import annotations

from ..features import Column, Features
from ..graph.ir import Enum
from ..hugectr import api
from .arguments import (FIT_TYPED, OPTIMIZER_TYPED, READER_FORMATS, SOLVER_TYPED, Refusal, _enum_member, _required,
                        kwargs_of, spec_value)
from .calls import Call, Obj, value_repr
from .state import ImportState


# ---- continuous training (seed 003) ----------------------------------------------------------------------------

def cache(call: Call) -> dict:
    kw = kwargs_of(call)
    if call.func == "CreateMOS":
        out: dict = {"train_from_scratch": bool(spec_value(kw.pop("train_from_scratch", True), call, "x"))}
        out["ps"] = "host_memory" if spec_value(kw.pop("use_host_memory_ps", True), call, "x") else "ssd"
        models = kw.pop("dest_sparse_models", None) if out["train_from_scratch"] else \
            kw.pop("trained_sparse_models", None)
    else:
        types = spec_value(kw.pop("ps_types", None), call, "ps_types")
        if not isinstance(types, list):
            raise Refusal("CreateETC needs ps_types=[...]", call.line)
        out = {"ps": [{"TrainPSType_t.Staged": "staged", "TrainPSType_t.Cached": "cached"}.get(t, t)
                      for t in types]}
        models = kw.pop("sparse_models", None)
        if "local_paths" in kw:
            out["local_paths"] = spec_value(kw.pop("local_paths"), call, "local_paths")
        kw.pop("hmem_cache_configs", None)
    out["sparse_models"] = spec_value(models, call, "sparse_models")
    if kw:
        raise Refusal(f"hugectr.{call.func}({next(iter(kw))}=...) has no spec field yet", call.line)
    out["incremental_model"] = False
    out["low_level"] = False
    return out


def continuous(spec: dict, ct: dict, passes: list[dict], hmem: dict | None, after: list[str],
               model_call: Call) -> None:
    if not passes:
        raise Refusal("a continuous-training script that never calls model.fit", model_call.line)
    keyset = spec.get("data", {}).pop("args", {}).pop("keyset", None) if "keyset" in spec.get("data", {}).get(
        "args", {}) else None
    if not spec.get("data", {}).get("args", True):
        spec["data"].pop("args", None)
    if keyset is None:
        raise Refusal("DataReaderParams needs keyset=[...] for the embedding cache's first pass", model_call.line)
    passes[0] = {"keyset": keyset}
    ct["passes"] = passes
    if "save_prefix" not in ct:
        raise Refusal("a continuous-training script that never calls model.save_params_to_files(prefix) after "
                      "its passes", model_call.line)
    if hmem is not None:
        ct["hmem_cache"] = hmem
    spec["continuous_training"] = ct
    if after[:2] != ["summary", "graph_to_json"]:
        raise Refusal("continuous-training scripts are generated with summary() then graph_to_json() before "
                      "the first fit", model_call.line)
    after[:] = ["summary", "graph_to_json", "fit"]


# ---- helpers ---------------------------------------------------------------------------------------------------

def _once(seen: list[str], what: str, call: Call) -> None:
    if what in seen:
        raise Refusal(f"a second hugectr.{call.func}: one model per file", call.line)
    seen.append(what)


def _after(st: ImportState, seen: list[str], what: str, call: Call, compiled: bool, then: list | None = None) -> None:
    then = then or []
    if what in seen or what in st.before_compile:
        raise Refusal(f"model.{what} is called twice; the spec has one of each", call.line)
    if not compiled and what not in ("graph_to_json", "summary"):
        raise Refusal(f"model.{what} before model.compile()", call.line)
    if then:
        raise Refusal(f"model.{what} after model.{then[-1]['method']}: the spec calls further Model methods "
                      "last", call.line)
    if not compiled:
        if what in st.before_compile:
            raise Refusal(f"model.{what} is called twice; the spec has one of each", call.line)
        st.before_compile.append(what)   # summary, graph_to_json may run before compile (graph_analysis once)
        return
    seen.append(what)


def solver(st: ImportState, call: Call) -> dict:
    kw = kwargs_of(call)
    out: dict = {}
    extra: dict = {}
    for k, v in kw.items():
        if k in SOLVER_TYPED:
            out[k] = spec_value(v, call, k)
        elif k == "i64_input_key":
            st.i64 = bool(spec_value(v, call, k))
        elif k == "model_name":
            name = spec_value(v, call, k)
            if not isinstance(name, str) or not name.isidentifier():
                raise Refusal(f"CreateSolver(model_name={name!r}) is not a valid identifier", call.line)
            st.name = name
            out["model_name"] = True
        else:
            extra[k] = spec_value(v, call, k)
    if "vvgpu" in out:
        out["vvgpu"] = [list(node) for node in out["vvgpu"]]
    if extra:
        out["args"] = extra
    return out


def reader(st: ImportState, call: Call) -> dict:
    kw = kwargs_of(call)
    out: dict = {}
    extra: dict = {}
    fmt = kw.pop("data_reader_type", None)
    if fmt is None:
        raise Refusal("DataReaderParams without data_reader_type", call.line)
    member = _enum_member(fmt, "DataReaderType_t", call, "data_reader_type")
    if member not in READER_FORMATS:
        raise Refusal(f"DataReaderType_t.{member} readers have no spec field yet", call.line)
    out["format"] = READER_FORMATS[member]
    source = spec_value(kw.pop("source", None), call, "source")
    if isinstance(source, str):
        source = [source]
    if not source:
        raise Refusal("DataReaderParams without source", call.line)
    out["train"] = source
    ev = spec_value(kw.pop("eval_source", None), call, "eval_source")
    if not isinstance(ev, str):
        raise Refusal("DataReaderParams without an eval_source string", call.line)
    out["eval"] = ev
    if "check_type" in kw:
        out["check_type"] = _enum_member(kw.pop("check_type"), "Check_t", call, "check_type")
    elif _required("DataReaderParams", "check_type", st.release):
        # The source would stop with a TypeError; the generated script, which passes it, would not be its calls.
        raise Refusal(f"hugectr.DataReaderParams without check_type, which HugeCTR {st.release} requires "
                      "(the source stops there with a TypeError)", call.line,
                      "pass check_type=hugectr.Check_t.Non (Parquet) or Check_t.Sum")
    if "slot_size_array" in kw:
        st.slot_sizes = [int(x) for x in spec_value(kw.pop("slot_size_array"), call, "slot_size_array")]
        if out["format"] != "parquet":
            out["slot_size_array"] = True
    elif out["format"] == "parquet":
        out["slot_size_array"] = False
    if "num_workers" in kw:
        out["num_workers"] = spec_value(kw.pop("num_workers"), call, "num_workers")
    for k, v in kw.items():
        extra[k] = spec_value(v, call, k)
    if extra:
        out["args"] = extra
    return out


def optimizer(st: ImportState, call: Call) -> dict:
    kw = kwargs_of(call)
    out: dict = {}
    extra: dict = {}
    if "optimizer_type" in kw:
        out["type"] = _enum_member(kw.pop("optimizer_type"), "Optimizer_t", call, "optimizer_type")
    else:
        out["type"] = "Adam"
        st.assumptions.append((call.line, "CreateOptimizer without optimizer_type: HugeCTR's default Adam"))
    if "update_type" in kw:
        out["update_type"] = _enum_member(kw.pop("update_type"), "Update_t", call, "update_type")
    for k, v in kw.items():
        if k in OPTIMIZER_TYPED:
            out[k] = spec_value(v, call, k)
        else:
            extra[k] = spec_value(v, call, k)
    if extra:
        out["args"] = extra
    return out


def embedding(st: ImportState, call: Call) -> dict:
    kw = kwargs_of(call)
    out: dict = {}
    extra: dict = {}
    name = spec_value(kw.pop("sparse_embedding_name", None), call, "sparse_embedding_name")
    bottom = spec_value(kw.pop("bottom_name", None), call, "bottom_name")
    if not isinstance(name, str) or not isinstance(bottom, str):
        raise Refusal("SparseEmbedding needs sparse_embedding_name and bottom_name strings", call.line)
    out["name"], out["input"] = name, bottom
    if "embedding_type" in kw:
        out["embedding_type"] = _enum_member(kw.pop("embedding_type"), "Embedding_t", call, "embedding_type")
    else:
        raise Refusal("SparseEmbedding without embedding_type", call.line)
    for k in ("workspace_size_per_gpu_in_mb", "embedding_vec_size", "combiner"):
        if k in kw:
            out[k] = spec_value(kw.pop(k), call, k)
    if isinstance(out.get("combiner"), int):
        out["combiner"] = {0: "sum", 1: "mean"}.get(out["combiner"], out["combiner"])
    if "slot_size_array" in kw:
        sizes = [int(x) for x in spec_value(kw.pop("slot_size_array"), call, "slot_size_array")]
        st.embedding_sizes.append((bottom, sizes, call.line))
        out["slot_size_array"] = True
    opt = kw.pop("optimizer", None)
    if opt is None:
        out["optimizer"] = "default"
    elif not (isinstance(opt, Obj) and opt.type == "CreateOptimizer"):
        raise Refusal(f"SparseEmbedding(optimizer={value_repr(opt)}): only the model's optimizer object",
                      call.line)
    for k, v in kw.items():
        extra[k] = spec_value(v, call, k)
    if extra:
        out["args"] = extra
    return out


def layer(call: Call) -> dict:
    kw = kwargs_of(call)
    t = kw.pop("layer_type", None)
    member = _enum_member(t, "Layer_t", call, "layer_type")
    bottoms = spec_value(kw.pop("bottom_names", None), call, "bottom_names")
    tops = spec_value(kw.pop("top_names", None), call, "top_names")
    if not isinstance(bottoms, list) or not isinstance(tops, list):
        raise Refusal(f"DenseLayer {member} without bottom_names / top_names lists", call.line)
    out: dict = {"type": member, "bottom": bottoms[0] if len(bottoms) == 1 else bottoms,
                 "top": tops[0] if len(tops) == 1 else tops}
    for k, v in kw.items():
        val = spec_value(v, call, k)
        if isinstance(val, str) and "." in val and isinstance(v, Enum):
            val = v.member  # DenseLayer enum arguments are written by member (the builder knows their types)
        elif isinstance(v, (list, tuple)) and v and all(isinstance(x, Enum) for x in v):
            val = [x.member for x in v]   # activations=[Activation_t.Relu, ...]
        out[k] = val
    return out


def group_layer(call: Call) -> dict:
    kw = kwargs_of(call)
    member = _enum_member(kw.pop("group_layer_type", None), "GroupLayer_t", call, "group_layer_type")
    bottoms = spec_value(kw.pop("bottom_name_list", kw.pop("bottom_name", None)), call, "bottom_name_list")
    tops = spec_value(kw.pop("top_name_list", None), call, "top_name_list")
    if isinstance(bottoms, str):
        raise Refusal("GroupDenseLayer(bottom_name=<one name>) (3.3's form) has no spec field; 3.3.1 and later "
                      "take bottom_name_list", call.line)
    out: dict = {"type": member, "bottom": bottoms[0] if len(bottoms) == 1 else bottoms, "top": tops,
                 "num_outputs": spec_value(kw.pop("num_outputs", None), call, "num_outputs")}
    if "last_act_type" in kw:
        out["last_act_type"] = _enum_member(kw.pop("last_act_type"), "Activation_t", call, "last_act_type")
    if kw:
        raise Refusal(f"GroupDenseLayer({next(iter(kw))}=...) has no spec field", call.line)
    return out


def fit(call: Call, release: str) -> dict:
    kw = kwargs_of(call)
    out: dict = {}
    extra: dict = {}
    for k, v in kw.items():
        if k in FIT_TYPED:
            out[k] = spec_value(v, call, k)
        else:
            extra[k] = spec_value(v, call, k)
    if "max_iter" not in out and "num_epochs" not in out:
        out["max_iter"] = api.default("Model.fit", "max_iter", release)  # hugectr.md §1.9
    if extra:
        out["args"] = extra
    return out


def input(st: ImportState, call: Call, spec: dict) -> Features:
    kw = kwargs_of(call)
    line = call.line
    params = kw.pop("data_reader_sparse_param_array", None)
    if not isinstance(params, list) or not all(isinstance(p, Call) and p.func == "DataReaderSparseParam"
                                               for p in params):
        raise Refusal("Input needs data_reader_sparse_param_array=[hugectr.DataReaderSparseParam(...), ...]",
                      line)
    labels: list[str]
    label_dim = 1
    if "label_names" in kw:
        labels = spec_value(kw.pop("label_names"), call, "label_names")
        dims = spec_value(kw.pop("label_dims", [1] * len(labels)), call, "label_dims")
        if any(d != 1 for d in dims):
            raise Refusal(f"label_dims {dims}: only labels of dimension 1 have a spec field", line)
    else:
        labels = [spec_value(kw.pop("label_name", "label"), call, "label_name")]
        label_dim = spec_value(kw.pop("label_dim", 1), call, "label_dim")
    dense_dim = spec_value(kw.pop("dense_dim", 0), call, "dense_dim")
    dense_name = spec_value(kw.pop("dense_name", "dense"), call, "dense_name")
    if kw:
        k = next(iter(kw))
        raise Refusal(f"Input({k}=...) has no spec field yet", line)
    inp: dict = {}
    if len(labels) == 1:
        inp["label_name"] = labels[0]
        if label_dim != 1:
            inp["label_dim"] = label_dim
    inp["dense_name"] = dense_name
    sparse, slots_per_input = _sparse_inputs(params)
    slot_total = sum(n for _, n, _ in slots_per_input)
    # Column names: C1..Cn over all slots in order, I1..In for dense, the labels as written.
    cols = [f"C{i + 1}" for i in range(slot_total)]
    pos = 0
    if len(sparse) > 1:
        for entry, (_, n, _) in zip(sparse, slots_per_input):
            entry["columns"] = cols[pos:pos + n]
            pos += n
    inp["sparse"] = sparse
    spec["input"] = inp
    if len(labels) > 1:
        spec["features"] = {"label": labels}
    categorical = _categorical(st, slots_per_input, cols, _cardinalities(st, slots_per_input, slot_total, line))
    continuous = tuple(Column(f"I{i + 1}", "float32") for i in range(int(dense_dim)))
    label_cols = tuple(Column(n, "float32") for n in labels)
    if st.i64 and spec.get("data", {}).get("format", "parquet") != "parquet":
        # Norm and Raw files record no key width: the spec says it (the lock's dtype describes Parquet only).
        spec.setdefault("solver", {})["i64_input_key"] = True
    return Features(categorical=categorical, continuous=continuous, labels=label_cols,
                    source_kind="imported", provenance=f"imported from {st.source_label}")


def _sparse_inputs(params: list[Call]) -> tuple[list[dict], list[tuple]]:
    """The DataReaderSparseParams -> the spec's ``input.sparse`` entries, and (name, slot_num, nnz_per_slot) each."""
    sparse = []
    slots_per_input = []
    for p in params:
        pk = kwargs_of(p)
        name = spec_value(pk.get("top_name"), p, "top_name")
        for arg in ("nnz_per_slot", "is_fixed_length"):   # required in every release (the API table)
            if arg not in pk:
                raise Refusal(f"hugectr.DataReaderSparseParam without {arg}, which HugeCTR requires (the source "
                              "stops there with a TypeError)", p.line, f"pass {arg}")
        nnz = spec_value(pk["nnz_per_slot"], p, "nnz_per_slot")
        fixed = spec_value(pk["is_fixed_length"], p, "is_fixed_length")
        slot_num = spec_value(pk.get("slot_num"), p, "slot_num")
        if not isinstance(slot_num, int):
            raise Refusal("DataReaderSparseParam without slot_num", p.line)
        entry: dict = {"name": name, "nnz_per_slot": nnz, "is_fixed_length": bool(fixed)}
        sparse.append(entry)
        slots_per_input.append((name, slot_num, nnz))
    return sparse, slots_per_input


def _categorical(st: ImportState, slots_per_input: list[tuple], cols: list[str],
                 cards: list[int] | None) -> tuple[Column, ...]:
    """The lock's categorical columns, one per slot: its key width, cardinality and hotness."""
    dtype = "int64" if st.i64 else "int32"
    categorical = []
    pos = 0
    for _name, n, nnz in slots_per_input:
        for k in range(n):
            width = nnz[k] if isinstance(nnz, list) else nnz
            card = cards[pos] if cards else None
            categorical.append(Column(cols[pos], dtype, cardinality=card if card else None,
                                      multi_hot=width > 1, max_len=width if width > 1 else None))
            pos += 1
    return tuple(categorical)


def _cardinalities(st: ImportState, inputs, total: int, line: int) -> list[int] | None:
    cards = st.slot_sizes
    for bottom, sizes, eline in st.embedding_sizes:
        pos = 0
        for name, n, _ in inputs:
            if name == bottom:
                if len(sizes) != n:
                    raise Refusal(f"SparseEmbedding slot_size_array has {len(sizes)} entries for {n} slots",
                                  eline)
                if cards is None:
                    cards = [0] * total
                if cards[pos:pos + n] != sizes and any(cards[pos:pos + n]):
                    raise Refusal("SparseEmbedding slot_size_array differs from the reader's", eline)
                cards = [*cards[:pos], *sizes, *cards[pos + n:]]
            pos += n
    if cards is not None and len(cards) != total:
        raise Refusal(f"slot_size_array has {len(cards)} entries for {total} slots", line)
    return cards


def _writes_no_weights(training: dict, then: list[dict], release: str) -> bool:
    """Whether the imported fit writes no snapshot and nothing saves the weights after it (then the generated script
    must not save them either: ``training.save_weights: false``)."""
    max_iter = training.get("max_iter")
    snapshot = api.given_or_default(training, "Model.fit", "snapshot", release)
    if not isinstance(max_iter, int) or not isinstance(snapshot, int) or "num_epochs" in training:
        return False
    writes = snapshot > 0 and (max_iter - 1) // snapshot > 0
    return not writes and not any(entry["method"] == "save_params_to_files" for entry in then)


def _reader_check(rc: dict, model_call: Call) -> dict:
    """The calls made after get_data_reader_*() -> reader_check: the shortest run of calls they repeat."""
    calls = rc["calls"]
    if not calls:
        raise Refusal(f"model.get_data_reader_{rc['reader']}() and no batch is read from it", model_call.line)
    n = len(calls)
    period = next(p for p in range(1, n + 1) if n % p == 0 and calls == calls[:p] * (n // p))
    return {"reader": rc["reader"], "batches": n // period, "each_batch": calls[:period]}

