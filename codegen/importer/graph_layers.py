"""The dense layers of a graph JSON, read into ``model.layers`` entries, and the Slice layers HugeCTR's
graph_analysis() inserted taken out again (hugectr.md §2.6, §2.7)."""

from __future__ import annotations


from ..hugectr import versions as V
from ..hugectr.graph_reader import is_int as _is_int, read_bool as _bool, read_int as _int, show as _show
from .graph_fields import ALWAYS_WRITTEN, INITS, Bad, _keys, _names, decimal_of_f32


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


