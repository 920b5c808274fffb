"""The dense layers of a graph JSON, read into ``model.layers`` entries, and the Slice layers HugeCTR's
graph_analysis() inserted taken out again (hugectr.md §2.6, §2.7)."""

from __future__ import annotations

from typing import Callable

from ..hugectr import versions as V
from ..hugectr.graph_reader import is_int as _is_int, read_bool as _bool, read_int as _int, show as _show
from .graph_fields import ALWAYS_WRITTEN, INITS, Bad, _keys, _names, decimal_of_f32


def _init(block: dict, key: str, where: str) -> str | None:
    if key not in block:
        return None
    if block[key] not in INITS:
        raise Bad(f"{where}.{key}", f"expected one of {list(INITS)}, got {_show(block[key])}")
    return block[key]


# A reader per layer type: (the layer, where it is, "<type> layers" for the key check, the arguments it fills).
Reader = Callable[[dict, str, str, dict], None]
BASE = {"type", "bottom", "top"}   # the keys every layer has
ACTIVATIONS = {"Relu": "Relu", "None": "Non"}
POSITIONS = {"None": "Non", "Head": "Head", "Body": "Body", "Tail": "Tail", "Isolated": "Isolated"}


def _inits(p: dict, block: dict, where: str, weight: str = "weight_init", bias: str = "bias_init",
           weight_arg: str = "weight_init_type", bias_arg: str = "bias_init_type") -> None:
    if (v := _init(block, weight, where)) is not None:
        p[weight_arg] = v
    if (v := _init(block, bias, where)) is not None:
        p[bias_arg] = v


def _norm_inits(p: dict, block: dict, where: str) -> None:
    _inits(p, block, where, "gamma_init", "beta_init", "gamma_init_type", "beta_init_type")


def _batch_norm(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE | {"bn_param"}, set(), what)
    bn = _keys(layer["bn_param"], f"{w}.bn_param", {"eps", "factor"}, {"gamma_init", "beta_init"}, "bn_param")
    p["eps"] = decimal_of_f32(bn["eps"], f"{w}.bn_param.eps")
    p["factor"] = decimal_of_f32(bn["factor"], f"{w}.bn_param.factor")
    _norm_inits(p, bn, f"{w}.bn_param")


def _layer_norm(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE | {"ln_param"}, set(), what)
    ln = _keys(layer["ln_param"], f"{w}.ln_param", {"eps"}, {"gamma_init", "beta_init"}, "ln_param")
    p["eps"] = decimal_of_f32(ln["eps"], f"{w}.ln_param.eps")
    _norm_inits(p, ln, f"{w}.ln_param")


def _dropout(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE | {"rate"}, set(), what)
    p["dropout_rate"] = decimal_of_f32(layer["rate"], f"{w}.rate")


def _sequence_mask(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE, {"max_sequence_len", "max_sequence_len_from", "max_sequence_len_to"}, what)
    if "max_sequence_len" not in layer:
        raise Bad(w, "SequenceMask with max_sequence_len_from/_to is written by HugeCTR 23.08 and later; ctrgen "
                     f"supports {', '.join(V.SUPPORTED)}")
    p["max_sequence_len"] = _int(layer["max_sequence_len"], f"{w}.max_sequence_len", 1)


def _elu(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE | {"elu_param"}, set(), what)
    elu = _keys(layer["elu_param"], f"{w}.elu_param", {"alpha"}, set(), "elu_param")
    p["elu_alpha"] = decimal_of_f32(elu["alpha"], f"{w}.elu_param.alpha")


def _attention(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE | {"num_attention_heads", "transpose_b"}, set(), what)
    p["num_attention_heads"] = _int(layer["num_attention_heads"], f"{w}.num_attention_heads", 1)
    p["transpose_b"] = _bool(layer["transpose_b"], f"{w}.transpose_b")


def _mlp(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE | {"mlp_param"}, set(), what)
    m = _keys(layer["mlp_param"], f"{w}.mlp_param", {"num_output", "num_outputs"},
              {"activation", "activations", "biases", "use_bias", "weight_init", "bias_init"}, "mlp_param")
    wm = f"{w}.mlp_param"
    p["num_output"] = _int(m["num_output"], f"{wm}.num_output", 1)
    outs = m["num_outputs"]
    if not isinstance(outs, list):
        raise Bad(f"{wm}.num_outputs", f"expected an array, got {_show(outs)}")
    p["num_outputs"] = [_int(x, f"{wm}.num_outputs", 1) for x in outs]
    if "activations" in m:
        acts = m["activations"]
        if "activation" in m or not isinstance(acts, list) or any(a not in ACTIVATIONS for a in acts):
            raise Bad(f"{wm}.activations", "expected an array of \"Relu\" / \"None\" (and no \"activation\")")
        p["activations"] = [ACTIVATIONS[a] for a in m["activations"]]
    elif m.get("activation") in ACTIVATIONS:
        p["act_type"] = ACTIVATIONS[m["activation"]]
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
    _inits(p, m, wm)


def _fc(layer: dict, w: str, p: dict) -> None:
    fc = _keys(layer["fc_param"], f"{w}.fc_param", {"num_output"}, {"weight_init", "bias_init"}, "fc_param")
    p["num_output"] = _int(fc["num_output"], f"{w}.fc_param.num_output", 1)
    _inits(p, fc, f"{w}.fc_param")


def _fused_inner_product(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE | {"activation", "fc_param", "position"}, set(), what)
    _fc(layer, w, p)
    if layer["activation"] not in ACTIVATIONS:
        raise Bad(f"{w}.activation", "expected \"Relu\" or \"None\"")
    p["act_type"] = ACTIVATIONS[layer["activation"]]
    if layer["position"] not in POSITIONS:
        raise Bad(f"{w}.position", f"expected one of {list(POSITIONS)}")
    p["pos_type"] = POSITIONS[layer["position"]]


def _inner_product(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE | {"fc_param"}, set(), what)
    _fc(layer, w, p)


def _multi_cross(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE | {"mc_param"}, set(), what)
    mc = _keys(layer["mc_param"], f"{w}.mc_param", {"num_layers"}, {"weight_init", "bias_init"}, "mc_param")
    p["num_layers"] = _int(mc["num_layers"], f"{w}.mc_param.num_layers", 1)
    _inits(p, mc, f"{w}.mc_param")


def _reshape(layer: dict, w: str, what: str, p: dict) -> None:
    if "selected" in layer:
        _keys(layer, w, BASE | {"selected"}, set(), what)
        sel = layer["selected"]
        if not isinstance(sel, list):
            raise Bad(f"{w}.selected", f"expected an array of slots, got {_show(sel)}")
        p["selected"] = True
        p["selected_slots"] = [_int(x, f"{w}.selected") for x in sel]
    else:
        _keys(layer, w, BASE | {"leading_dim", "time_step"}, set(), what)
        p["leading_dim"] = _int(layer["leading_dim"], f"{w}.leading_dim", 1)
        p["time_step"] = _int(layer["time_step"], f"{w}.time_step")


def _concat(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE, {"axis"}, what)
    if "axis" in layer:
        p["axis"] = _int(layer["axis"], f"{w}.axis")


def _slice(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE | {"ranges"}, set(), what)
    ranges = layer["ranges"]
    if not isinstance(ranges, list) or not ranges or not all(
            isinstance(r, list) and len(r) == 2 and all(_is_int(x) for x in r) for r in ranges):
        raise Bad(f"{w}.ranges", f"expected an array of [begin, end] pairs, got {_show(ranges)}")
    p["ranges"] = [list(r) for r in ranges]


def _weight_multiply(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE | {"weight_dims"}, {"weight_init"}, what)
    dims = layer["weight_dims"]
    if not isinstance(dims, list):
        raise Bad(f"{w}.weight_dims", f"expected an array, got {_show(dims)}")
    p["weight_dims"] = [_int(x, f"{w}.weight_dims", 1) for x in dims]
    if (v := _init(layer, "weight_init", w)) is not None:
        p["weight_init_type"] = v


def _fm_order2(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE | {"out_dim"}, set(), what)
    p["out_dim"] = _int(layer["out_dim"], f"{w}.out_dim", 1)


def _reduce(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE | {"axis"}, set(), what)
    p["axis"] = _int(layer["axis"], f"{w}.axis")


def _gather(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE | {"indices"}, set(), what)
    idx = layer["indices"]
    if not isinstance(idx, list):
        raise Bad(f"{w}.indices", f"expected an array, got {_show(idx)}")
    p["indices"] = [_int(x, f"{w}.indices") for x in idx]


def _gru(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE | {"gru_param"}, set(), what)
    g = _keys(layer["gru_param"], f"{w}.gru_param", {"SeqLength", "batchsize", "num_output", "vector_size"},
              {"weight_init", "bias_init"}, "gru_param")
    for k in ("SeqLength", "batchsize", "num_output", "vector_size"):
        p[k] = _int(g[k], f"{w}.gru_param.{k}", 1)
    _inits(p, g, f"{w}.gru_param")


def _prelu_dice(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE | {"prelu_dice_param"}, set(), what)
    pd = _keys(layer["prelu_dice_param"], f"{w}.prelu_dice_param", {"alpha", "eps"}, set(), "prelu_dice_param")
    p["elu_alpha"] = decimal_of_f32(pd["alpha"], f"{w}.prelu_dice_param.alpha")
    p["eps"] = decimal_of_f32(pd["eps"], f"{w}.prelu_dice_param.eps")


def _scale(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE | {"scale_param"}, set(), what)
    sc = _keys(layer["scale_param"], f"{w}.scale_param", {"axis", "factor"}, set(), "scale_param")
    p["axis"] = _int(sc["axis"], f"{w}.scale_param.axis")
    p["factor"] = decimal_of_f32(sc["factor"], f"{w}.scale_param.factor")


def _softmax(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE, {"factor"}, what)
    if "factor" in layer:
        p["factor"] = decimal_of_f32(layer["factor"], f"{w}.factor")


def _loss(layer: dict, w: str, what: str, p: dict) -> None:
    extra = {"lambda", "regularizer"} | ({"target_weight"} if layer["type"] == "MultiCrossEntropyLoss" else set())
    _keys(layer, w, BASE, extra, what)
    if ("lambda" in layer) != ("regularizer" in layer):
        raise Bad(w, "graph_to_json writes \"lambda\" and \"regularizer\" together")
    if "lambda" in layer:
        if layer["regularizer"] not in ("L1", "L2"):
            raise Bad(f"{w}.regularizer", "expected \"L1\" or \"L2\"")
        p["use_regularizer"] = True
        p["regularizer_type"] = layer["regularizer"]
        p["lambda"] = decimal_of_f32(layer["lambda"], f"{w}.lambda")
    if "target_weight" in layer:
        tw = layer["target_weight"]
        if not isinstance(tw, list) or not tw:
            raise Bad(f"{w}.target_weight", f"expected a non-empty array, got {_show(tw)}")
        p["target_weight_vec"] = [decimal_of_f32(x, f"{w}.target_weight") for x in tw]


def _no_arguments(layer: dict, w: str, what: str, p: dict) -> None:
    _keys(layer, w, BASE, set(), what)


# A layer type -> its reader; a type not named here has no keys beyond type, bottom and top.
READERS: dict[str, Reader] = {
    "BatchNorm": _batch_norm, "LayerNorm": _layer_norm, "Dropout": _dropout, "SequenceMask": _sequence_mask,
    "ELU": _elu, "MultiHeadAttention": _attention, "MLP": _mlp, "FusedInnerProduct": _fused_inner_product,
    "InnerProduct": _inner_product, "MultiCross": _multi_cross, "Reshape": _reshape, "Concat": _concat,
    "Slice": _slice, "WeightMultiply": _weight_multiply, "FmOrder2": _fm_order2, "ReduceSum": _reduce,
    "ReduceMean": _reduce, "Gather": _gather, "GRU": _gru, "PReLU_Dice": _prelu_dice, "Scale": _scale,
    "Softmax": _softmax, "BinaryCrossEntropyLoss": _loss, "CrossEntropyLoss": _loss, "MultiCrossEntropyLoss": _loss,
}


def _read_dense(layer: dict, i: int) -> dict:
    """A dense layer -> DenseLayer arguments (the inverse of codegen.render.graph_json._dense_layer)."""
    w = f"layers[{i}]"
    t = layer["type"]
    for k in ("type", "bottom", "top"):   # in this order, whatever the hash seed
        if k not in layer:
            raise Bad(w, f"{t} layer without {k!r}")
    p: dict = {}
    READERS.get(t, _no_arguments)(layer, w, f"{t} layers", p)
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
            ranges = layer["params"]["ranges"]   # (a Slice's JSON has ranges: read above, always written)
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


