"""The graph JSON exactly as HugeCTR's ``Model.graph_to_json`` writes it (docs/hugectr.md §2).

Bytes: keys sorted, 2-space indent, raw UTF-8, no trailing newline (§2.1); every float parameter is a C++ float
widened to double (§2.2); automatic Slice layers come from the graph's analysed layer list (§2.7).
"""

from __future__ import annotations

import json
import struct

from ..graph.ir import Embedding, Enum, Graph, Layer, Optimizer, Profile, TrainingJob


def f32(x: float) -> float:
    """A C++ float stored into a JSON double (hugectr.md §2.2)."""
    return struct.unpack("f", struct.pack("f", float(x)))[0]


def _init(value: object) -> str | None:
    """Initializer strings; Default is never written (INITIALIZER_TYPE_TO_STRING, §2.6)."""
    member = value.member if isinstance(value, Enum) else value
    return None if member in (None, "Default") else str(member)


def _data_layer(g: Graph, p: Profile) -> dict:
    if len(g.label_names) == 1:
        label = {"label_dim": g.label_dims[0], "top": g.label_names[0]}
    else:  # multi-label (v3.5+): arrays in label-name order (std::map)
        order = sorted(range(len(g.label_names)), key=lambda i: g.label_names[i])
        label = {"label_dim": [g.label_dims[i] for i in order], "top": [g.label_names[i] for i in order]}
    sparse = []
    for s in g.sparse:
        item = {"is_fixed_length": s.is_fixed_length, "nnz_per_slot": list(s.nnz_per_slot),
                "slot_num": s.slot_num, "top": s.name}
        if p.has("sparse_type_key"):
            item["type"] = "DistributedSlot"
        sparse.append(item)
    return {"type": "Data", "label": label, "dense": {"dense_dim": g.dense_dim, "top": g.dense_name},
            "sparse": sparse}


def optimizer_block(o: Optimizer) -> dict:
    v = o.values
    block: dict = {"update_type": o.update_type}
    if o.type == "RMSProp":
        return block  # the writer has no case for it (§2.5)
    block["type"] = o.type
    if o.type == "Adam":
        block["adam_hparam"] = {"beta1": f32(v["beta1"]), "beta2": f32(v["beta2"]), "epsilon": f32(v["epsilon"])}
    elif o.type == "AdaGrad":
        block["adagrad_hparam"] = {"epsilon": f32(v["epsilon"]), "initial_accu_value": f32(v["initial_accu_value"])}
    elif o.type == "MomentumSGD":
        block["momentum_sgd_hparam"] = {"momentum_factor": f32(v["momentum_factor"])}
    elif o.type == "Nesterov":
        block["nesterov_hparam"] = {"momentum_factor": f32(v["momentum_factor"])}
    elif o.type == "SGD":
        block["sgd_hparam"] = {"atomic_update": bool(v["atomic_update"])}
    elif o.type == "Ftrl":
        block["ftrl_hparam"] = {"beta": f32(v["beta"]), "lambda1": f32(v["lambda1"]), "lambda2": f32(v["lambda2"])}
    return block


def _embedding_layer(e: Embedding) -> dict:
    hparam: dict = {
        "combiner": e.combiner,
        "embedding_vec_size": e.vec_size,
        "max_vocabulary_size_global": e.max_vocabulary_size_global,
        "workspace_size_per_gpu_in_mb": e.workspace_in_effect,
    }
    if e.slot_size_array:
        hparam["slot_size_array"] = list(e.slot_size_array)
    return {"type": e.embedding_type, "bottom": e.bottom, "top": e.name, "sparse_embedding_hparam": hparam,
            "optimizer": optimizer_block(e.optimizer)}


def _names(names: tuple[str, ...]) -> str | list[str]:
    return names[0] if len(names) == 1 else list(names)


def _with_inits(block: dict, layer: Layer, weight: bool = True, bias: bool = True) -> dict:
    if weight and (w := _init(layer.values["weight_init_type"])):
        block["weight_init"] = w
    if bias and (b := _init(layer.values["bias_init_type"])):
        block["bias_init"] = b
    return block


def _dense_layer(layer: Layer, p: Profile) -> dict:
    get = layer.values.__getitem__   # every argument in effect, HugeCTR's defaults included (graph.ir.dense_values)
    out: dict = {"type": layer.type, "bottom": _names(layer.bottoms), "top": _names(layer.tops)}
    t = layer.type
    if t == "BatchNorm":
        bn = {"eps": f32(get("eps")), "factor": f32(get("factor"))}
        if g := _init(get("gamma_init_type")):
            bn["gamma_init"] = g
        if b := _init(get("beta_init_type")):
            bn["beta_init"] = b
        out["bn_param"] = bn
    elif t == "LayerNorm":
        ln = {"eps": f32(get("eps"))}
        if g := _init(get("gamma_init_type")):
            ln["gamma_init"] = g
        if b := _init(get("beta_init_type")):
            ln["beta_init"] = b
        out["ln_param"] = ln
    elif t == "Dropout":
        out["rate"] = f32(get("dropout_rate"))
    elif t == "SequenceMask":
        if p.has("sequence_mask_from_to"):
            out["max_sequence_len_from"] = int(get("max_sequence_len_from"))
            out["max_sequence_len_to"] = int(get("max_sequence_len_to"))
        else:
            out["max_sequence_len"] = int(get("max_sequence_len"))
    elif t == "ELU":
        out["elu_param"] = {"alpha": f32(get("elu_alpha"))}
    elif t == "MultiHeadAttention":
        out["num_attention_heads"] = int(get("num_attention_heads"))
        out["transpose_b"] = bool(get("transpose_b"))
    elif t == "MLP":
        mlp: dict = {"num_output": int(get("num_output")), "num_outputs": list(get("num_outputs"))}
        acts = list(get("activations"))
        if acts:
            mlp["activations"] = ["Relu" if _member(a) == "Relu" else "None" for a in acts]
        else:
            mlp["activation"] = "Relu" if _member(get("act_type")) == "Relu" else "None"
        biases = list(get("biases"))
        if biases:
            mlp["biases"] = [bool(b) for b in biases]
        else:
            mlp["use_bias"] = bool(get("use_bias"))
        out["mlp_param"] = _with_inits(mlp, layer)
    elif t == "FusedInnerProduct":
        out["activation"] = "Relu" if _member(get("act_type")) == "Relu" else "None"
        out["fc_param"] = _with_inits({"num_output": int(get("num_output"))}, layer)
        pos = _member(get("pos_type"))
        out["position"] = "None" if pos == "Non" else pos
    elif t == "InnerProduct":
        out["fc_param"] = _with_inits({"num_output": int(get("num_output"))}, layer)
    elif t == "MultiCross":
        out["mc_param"] = _with_inits({"num_layers": int(get("num_layers"))}, layer)
    elif t == "Reshape":
        if get("selected"):
            out["selected"] = list(get("selected_slots"))
        else:
            out["leading_dim"] = int(get("leading_dim"))
            out["time_step"] = int(get("time_step"))
    elif t == "Concat":
        if p.has("concat_axis"):
            out["axis"] = int(get("axis"))
    elif t == "Slice":
        out["ranges"] = [[int(a), int(b)] for a, b in get("ranges")]
    elif t == "WeightMultiply":
        out["weight_dims"] = list(get("weight_dims"))
        if w := _init(get("weight_init_type")):
            out["weight_init"] = w
    elif t == "FmOrder2":
        out["out_dim"] = int(get("out_dim"))
    elif t in ("ReduceSum", "ReduceMean"):
        out["axis"] = int(get("axis"))
    elif t == "Gather":
        out["indices"] = list(get("indices"))
    elif t == "GRU":
        out["gru_param"] = _with_inits({"SeqLength": int(get("SeqLength")), "batchsize": int(get("batchsize")),
                                        "num_output": int(get("num_output")),
                                        "vector_size": int(get("vector_size"))}, layer)
    elif t == "PReLU_Dice":
        out["prelu_dice_param"] = {"alpha": f32(get("elu_alpha")), "eps": f32(get("eps"))}
    elif t == "Scale":
        out["scale_param"] = {"axis": int(get("axis")), "factor": f32(get("factor"))}
    elif t == "Softmax":
        if p.has("softmax_factor_json"):
            out["factor"] = f32(get("factor"))
    elif t in ("BinaryCrossEntropyLoss", "CrossEntropyLoss", "MultiCrossEntropyLoss"):
        if get("use_regularizer"):
            out["lambda"] = f32(get("lambda"))
            out["regularizer"] = _member(get("regularizer_type"))
        if t == "MultiCrossEntropyLoss" and get("target_weight_vec"):
            out["target_weight"] = [f32(x) for x in get("target_weight_vec")]
    return out


def _member(value: object) -> str:
    return value.member if isinstance(value, Enum) else str(value)


def graph_document(job: TrainingJob) -> dict:
    p = job.profile
    g = job.graph
    layers = [_data_layer(g, p)]
    layers += [_embedding_layer(e) for e in g.embeddings]
    layers += [_dense_layer(layer, p) for layer in g.analysed]
    doc: dict = {"layers": layers}
    if job.model_name and p.has("model_name"):
        doc["model_name"] = job.model_name
    return doc


def render_graph_json(job: TrainingJob) -> str:
    """The file's text; HugeCTR writes it with no newline at the end."""
    return json.dumps(graph_document(job), indent=2, sort_keys=True, ensure_ascii=False)
