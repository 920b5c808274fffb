"""A graph JSON written by HugeCTR's ``model.graph_to_json`` -> spec + features lock (hugectr.md §2).

The JSON is read field by field into the spec fields that make ``ctrgen generate`` write it again: the Data layer ->
``input`` and the lock's columns (C1..Cn, I1..In, the labels as written), embedding layers -> ``embeddings`` (with
``slot_size_array`` -> the lock's cardinalities), the embeddings' optimizer block -> ``optimizer`` (float32 values
back to the shortest decimal that widens to them), dense layers -> an explicit ``model.layers`` list without the
Slice layers HugeCTR's graph_analysis() inserted (§2.7), ``max_vocabulary_size_global`` -> the GPU count of
``solver.vvgpu`` (§2.8 inverted), ``model_name`` -> ``solver.model_name``.

Nothing in the JSON names the data, the solver's batch sizes or the training loop: those get placeholders, listed in
the result's assumptions. The release is read from the fields that differ between releases (§2.9) unless given.

Every candidate spec is generated in memory and its JSON compared with the imported bytes: an import either
reproduces the file byte for byte or is refused with one line naming the first field that differs.
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import Located, Problem, UserError
from ..features import Column, Features
from ..hugectr import versions as V
from ..render.graph_json import f32
from . import ImportResult, _NAME, _finish, default_name
from .to_spec import Imported

EMBEDDING_TYPES = tuple(V.EMBEDDINGS)
HPARAM_BLOCKS = {  # optimizer type -> (JSON block, fields) (hugectr.md §2.5)
    "Adam": ("adam_hparam", ("beta1", "beta2", "epsilon")),
    "AdaGrad": ("adagrad_hparam", ("epsilon", "initial_accu_value")),
    "MomentumSGD": ("momentum_sgd_hparam", ("momentum_factor",)),
    "Nesterov": ("nesterov_hparam", ("momentum_factor",)),
    "SGD": ("sgd_hparam", ("atomic_update",)),
    "Ftrl": ("ftrl_hparam", ("beta", "lambda1", "lambda2")),
}
OPTIMIZER_DEFAULTS = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-7, "initial_accu_value": 0.0,
                      "momentum_factor": 0.0, "atomic_update": True, "beta": 0.0, "lambda1": 0.0, "lambda2": 0.0}
INITS = ("Uniform", "XavierNorm", "XavierUniform", "Zero")
# DenseLayer arguments written into the spec even when they equal HugeCTR's default (the samples write them).
ALWAYS_WRITTEN = {"num_output", "leading_dim", "num_layers", "out_dim", "weight_dims", "ranges", "selected_slots",
                  "indices", "num_outputs", "dropout_rate"}
_MISSING = object()


def Bad(field: str, message: str, fix: str = "") -> Located:  # noqa: N802 - raised like the class it replaced
    """The JSON is not what graph_to_json writes (any release): refused at once."""
    return Located(message, fix=fix, field=field)


class Misfit(Exception):
    """The JSON is not what one release writes; ``stage`` orders the reasons (later = closer to a fit)."""

    def __init__(self, field: str, message: str, stage: int = 0):
        super().__init__(message)
        self.field, self.message, self.stage = field, message, stage


# ---- reading the document (release-independent) ----------------------------------------------------------------

def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int(v: object, where: str, minimum: int = 0) -> int:
    if not _is_int(v) or v < minimum:
        raise Bad(where, f"expected an integer >= {minimum}, got {_show(v)}")
    return v


def _str(v: object, where: str) -> str:
    if not isinstance(v, str) or not v:
        raise Bad(where, f"expected a non-empty string, got {_show(v)}")
    return v


def _bool(v: object, where: str) -> bool:
    if not isinstance(v, bool):
        raise Bad(where, f"expected true or false, got {_show(v)}")
    return v


def _names(v: object, where: str) -> str | list[str]:
    """A layer's bottom / top: a string for one name, an array for several (hugectr.md §2.6)."""
    if isinstance(v, str) and v:
        return v
    if isinstance(v, list) and len(v) > 1 and all(isinstance(x, str) and x for x in v):
        return list(v)
    raise Bad(where, f"expected a tensor name or an array of several, got {_show(v)}")


def _show(v: object, limit: int = 60) -> str:
    if v is _MISSING:
        return "nothing"
    text = json.dumps(v, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def decimal_of_f32(v: object, where: str) -> float:
    """The shortest decimal that a C++ float widens to ``v`` from (0.8999999761581421 -> 0.9; hugectr.md §2.2)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(float(v)):
        raise Bad(where, f"expected a number, got {_show(v)}")
    d = float(v)
    if f32(d) != d:
        raise Bad(where, f"{v!r} is not a float32 value widened to double, which is what graph_to_json writes")
    for digits in range(1, 18):
        candidate = float(f"{d:.{digits}g}")
        if f32(candidate) == d:
            return candidate
    return d  # pragma: no cover - 9 significant digits always identify a float32


def _keys(obj: object, where: str, required: set[str], optional: set[str] = frozenset(), what: str = "") -> dict:
    if not isinstance(obj, dict):
        raise Bad(where, f"expected an object, got {_show(obj)}")
    missing = sorted(required - set(obj))
    if missing:
        raise Bad(where, f"{what or 'object'} without {', '.join(repr(k) for k in missing)}")
    extra = sorted(set(obj) - required - set(optional))
    if extra:
        raise Bad(f"{where}.{extra[0]}" if where else extra[0],
                  f"graph_to_json writes no {extra[0]!r} {('for ' + what) if what else 'here'}")
    return obj


@dataclass
class Reading:
    """What the JSON says, before a release is chosen."""

    model_name: str | None
    labels: list[str]
    label_dims: list[int]
    label_arrays: bool
    dense_name: str
    dense_dim: int
    sparse: list[dict]            # {name, nnz: list, fixed, slot_num, typed}
    embeddings: list[dict]        # {name, input, type, vec, combiner, ws, vocab, sizes, index}
    optimizer: dict               # the OptimizerSpec fields
    optimizer_type: str
    update_type: str
    layers: list[dict]            # {type, bottom, top, params, index, json}
    first_dense: int              # index of the first dense layer in "layers"


def read_document(doc: object) -> Reading:
    if isinstance(doc, dict) and ({"solver", "optimizer", "inference"} & set(doc)):
        raise Bad("", "a hand-written HugeCTR JSON config (solver/optimizer blocks), not what model.graph_to_json "
                      "writes", "import the script that trains the model, or the JSON its graph_to_json writes")
    if not isinstance(doc, dict):
        raise Bad("", f"a JSON {type(doc).__name__.replace('dict', 'object').replace('list', 'array')}, not a graph "
                      "JSON (an object with \"layers\")", "give the file model.graph_to_json wrote")
    if "layers" not in doc:
        raise Bad("", "a JSON object without \"layers\": not what model.graph_to_json writes",
                  "give the file model.graph_to_json wrote")
    _keys(doc, "", {"layers"}, {"model_name"}, "a graph JSON")
    model_name = None
    if "model_name" in doc:
        model_name = _str(doc["model_name"], "model_name")
    layers = doc["layers"]
    if not isinstance(layers, list):
        raise Bad("layers", f"expected an array of layers, got {_show(layers)}")
    for i, layer in enumerate(layers):
        if not isinstance(layer, dict) or not isinstance(layer.get("type"), str):
            raise Bad(f"layers[{i}]", f"expected a layer object with a \"type\", got {_show(layer)}")
        if "name" in layer:
            raise Bad(f"layers[{i}].name", "layers with a \"name\" are a hand-written HugeCTR JSON config, not what "
                                           "model.graph_to_json writes",
                      "import the script that trains the model, or the JSON its graph_to_json writes")
    data_at = [i for i, layer in enumerate(layers) if layer["type"] == "Data"]
    if not data_at:
        raise Bad("layers", "no Data layer: graph_to_json writes the Data layer first",
                  "give the file model.graph_to_json wrote")
    if data_at != [0]:
        raise Bad(f"layers[{data_at[-1] if data_at[0] == 0 else data_at[0]}]",
                  "the Data layer must be the first layer and the only one")
    r = _read_data(layers[0])
    i = 1
    embeddings = []
    while i < len(layers) and layers[i]["type"] in EMBEDDING_TYPES:
        embeddings.append(_read_embedding(layers[i], i))
        i += 1
    if not embeddings:
        raise Bad(f"layers[{i}]" if i < len(layers) else "layers",
                  "no embedding layer after the Data layer: a HugeCTR model has at least one SparseEmbedding")
    first_dense = i
    dense = []
    for j in range(first_dense, len(layers)):
        t = layers[j]["type"]
        if t in EMBEDDING_TYPES:
            raise Bad(f"layers[{j}]", f"embedding layer {t} after a dense layer: graph_to_json writes all embeddings "
                                      "first")
        if t not in V.LAYERS:
            raise Bad(f"layers[{j}].type", f"unknown layer type {t!r} (no HugeCTR release has it)")
        dense.append(_read_dense(layers[j], j))
    if not dense:
        raise Bad("layers", "no dense layers: a HugeCTR model ends with a loss layer")
    opt, opt_type, update = _read_optimizers(layers, embeddings)
    return Reading(model_name=model_name, optimizer=opt, optimizer_type=opt_type, update_type=update,
                   embeddings=embeddings, layers=dense, first_dense=first_dense, **r)


def _read_data(layer: dict) -> dict:
    w = "layers[0]"
    _keys(layer, w, {"type", "label", "dense", "sparse"}, set(), "the Data layer")
    label = _keys(layer["label"], f"{w}.label", {"label_dim", "top"}, set(), "label")
    if isinstance(label["top"], list):
        labels = [_str(x, f"{w}.label.top") for x in label["top"]]
        dims = label["label_dim"]
        if not isinstance(dims, list) or len(dims) != len(labels) or len(labels) < 2:
            raise Bad(f"{w}.label", "label arrays must name two or more labels with one label_dim each")
        dims = [_int(d, f"{w}.label.label_dim", 1) for d in dims]
        arrays = True
    else:
        labels = [_str(label["top"], f"{w}.label.top")]
        dims = [_int(label["label_dim"], f"{w}.label.label_dim", 1)]
        arrays = False
    for n, d in zip(labels, dims):
        if d != 1:
            raise Bad(f"{w}.label.label_dim", f"label {n!r} has dimension {d}; only labels of dimension 1 have a spec "
                                              "field")
    dense = _keys(layer["dense"], f"{w}.dense", {"dense_dim", "top"}, set(), "dense")
    sparse = layer["sparse"]
    if not isinstance(sparse, list) or not sparse:
        raise Bad(f"{w}.sparse", "expected a non-empty array of sparse inputs")
    out = []
    for k, s in enumerate(sparse):
        ws = f"{w}.sparse[{k}]"
        _keys(s, ws, {"is_fixed_length", "nnz_per_slot", "slot_num", "top"}, {"type"}, "a sparse input")
        if "type" in s and s["type"] != "DistributedSlot":
            raise Bad(f"{ws}.type", f"graph_to_json writes \"DistributedSlot\" here, not {_show(s['type'])}")
        slot_num = _int(s["slot_num"], f"{ws}.slot_num", 1)
        nnz = s["nnz_per_slot"]
        if not isinstance(nnz, list) or len(nnz) != slot_num:
            raise Bad(f"{ws}.nnz_per_slot", f"graph_to_json writes one value per slot ({slot_num}), got {_show(nnz)}")
        out.append({"name": _str(s["top"], f"{ws}.top"), "nnz": [_int(x, f"{ws}.nnz_per_slot", 1) for x in nnz],
                    "fixed": _bool(s["is_fixed_length"], f"{ws}.is_fixed_length"), "slot_num": slot_num,
                    "typed": "type" in s})
    if len({s["typed"] for s in out}) > 1:
        raise Bad(f"{w}.sparse", "some sparse inputs have a \"type\" and some do not; every release writes it on all "
                                 "or none")
    return {"labels": labels, "label_dims": dims, "label_arrays": arrays,
            "dense_name": _str(dense["top"], f"{w}.dense.top"),
            "dense_dim": _int(dense["dense_dim"], f"{w}.dense.dense_dim"), "sparse": out}


def _read_embedding(layer: dict, i: int) -> dict:
    w = f"layers[{i}]"
    _keys(layer, w, {"type", "bottom", "top", "sparse_embedding_hparam", "optimizer"}, set(), layer["type"])
    if layer["type"] == "HybridSparseEmbedding":
        raise Bad(f"{w}.type", "HybridSparseEmbedding needs the RawAsync reader, which ctrgen does not generate")
    h = _keys(layer["sparse_embedding_hparam"], f"{w}.sparse_embedding_hparam",
              {"combiner", "embedding_vec_size", "max_vocabulary_size_global", "workspace_size_per_gpu_in_mb"},
              {"slot_size_array"}, "an embedding")
    wh = f"{w}.sparse_embedding_hparam"
    if h["combiner"] not in ("sum", "mean"):
        raise Bad(f"{wh}.combiner", f"expected \"sum\" or \"mean\", got {_show(h['combiner'])}")
    sizes = None
    if "slot_size_array" in h:
        sizes = h["slot_size_array"]
        if not isinstance(sizes, list) or not sizes:
            raise Bad(f"{wh}.slot_size_array", f"expected a non-empty array, got {_show(sizes)}")
        sizes = [_int(x, f"{wh}.slot_size_array", 1) for x in sizes]
    return {"name": _str(layer["top"], f"{w}.top"), "input": _str(layer["bottom"], f"{w}.bottom"),
            "type": layer["type"], "vec": _int(h["embedding_vec_size"], f"{wh}.embedding_vec_size", 1),
            "combiner": h["combiner"],
            "ws": _int(h["workspace_size_per_gpu_in_mb"], f"{wh}.workspace_size_per_gpu_in_mb"),
            "vocab": _int(h["max_vocabulary_size_global"], f"{wh}.max_vocabulary_size_global"), "sizes": sizes,
            "index": i, "optimizer": layer["optimizer"]}


def _read_optimizers(layers: list[dict], embeddings: list[dict]) -> tuple[dict, str, str]:
    first = embeddings[0]
    for e in embeddings[1:]:
        if e["optimizer"] != first["optimizer"]:
            raise Bad(f"layers[{e['index']}].optimizer", "differs from the first embedding's: per-embedding optimizers "
                                                         "have no spec field", "import the script that trains it")
    w = f"layers[{first['index']}].optimizer"
    block = first["optimizer"]
    if not isinstance(block, dict) or block.get("update_type") not in ("Global", "Local", "LazyGlobal"):
        raise Bad(f"{w}.update_type", "expected \"Global\", \"Local\" or \"LazyGlobal\"")
    out: dict = {}
    if "type" not in block:  # RMSProp: the writer has no case for it, only update_type is written (§2.5)
        _keys(block, w, {"update_type"}, set(), "an RMSProp optimizer")
        out["type"] = "RMSProp"
    else:
        t = block["type"]
        if t not in HPARAM_BLOCKS:
            raise Bad(f"{w}.type", f"unknown optimizer type {_show(t)}")
        name, fields = HPARAM_BLOCKS[t]
        _keys(block, w, {"type", "update_type", name}, set(), f"a {t} optimizer")
        hp = _keys(block[name], f"{w}.{name}", set(fields), set(), name)
        out["type"] = t
        for f in fields:
            if f == "atomic_update":
                value: object = _bool(hp[f], f"{w}.{name}.{f}")
            else:
                value = decimal_of_f32(hp[f], f"{w}.{name}.{f}")
            if value != OPTIMIZER_DEFAULTS[f]:
                out[f] = value
    out["update_type"] = block["update_type"]
    ordered = {"type": out.pop("type"), "update_type": out.pop("update_type"), **out}
    return ordered, ordered["type"], ordered["update_type"]


def _init(block: dict, key: str, where: str) -> str | None:
    if key not in block:
        return None
    if block[key] not in INITS:
        raise Bad(f"{where}.{key}", f"expected one of {list(INITS)}, got {_show(block[key])}")
    return block[key]


def _read_dense(layer: dict, i: int) -> dict:
    """A dense layer -> DenseLayer arguments (the inverse of codegen.render.graph_json._dense_layer)."""
    w = f"layers[{i}]"
    t = layer["type"]
    what = f"{t} layers"
    base = {"type", "bottom", "top"}
    for k in base:
        if k not in layer:
            raise Bad(w, f"{t} layer without {k!r}")
    p: dict = {}

    def inits(block: dict, where: str, weight: str = "weight_init", bias: str = "bias_init",
              weight_arg: str = "weight_init_type", bias_arg: str = "bias_init_type") -> None:
        if (v := _init(block, weight, where)) is not None:
            p[weight_arg] = v
        if (v := _init(block, bias, where)) is not None:
            p[bias_arg] = v

    def floats(v: object, where: str) -> float:
        return decimal_of_f32(v, where)

    if t == "BatchNorm":
        _keys(layer, w, base | {"bn_param"}, set(), what)
        bn = _keys(layer["bn_param"], f"{w}.bn_param", {"eps", "factor"}, {"gamma_init", "beta_init"}, "bn_param")
        p["eps"], p["factor"] = floats(bn["eps"], f"{w}.bn_param.eps"), floats(bn["factor"], f"{w}.bn_param.factor")
        inits(bn, f"{w}.bn_param", "gamma_init", "beta_init", "gamma_init_type", "beta_init_type")
    elif t == "LayerNorm":
        _keys(layer, w, base | {"ln_param"}, set(), what)
        ln = _keys(layer["ln_param"], f"{w}.ln_param", {"eps"}, {"gamma_init", "beta_init"}, "ln_param")
        p["eps"] = floats(ln["eps"], f"{w}.ln_param.eps")
        inits(ln, f"{w}.ln_param", "gamma_init", "beta_init", "gamma_init_type", "beta_init_type")
    elif t == "Dropout":
        _keys(layer, w, base | {"rate"}, set(), what)
        p["dropout_rate"] = floats(layer["rate"], f"{w}.rate")
    elif t == "SequenceMask":
        _keys(layer, w, base, {"max_sequence_len", "max_sequence_len_from", "max_sequence_len_to"}, what)
        if "max_sequence_len" in layer:
            p["max_sequence_len"] = _int(layer["max_sequence_len"], f"{w}.max_sequence_len", 1)
        else:
            raise Bad(w, "SequenceMask with max_sequence_len_from/_to is written by HugeCTR 23.08 and later; ctrgen "
                         f"supports {', '.join(V.SUPPORTED)}")
    elif t == "ELU":
        _keys(layer, w, base | {"elu_param"}, set(), what)
        elu = _keys(layer["elu_param"], f"{w}.elu_param", {"alpha"}, set(), "elu_param")
        p["elu_alpha"] = floats(elu["alpha"], f"{w}.elu_param.alpha")
    elif t == "MultiHeadAttention":
        _keys(layer, w, base | {"num_attention_heads", "transpose_b"}, set(), what)
        p["num_attention_heads"] = _int(layer["num_attention_heads"], f"{w}.num_attention_heads", 1)
        p["transpose_b"] = _bool(layer["transpose_b"], f"{w}.transpose_b")
    elif t == "MLP":
        _keys(layer, w, base | {"mlp_param"}, set(), what)
        m = _keys(layer["mlp_param"], f"{w}.mlp_param", {"num_output", "num_outputs"},
                  {"activation", "activations", "biases", "use_bias", "weight_init", "bias_init"}, "mlp_param")
        wm = f"{w}.mlp_param"
        p["num_output"] = _int(m["num_output"], f"{wm}.num_output", 1)
        outs = m["num_outputs"]
        if not isinstance(outs, list):
            raise Bad(f"{wm}.num_outputs", f"expected an array, got {_show(outs)}")
        p["num_outputs"] = [_int(x, f"{wm}.num_outputs", 1) for x in outs]
        act = {"Relu": "Relu", "None": "Non"}
        if "activations" in m:
            acts = m["activations"]
            if "activation" in m or not isinstance(acts, list) or any(a not in act for a in acts):
                raise Bad(f"{wm}.activations", "expected an array of \"Relu\" / \"None\" (and no \"activation\")")
            p["activations"] = [act[a] for a in m["activations"]]
        elif m.get("activation") in act:
            p["act_type"] = act[m["activation"]]
        else:
            raise Bad(f"{wm}.activation", "expected \"Relu\" or \"None\"")
        if "biases" in m:
            if "use_bias" in m or not isinstance(m["biases"], list):
                raise Bad(f"{wm}.biases", "expected an array of booleans (and no \"use_bias\")")
            p["biases"] = [_bool(b, f"{wm}.biases") for b in m["biases"]]
        elif "use_bias" in m:
            p["use_bias"] = _bool(m["use_bias"], f"{wm}.use_bias")
        else:
            raise Bad(wm, "mlp_param without \"use_bias\" or \"biases\"")
        inits(m, wm)
    elif t == "FusedInnerProduct":
        _keys(layer, w, base | {"activation", "fc_param", "position"}, set(), what)
        fc = _keys(layer["fc_param"], f"{w}.fc_param", {"num_output"}, {"weight_init", "bias_init"}, "fc_param")
        p["num_output"] = _int(fc["num_output"], f"{w}.fc_param.num_output", 1)
        inits(fc, f"{w}.fc_param")
        acts = {"Relu": "Relu", "None": "Non"}
        if layer["activation"] not in acts:
            raise Bad(f"{w}.activation", "expected \"Relu\" or \"None\"")
        p["act_type"] = acts[layer["activation"]]
        pos = {"None": "Non", "Head": "Head", "Body": "Body", "Tail": "Tail", "Isolated": "Isolated"}
        if layer["position"] not in pos:
            raise Bad(f"{w}.position", f"expected one of {list(pos)}")
        p["pos_type"] = pos[layer["position"]]
    elif t == "InnerProduct":
        _keys(layer, w, base | {"fc_param"}, set(), what)
        fc = _keys(layer["fc_param"], f"{w}.fc_param", {"num_output"}, {"weight_init", "bias_init"}, "fc_param")
        p["num_output"] = _int(fc["num_output"], f"{w}.fc_param.num_output", 1)
        inits(fc, f"{w}.fc_param")
    elif t == "MultiCross":
        _keys(layer, w, base | {"mc_param"}, set(), what)
        mc = _keys(layer["mc_param"], f"{w}.mc_param", {"num_layers"}, {"weight_init", "bias_init"}, "mc_param")
        p["num_layers"] = _int(mc["num_layers"], f"{w}.mc_param.num_layers", 1)
        inits(mc, f"{w}.mc_param")
    elif t == "Reshape":
        if "selected" in layer:
            _keys(layer, w, base | {"selected"}, set(), what)
            sel = layer["selected"]
            if not isinstance(sel, list):
                raise Bad(f"{w}.selected", f"expected an array of slots, got {_show(sel)}")
            p["selected"] = True
            p["selected_slots"] = [_int(x, f"{w}.selected") for x in sel]
        else:
            _keys(layer, w, base | {"leading_dim", "time_step"}, set(), what)
            p["leading_dim"] = _int(layer["leading_dim"], f"{w}.leading_dim", 1)
            p["time_step"] = _int(layer["time_step"], f"{w}.time_step")
    elif t == "Concat":
        _keys(layer, w, base, {"axis"}, what)
        if "axis" in layer:
            p["axis"] = _int(layer["axis"], f"{w}.axis")
    elif t == "Slice":
        _keys(layer, w, base | {"ranges"}, set(), what)
        ranges = layer["ranges"]
        if not isinstance(ranges, list) or not ranges or not all(
                isinstance(r, list) and len(r) == 2 and all(_is_int(x) for x in r) for r in ranges):
            raise Bad(f"{w}.ranges", f"expected an array of [begin, end] pairs, got {_show(ranges)}")
        p["ranges"] = [list(r) for r in ranges]
    elif t == "WeightMultiply":
        _keys(layer, w, base | {"weight_dims"}, {"weight_init"}, what)
        dims = layer["weight_dims"]
        if not isinstance(dims, list):
            raise Bad(f"{w}.weight_dims", f"expected an array, got {_show(dims)}")
        p["weight_dims"] = [_int(x, f"{w}.weight_dims", 1) for x in dims]
        if (v := _init(layer, "weight_init", w)) is not None:
            p["weight_init_type"] = v
    elif t == "FmOrder2":
        _keys(layer, w, base | {"out_dim"}, set(), what)
        p["out_dim"] = _int(layer["out_dim"], f"{w}.out_dim", 1)
    elif t in ("ReduceSum", "ReduceMean"):
        _keys(layer, w, base | {"axis"}, set(), what)
        p["axis"] = _int(layer["axis"], f"{w}.axis")
    elif t == "Gather":
        _keys(layer, w, base | {"indices"}, set(), what)
        idx = layer["indices"]
        if not isinstance(idx, list):
            raise Bad(f"{w}.indices", f"expected an array, got {_show(idx)}")
        p["indices"] = [_int(x, f"{w}.indices") for x in idx]
    elif t == "GRU":
        _keys(layer, w, base | {"gru_param"}, set(), what)
        g = _keys(layer["gru_param"], f"{w}.gru_param", {"SeqLength", "batchsize", "num_output", "vector_size"},
                  {"weight_init", "bias_init"}, "gru_param")
        for k in ("SeqLength", "batchsize", "num_output", "vector_size"):
            p[k] = _int(g[k], f"{w}.gru_param.{k}", 1)
        inits(g, f"{w}.gru_param")
    elif t == "PReLU_Dice":
        _keys(layer, w, base | {"prelu_dice_param"}, set(), what)
        pd = _keys(layer["prelu_dice_param"], f"{w}.prelu_dice_param", {"alpha", "eps"}, set(), "prelu_dice_param")
        p["elu_alpha"] = floats(pd["alpha"], f"{w}.prelu_dice_param.alpha")
        p["eps"] = floats(pd["eps"], f"{w}.prelu_dice_param.eps")
    elif t == "Scale":
        _keys(layer, w, base | {"scale_param"}, set(), what)
        sc = _keys(layer["scale_param"], f"{w}.scale_param", {"axis", "factor"}, set(), "scale_param")
        p["axis"] = _int(sc["axis"], f"{w}.scale_param.axis")
        p["factor"] = floats(sc["factor"], f"{w}.scale_param.factor")
    elif t == "Softmax":
        _keys(layer, w, base, {"factor"}, what)
        if "factor" in layer:
            p["factor"] = floats(layer["factor"], f"{w}.factor")
    elif t in ("BinaryCrossEntropyLoss", "CrossEntropyLoss", "MultiCrossEntropyLoss"):
        extra = {"lambda", "regularizer"} | ({"target_weight"} if t == "MultiCrossEntropyLoss" else set())
        _keys(layer, w, base, extra, what)
        if ("lambda" in layer) != ("regularizer" in layer):
            raise Bad(w, "graph_to_json writes \"lambda\" and \"regularizer\" together")
        if "lambda" in layer:
            if layer["regularizer"] not in ("L1", "L2"):
                raise Bad(f"{w}.regularizer", "expected \"L1\" or \"L2\"")
            p["use_regularizer"] = True
            p["regularizer_type"] = layer["regularizer"]
            p["lambda"] = floats(layer["lambda"], f"{w}.lambda")
        if "target_weight" in layer:
            tw = layer["target_weight"]
            if not isinstance(tw, list) or not tw:
                raise Bad(f"{w}.target_weight", f"expected a non-empty array, got {_show(tw)}")
            p["target_weight_vec"] = [floats(x, f"{w}.target_weight") for x in tw]
    else:
        _keys(layer, w, base, set(), what)
    bottom = _names(layer["bottom"], f"{w}.bottom")
    top = _names(layer["top"], f"{w}.top")
    d = V.dense_layer_defaults(list(V.RELEASES)[-1])  # read before the release is chosen; DenseLayer defaults are
                                                      # the same in every release for the keys the writer writes
    params = {k: v for k, v in p.items() if k in ALWAYS_WRITTEN or (t in ("ReduceSum", "ReduceMean") and k == "axis")
              or k not in d or v != d[k] or type(v) is not type(d[k])}
    return {"type": t, "bottom": bottom, "top": top, "params": params, "index": i, "json": layer}


# ---- one release ---------------------------------------------------------------------------------------------

def _bottoms(layer: dict) -> list[str]:
    b = layer["bottom"]
    return [b] if isinstance(b, str) else list(b)


def _tops(layer: dict) -> list[str]:
    t = layer["top"]
    return [t] if isinstance(t, str) else list(t)


def undo_auto_slices(layers: list[dict]) -> tuple[list[dict], list[str]]:
    """Drop the Slice layers graph_analysis() inserts (``<t>_slice<k>`` for each use of a multi-use tensor ``t``,
    full-width ranges; hugectr.md §2.7) and give their consumers the original bottom back."""
    rename: dict[str, str] = {}
    dropped: list[str] = []
    out: list[dict] = []
    for layer in layers:
        if layer["type"] == "Slice" and isinstance(layer["bottom"], str):
            t, tops = layer["bottom"], _tops(layer)
            ranges = layer["params"].get("ranges", [])
            widths = {tuple(r) for r in ranges}
            if (len(tops) >= 2 and tops == [f"{t}_slice{k}" for k in range(len(tops))] and len(widths) == 1
                    and next(iter(widths))[0] == 0 and len(ranges) == len(tops)):
                rename.update({top: t for top in tops})
                dropped.append(t)
                continue
        out.append(layer)
    if not dropped:
        return layers, []
    fixed = []
    for layer in out:
        b = [rename.get(x, x) for x in _bottoms(layer)]
        fixed.append({**layer, "bottom": b[0] if len(b) == 1 else b})
    return fixed, dropped


def _prechecks(r: Reading, p: V.Profile) -> None:
    """The fields that tell releases apart (hugectr.md §2.9), checked before anything is built."""
    rel = p.name
    if r.model_name is not None and not p.has("model_name"):
        raise Misfit("model_name", f"HugeCTR {rel} writes no model_name ({V.BEHAVIOUR['model_name'].describe()} "
                                   "does)")
    typed = r.sparse[0]["typed"]
    if typed != p.has("sparse_type_key"):
        span = V.BEHAVIOUR["sparse_type_key"].describe()
        raise Misfit("layers[0].sparse[0].type", f"HugeCTR {rel} writes a sparse input's \"type\"; {span} writes it"
                     if not typed else f"HugeCTR {rel} writes no sparse-input \"type\" ({span} does)")
    if r.label_arrays and not p.has("multi_label"):
        raise Misfit("layers[0].label", f"several labels; HugeCTR {rel} takes one "
                                         f"({V.BEHAVIOUR['multi_label'].describe()} takes several)")
    if (msg := p.missing(V.OPTIMIZERS, r.optimizer_type, "optimizer")) is not None:
        raise Misfit(f"layers[{r.embeddings[0]['index']}].optimizer.type", msg)
    for layer in r.layers:
        w = f"layers[{layer['index']}]"
        if (msg := p.missing(V.LAYERS, layer["type"], "layer type")) is not None:
            raise Misfit(f"{w}.type", msg)
        if layer["type"] == "Concat" and ("axis" in layer["json"]) != p.has("concat_axis"):
            span = V.BEHAVIOUR["concat_axis"].describe()
            raise Misfit(f"{w}.axis", f"HugeCTR {rel} writes no Concat \"axis\" ({span} does)"
                         if "axis" in layer["json"] else f"HugeCTR {rel} writes a Concat \"axis\" ({span})")
        if layer["type"] == "Softmax" and ("factor" in layer["json"]) != (p.release >= (3, 9)):
            raise Misfit(f"{w}.factor", f"HugeCTR {rel} writes {'no' if 'factor' in layer['json'] else 'a'} Softmax "
                                        "\"factor\" (written from HugeCTR 3.9)")
    if p.has("auto_slice"):
        uses: dict[str, list[int]] = {}
        for layer in r.layers:
            for b in _bottoms(layer):
                uses.setdefault(b, []).append(layer["index"])
        for tensor, where in uses.items():
            if len(where) > 1:
                raise Misfit(f"layers[{where[1]}].bottom",
                             f"tensor {tensor!r} feeds {len(where)} layers (layers {', '.join(map(str, where))}); "
                             f"HugeCTR {rel} would have inserted a Slice for it ({V.BEHAVIOUR['auto_slice'].describe()}"
                             " does)")


def gpu_count(r: Reading, p: V.Profile) -> int | None:
    """The GPUs in vvgpu that make every embedding's max_vocabulary_size_global (hugectr.md §2.8) come out: the
    written value divided by the release's per-GPU value for the written workspace. None: any count fits."""
    found: int | None = None
    first_at = ""
    for e in r.embeddings:
        w = f"layers[{e['index']}].sparse_embedding_hparam.max_vocabulary_size_global"
        per = V.max_vocabulary_size_per_gpu(p, e["ws"], e["vec"], r.optimizer_type, r.update_type)
        if per == 0:
            if e["vocab"] != 0:
                raise Misfit(w, f"{e['vocab']} cannot come from workspace_size_per_gpu_in_mb {e['ws']}, which gives "
                                f"0 rows per GPU at HugeCTR {p.name}", 1)
            continue
        formula = _formula(p, e["ws"], e["vec"], r.optimizer_type, r.update_type)
        if e["vocab"] % per or e["vocab"] == 0:
            raise Misfit(w, f"{e['vocab']} is not a whole number of GPUs times {per} ({formula}); the value cannot "
                            f"be inverted at HugeCTR {p.name}", 1)
        g = e["vocab"] // per
        if found is not None and g != found:
            raise Misfit(w, f"{e['vocab']} = {g} GPUs x {per}, but {first_at} gives {found} GPUs; one solver has one "
                            "GPU count", 1)
        found, first_at = g, f"layers[{e['index']}]"
    return found


def _formula(p: V.Profile, ws: int, vec: int, opt: str, update: str) -> str:
    if not p.has("vocab_optimizer_states"):
        return f"HugeCTR {p.name}: {ws}*1024*1024 // (4*{vec}) per GPU"
    k = V.OPTIMIZER_STATES[opt] + (1 if opt == "Adam" and update == "LazyGlobal" else 0)
    return f"HugeCTR {p.name}: {ws}*1024*1024 // ((1+{k})*4*{vec}) per GPU for {opt}"


@dataclass
class Attempt:
    release: str
    result: ImportResult | None = None
    misfit: Misfit | None = None
    notes: list[str] = field(default_factory=list)


def _spec_for(r: Reading, p: V.Profile, name: str, layers: list[dict], gpus: int, label: str) -> Imported:
    notes: list[str] = []
    spec: dict = {"version": 1, "name": name, "hugectr_version": p.name}
    total = sum(s["slot_num"] for s in r.sparse)
    cols = [f"C{i + 1}" for i in range(total)]
    start = {}
    pos = 0
    for s in r.sparse:
        start[s["name"]] = pos
        pos += s["slot_num"]
    cards: list[int | None] = [None] * total
    for e in r.embeddings:
        if e["sizes"] is None or e["input"] not in start:
            continue
        s = next(s for s in r.sparse if s["name"] == e["input"])
        w = f"layers[{e['index']}].sparse_embedding_hparam.slot_size_array"
        if len(e["sizes"]) != s["slot_num"]:
            raise Bad(w, f"{len(e['sizes'])} entries for the {s['slot_num']} slots of {e['input']!r}")
        a = start[e["input"]]
        for k, size in enumerate(e["sizes"]):
            if cards[a + k] is not None and cards[a + k] != size:
                raise Bad(w, f"differs from another embedding's slot_size_array of {e['input']!r}")
            cards[a + k] = size
    one_hot = any(e["type"] == "LocalizedSlotSparseEmbeddingOneHot" for e in r.embeddings)
    known = all(c is not None for c in cards)
    fmt = "raw" if one_hot else "parquet" if known else "norm"
    spec["data"] = {"format": fmt, "train": ["./train/_file_list.txt"], "eval": "./valid/_file_list.txt"}
    notes.append(f"data: {fmt} reader with placeholder file lists ./train/_file_list.txt and ./valid/_file_list.txt "
                 "(a graph JSON names no data; " + ("slot_size_array gives every cardinality)" if fmt == "parquet" else
                 "not every slot has a cardinality)" if fmt == "norm" else "the one-hot embedding needs Raw data)"))
    solver: dict = {}
    if gpus > 1:
        solver["vvgpu"] = [list(range(gpus))]
        if 2048 % gpus:
            solver["batchsize"] = solver["batchsize_eval"] = 2048 * gpus
        notes.append(f"solver.vvgpu: {gpus} GPUs on one node (max_vocabulary_size_global = {gpus} x the per-GPU "
                     "value; the JSON does not say how they are spread over nodes)")
    if r.model_name is not None:
        solver["model_name"] = True
    if any(layer["type"] == "FusedInnerProduct" for layer in layers):
        solver["use_mixed_precision"] = True
        if p.release < (4, 0):
            solver["scaler"] = 1024.0
        notes.append("solver.use_mixed_precision: FusedInnerProduct layers run in half precision only")
    if solver:
        spec["solver"] = solver
    spec["optimizer"] = dict(r.optimizer)
    inp: dict = {}
    if not r.label_arrays:
        inp["label_name"] = r.labels[0]
    inp["dense_name"] = r.dense_name
    sparse = []
    for s in r.sparse:
        nnz = s["nnz"][0] if len(set(s["nnz"])) == 1 else list(s["nnz"])
        entry: dict = {"name": s["name"], "nnz_per_slot": nnz, "is_fixed_length": s["fixed"]}
        if len(r.sparse) > 1:
            entry["columns"] = cols[start[s["name"]]:start[s["name"]] + s["slot_num"]]
        sparse.append(entry)
    inp["sparse"] = sparse
    spec["input"] = inp
    if r.label_arrays:
        spec["features"] = {"label": list(r.labels)}
    embeddings = []
    for e in r.embeddings:
        entry = {"name": e["name"], "input": e["input"], "embedding_type": e["type"],
                 "embedding_vec_size": e["vec"], "combiner": e["combiner"],
                 "workspace_size_per_gpu_in_mb": e["ws"]}
        if e["sizes"] is not None:
            entry["slot_size_array"] = True
        embeddings.append(entry)
    spec["embeddings"] = embeddings
    spec["model"] = {"preset": "layers", "layers": [
        {"type": layer["type"], "bottom": layer["bottom"], "top": layer["top"], **layer["params"]} for layer in layers]}
    spec["triton"] = {"enabled": False}
    dtype = "int64" if fmt == "parquet" else "int32"
    categorical = []
    for s in r.sparse:
        for k in range(s["slot_num"]):
            i = start[s["name"]] + k
            width = s["nnz"][k]
            categorical.append(Column(cols[i], dtype, cardinality=cards[i], multi_hot=width > 1,
                                      max_len=width if width > 1 else None))
    features = Features(categorical=tuple(categorical),
                        continuous=tuple(Column(f"I{i + 1}", "float32") for i in range(r.dense_dim)),
                        labels=tuple(Column(n, "float32") for n in r.labels), source_kind="imported",
                        provenance=f"imported from {label}")
    return Imported(spec, features, [(None, n) for n in notes])


def regenerate(result: ImportResult) -> str:
    """The graph JSON ``ctrgen generate`` writes for an import's spec and lock (built as generate builds it)."""
    from ..features import read_lock
    from ..model.build import build_job
    from ..spec.context import open_spec
    from ..render.graph_json import render_graph_json

    with tempfile.TemporaryDirectory(prefix="ctrgen-import-") as tmp:
        spec = Path(tmp) / f"{result.name}.yaml"
        lock = Path(tmp) / f"{result.name}.features.lock.json"
        spec.write_text(result.spec_text, encoding="utf-8")
        lock.write_text(result.features.lock_text(), encoding="utf-8")
        return render_graph_json(build_job(open_spec(spec), read_lock(lock)))


def first_difference(a: object, b: object, path: str = "") -> tuple[str, object, object] | None:
    """The first place two parsed JSON documents differ (types included: 1 is not 1.0)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            sub = f"{path}.{k}" if path else k
            if k not in a or k not in b:
                return sub, a.get(k, _MISSING), b.get(k, _MISSING)
            if (d := first_difference(a[k], b[k], sub)) is not None:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            if (d := first_difference(x, y, f"{path}[{i}]")) is not None:
                return d
        if len(a) != len(b):
            return path, a, b
        return None
    if type(a) is type(b) and a == b:
        return None
    return path, a, b


def _byte_difference(raw: bytes, want: bytes) -> str:
    if raw.rstrip(b"\r\n") == want and raw != want:
        return "the file ends with a newline; graph_to_json writes none after the last '}'"
    if b"\r\n" in raw and raw.replace(b"\r\n", b"\n") == want:
        return "the file has CRLF line ends; graph_to_json writes LF"
    if raw.startswith(b"\xef\xbb\xbf"):
        return "the file starts with a byte-order mark; graph_to_json writes none"
    at = next((i for i, (x, y) in enumerate(zip(raw, want)) if x != y), min(len(raw), len(want)))
    line = raw[:at].count(b"\n") + 1
    return (f"the same content laid out differently from graph_to_json (sorted keys, 2-space indent, no final "
            f"newline), first at line {line}")


def _attempt(r: Reading, release: str, name: str, raw: bytes, doc: object, path: Path, label: str) -> Attempt:
    p = V.profile(release)
    assert p is not None
    att = Attempt(release)
    try:
        _prechecks(r, p)
        gpus = gpu_count(r, p) or 1
    except Misfit as exc:
        att.misfit = exc
        return att
    variants: list[tuple[list[dict], list[str]]] = [(r.layers, [])]
    if p.has("auto_slice"):
        undone, dropped = undo_auto_slices(r.layers)
        if dropped:
            variants.insert(0, (undone, dropped))
    last: Misfit | None = None
    for layers, dropped in variants:
        imported = _spec_for(r, p, name, layers, gpus, label)
        if dropped:
            imported.assumptions.append((None, "model.layers: the Slice layers of " + ", ".join(
                repr(t) for t in dropped) + " left out (HugeCTR's graph_analysis inserts them)"))
        try:
            result = _finish(path, imported, label, [n for _, n in imported.assumptions])
            text = regenerate(result)
        except UserError as exc:
            first = sorted(exc.problems, key=Problem.sort_key)[0]
            where = f"{first.field}: " if first.field else ""
            last = Misfit("", f"HugeCTR {release} cannot build it: {where}{first.message}", 2)
            continue
        if text.encode("utf-8") == raw:
            att.result = result
            return att
        diff = first_difference(doc, json.loads(text))
        if diff is None:
            last = Misfit("", _byte_difference(raw, text.encode("utf-8")), 4)
        else:
            where, got, want = diff
            last = Misfit(where, f"the JSON has {_show(got)}, HugeCTR {release} writes {_show(want)} for this model",
                          3)
    att.misfit = last
    return att


def import_graph_json(path: Path, text: str, hugectr_version: str | None, name: str | None) -> ImportResult:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError([Problem(str(path), f"not valid JSON: {exc.msg}", "", exc.lineno, exc.colno,
                                 "give the file model.graph_to_json wrote")]) from None
    try:
        reading = read_document(doc)
    except Located as exc:
        raise UserError.one(path, exc.message, field=exc.field, fix=exc.fix) from None
    if reading.model_name is not None:
        if not _NAME.match(reading.model_name):
            raise UserError.one(path, f"model_name {reading.model_name!r} is not a valid identifier; ctrgen writes the "
                                      "spec name as model_name", field="model_name")
        if name is not None and name != reading.model_name:
            raise UserError.one(path, f"--name {name!r} differs from the JSON's model_name {reading.model_name!r}, "
                                      "which ctrgen writes as the spec name", field="model_name",
                                fix=f"omit --name, or pass --name {reading.model_name}")
    name = name or reading.model_name or default_name(path)
    raw = path.read_bytes()
    label = path.name
    if hugectr_version is not None:
        if hugectr_version not in V.SUPPORTED:
            raise UserError.one(path, f"unsupported HugeCTR release {hugectr_version!r}", field="--hugectr-version",
                                fix="use one of " + ", ".join(V.SUPPORTED) + ", or omit it")
        att = _run(reading, hugectr_version, name, raw, doc, path, label)
        if att.result is None:
            assert att.misfit is not None
            fits = [v for v in V.SUPPORTED if v != hugectr_version
                    and _run(reading, v, name, raw, doc, path, label).result is not None]
            fix = f"omit --hugectr-version (the JSON fits HugeCTR {_ranges(fits)})" if fits else ""
            raise UserError.one(path, f"--hugectr-version {hugectr_version}: {att.misfit.message}",
                                field=att.misfit.field, fix=fix)
        return att.result
    attempts = [_run(reading, v, name, raw, doc, path, label) for v in V.SUPPORTED]
    fits = [a for a in attempts if a.result is not None]
    if not fits:
        closest = max(reversed(attempts), key=lambda a: a.misfit.stage if a.misfit else 0)
        assert closest.misfit is not None
        raise UserError.one(path, f"no supported HugeCTR release ({', '.join(V.SUPPORTED)}) writes this JSON; "
                                  f"closest {closest.release}: {closest.misfit.message}", field=closest.misfit.field)
    chosen = fits[-1]
    assert chosen.result is not None
    if len(fits) > 1:
        chosen.result.assumptions.insert(0, f"release {chosen.release} assumed: the JSON fits HugeCTR "
                                            f"{_ranges([a.release for a in fits])} "
                                            f"(pass --hugectr-version to choose)")
    return chosen.result


def _ranges(releases: list[str]) -> str:
    """'3.6–23.12' for a contiguous run of supported releases, runs joined by ', '."""
    order = list(V.SUPPORTED)
    runs: list[list[str]] = []
    for r in releases:
        if runs and order.index(r) == order.index(runs[-1][-1]) + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    return ", ".join(run[0] if len(run) == 1 else f"{run[0]}–{run[-1]}" for run in runs)


def _run(reading: Reading, release: str, name: str, raw: bytes, doc: object, path: Path, label: str) -> Attempt:
    try:
        return _attempt(reading, release, name, raw, doc, path, label)
    except Located as exc:
        raise UserError.one(path, exc.message, field=exc.field, fix=exc.fix) from None
