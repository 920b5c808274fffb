"""Model.graph_to_json bytes and Model.summary() text, per release (docs/hugectr.md §1.10, §2)."""

from __future__ import annotations

import json
import struct

from ._release import at_least

OPT_STATES = {"Adam": 2, "AdaGrad": 1, "MomentumSGD": 1, "Nesterov": 1, "SGD": 0, "Ftrl": 2, "RMSProp": 1}


def f32(x) -> float:
    """A C++ float stored into a JSON double (§2.2)."""
    return struct.unpack("f", struct.pack("f", float(x)))[0]


def max_vocabulary_size_global(emb, opt, gpus: int) -> int:
    """§2.8: integer arithmetic; the divisor counts optimizer state copies from v3.5."""
    ws, vec = emb.workspace_size_per_gpu_in_mb, emb.embedding_vec_size
    if at_least(3, 5):
        k = OPT_STATES[opt.optimizer_type.name]
        if opt.optimizer_type.name == "Adam" and opt.update_type.name == "LazyGlobal":
            k = 3
        per_gpu = ws * 1024 * 1024 // ((1 + k) * 4 * vec)
    else:
        per_gpu = ws * 1024 * 1024 // (4 * vec)
    return per_gpu * gpus


def optimizer_json(opt) -> dict:
    t = opt.optimizer_type.name
    out = {"update_type": opt.update_type.name}
    if t == "RMSProp":  # no case in the writer (§2.5)
        return out
    out["type"] = t
    if t == "Adam":
        out["adam_hparam"] = {"beta1": f32(opt.beta1), "beta2": f32(opt.beta2), "epsilon": f32(opt.epsilon)}
    elif t == "AdaGrad":
        out["adagrad_hparam"] = {"epsilon": f32(opt.epsilon), "initial_accu_value": f32(opt.initial_accu_value)}
    elif t == "MomentumSGD":
        out["momentum_sgd_hparam"] = {"momentum_factor": f32(opt.momentum_factor)}
    elif t == "Nesterov":
        out["nesterov_hparam"] = {"momentum_factor": f32(opt.momentum_factor)}
    elif t == "SGD":
        out["sgd_hparam"] = {"atomic_update": bool(opt.atomic_update)}
    elif t == "Ftrl":
        out["ftrl_hparam"] = {"beta": f32(getattr(opt, "beta", 0.0)), "lambda1": f32(getattr(opt, "lambda1", 0.0)),
                              "lambda2": f32(getattr(opt, "lambda2", 0.0))}
    return out


def data_json(inp) -> dict:
    labels = inp.labels
    if len(labels) == 1:
        (name, dim), = labels.items()
        label = {"label_dim": dim, "top": name}
    else:
        label = {"label_dim": list(labels.values()), "top": list(labels)}
    sparse = []
    for sp in inp.data_reader_sparse_param_array:
        s = {"is_fixed_length": bool(sp.is_fixed_length), "nnz_per_slot": list(sp.nnz_per_slot),
             "slot_num": sp.slot_num, "top": sp.top_name}
        if not at_least(24, 4):
            s["type"] = "DistributedSlot"
        sparse.append(s)
    return {"type": "Data", "label": label, "dense": {"dense_dim": inp.dense_dim, "top": inp.dense_name},
            "sparse": sparse}


def embedding_json(emb, opt, gpus: int) -> dict:
    if emb.embedding_type.name == "HybridSparseEmbedding":
        raise NotImplementedError("hugectr stand-in: graph_to_json of HybridSparseEmbedding is not modelled (the "
                                  "reference does not give the value formats of its hybrid keys)")
    hp = {"combiner": emb.combiner, "embedding_vec_size": emb.embedding_vec_size,
          "max_vocabulary_size_global": max_vocabulary_size_global(emb, opt, gpus),
          "workspace_size_per_gpu_in_mb": emb.workspace_size_per_gpu_in_mb}
    if emb.slot_size_array:
        hp["slot_size_array"] = list(emb.slot_size_array)
    return {"type": emb.embedding_type.name, "bottom": emb.bottom_name, "top": emb.sparse_embedding_name,
            "sparse_embedding_hparam": hp, "optimizer": optimizer_json(opt)}


def _inits(d: dict, layer, weight="weight_init", bias="bias_init") -> dict:
    if weight and layer.weight_init_type.name != "Default":
        d[weight] = layer.weight_init_type.name
    if bias and layer.bias_init_type.name != "Default":
        d[bias] = layer.bias_init_type.name
    return d


def _regularizer(d: dict, layer) -> None:
    if layer.use_regularizer:
        d["lambda"] = f32(getattr(layer, "lambda"))
        d["regularizer"] = layer.regularizer_type.name


def dense_json(layer, bottoms: list[str], tops: list[str]) -> dict:
    t = layer.type
    d = {"type": t, "bottom": bottoms[0] if len(bottoms) == 1 else list(bottoms),
         "top": tops[0] if len(tops) == 1 else list(tops)}
    if t == "BatchNorm":
        bn = {"eps": f32(layer.eps), "factor": f32(layer.factor)}
        if layer.gamma_init_type.name != "Default":
            bn["gamma_init"] = layer.gamma_init_type.name
        if layer.beta_init_type.name != "Default":
            bn["beta_init"] = layer.beta_init_type.name
        d["bn_param"] = bn
    elif t == "LayerNorm":
        ln = {"eps": f32(layer.eps)}
        if layer.gamma_init_type.name != "Default":
            ln["gamma_init"] = layer.gamma_init_type.name
        if layer.beta_init_type.name != "Default":
            ln["beta_init"] = layer.beta_init_type.name
        d["ln_param"] = ln
    elif t == "Dropout":
        d["rate"] = f32(layer.dropout_rate)
    elif t == "SequenceMask":
        d["max_sequence_len"] = layer.max_sequence_len
    elif t == "ELU":
        d["elu_param"] = {"alpha": f32(layer.elu_alpha)}
    elif t == "MultiHeadAttention":
        d["num_attention_heads"] = layer.num_attention_heads
        d["transpose_b"] = bool(layer.transpose_b)
    elif t == "MLP":
        mp = {"num_output": layer.num_output, "num_outputs": list(layer.num_outputs)}
        if layer.activations:
            mp["activations"] = ["Relu" if a.name == "Relu" else "None" for a in layer.activations]
        else:
            mp["activation"] = "Relu" if layer.act_type.name == "Relu" else "None"
        if layer.biases:
            mp["biases"] = [bool(b) for b in layer.biases]
        else:
            mp["use_bias"] = bool(layer.use_bias)
        d["mlp_param"] = _inits(mp, layer)
    elif t == "FusedInnerProduct":
        d["activation"] = "Relu" if layer.act_type.name == "Relu" else "None"
        d["position"] = "None" if layer.pos_type.name == "Non" else layer.pos_type.name
        d["fc_param"] = _inits({"num_output": layer.num_output}, layer)
    elif t == "InnerProduct":
        d["fc_param"] = _inits({"num_output": layer.num_output}, layer)
    elif t == "MultiCross":
        d["mc_param"] = _inits({"num_layers": layer.num_layers}, layer)
    elif t == "Reshape":
        if layer.selected:
            d["selected"] = list(layer.selected_slots)
        else:
            d["leading_dim"] = layer.leading_dim
            d["time_step"] = layer.time_step
    elif t == "Concat":
        if at_least(3, 6):
            d["axis"] = layer.axis
    elif t == "Slice":
        d["ranges"] = [list(r) for r in layer.ranges]
    elif t == "WeightMultiply":
        d["weight_dims"] = list(layer.weight_dims)
        _inits(d, layer, bias=None)
    elif t == "FmOrder2":
        d["out_dim"] = layer.out_dim
    elif t in ("ReduceSum", "ReduceMean"):
        d["axis"] = layer.axis
    elif t == "Gather":
        d["indices"] = list(layer.indices)
    elif t == "GRU":
        d["gru_param"] = _inits({"SeqLength": layer.SeqLength, "batchsize": layer.batchsize,
                                 "num_output": layer.num_output, "vector_size": layer.vector_size}, layer)
    elif t == "PReLU_Dice":
        d["prelu_dice_param"] = {"alpha": f32(layer.elu_alpha), "eps": f32(layer.eps)}
    elif t == "Scale":
        d["scale_param"] = {"axis": layer.axis, "factor": f32(layer.factor)}
    elif t == "Softmax":
        if at_least(3, 9):
            d["factor"] = f32(layer.factor)
    elif t == "MultiCrossEntropyLoss":
        _regularizer(d, layer)
        if layer.target_weight_vec:
            d["target_weight"] = [f32(w) for w in layer.target_weight_vec]
    elif t in ("BinaryCrossEntropyLoss", "CrossEntropyLoss"):
        _regularizer(d, layer)
    return d


def dumps(obj: dict) -> str:
    """nlohmann::json with setw(2): sorted keys, 2-space indent, raw UTF-8, no final newline (§2.1)."""
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False)


# ---- summary (§1.10; fixtures of NVIDIA's notebooks) ---------------------------------------------------------------
BANNER = "=" * 51 + "Model Summary" + "=" * 51
RULE = "-" * 114
HEAVY = "\u2014" * 114


def summary_text(rows, labels: dict, dense, sparse_names, batch: int) -> str:
    """rows: (layer type, bottoms, tops, shapes) with shapes as (dims, built) or None for losses.

    3.2 and earlier: no rules between rows, several names joined by ','; 3.3-3.x: a rule after each row, one name
    per line, heavy rules around the header; 4.x+: as 3.3 with built shapes '(rows,d1,...)' instead of
    '(None, d1, ...)' and a 'Model structure on each GPU' line after the banner.
    """
    batch_shapes = at_least(4, 0)
    rules = at_least(3, 3)

    def shape(s) -> str:
        if s is None:
            return ""
        dims, built = s
        if batch_shapes:
            return "(" + ",".join(map(str, built)) + ")"
        return "(" + ", ".join(["None", *map(str, dims)]) + ")"

    out = [BANNER]
    if batch_shapes:
        out.append("Model structure on each GPU")
    out.append(("label" if rules and not batch_shapes else "Label").ljust(40) + "Dense".ljust(30)
               + "Sparse".ljust(30))
    out.append(",".join(labels).ljust(40) + dense[0].ljust(30) + " " + ",".join(sparse_names).ljust(30))
    first_label = next(iter(labels.values()))
    out.append(shape(((first_label,), (batch, first_label))).ljust(40)
               + shape(((dense[1],), (batch, dense[1]))).ljust(40))
    out += [HEAVY if rules else RULE,
            "Layer Type".ljust(40) + "Input Name".ljust(30) + "Output Name".ljust(30) + "Output Shape".ljust(30),
            HEAVY if rules else RULE]
    for kind, bottoms, tops, shapes in rows:
        texts = [shape(s) for s in shapes]
        if not rules:
            out.append(kind.ljust(40) + ",".join(bottoms).ljust(30) + ",".join(tops).ljust(30)
                       + (texts[0] if texts else "").ljust(30))
            continue
        for i in range(max(len(bottoms), len(tops))):
            out.append((kind if i == 0 else "").ljust(40) + (bottoms[i] if i < len(bottoms) else "").ljust(30)
                       + (tops[i] if i < len(tops) else "").ljust(30) + (texts[i] if i < len(texts) else "").ljust(30))
        out.append(RULE)
    if not rules:
        out.append(RULE)
    return "\n".join(out) + "\n"
