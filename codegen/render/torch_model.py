"""TrainingJob -> train_torch.py (templates/torch/train_torch.py.j2) and its features.json.

The PyTorch model is a line-by-line translation of the same intermediate graph model.py is rendered from: one
``SparseEmbedding`` per HugeCTR embedding (all slots of an input in one table, slot ids offset by the cardinalities
before them), then every dense layer of ``graph.layers`` in model.py's order, each top tensor a local variable named
as in HugeCTR. Tensors keep HugeCTR's memory layout (batch * rows, *dims), so Reshape is a plain ``reshape`` and the
rows a Reshape moves into the batch dimension (DeepFM) need no special case. Automatic Slices of graph_analysis()
are not needed: a Python variable can feed several layers.

The model it reads is valid for the target: the builder's rules (model/torch_rules.py) refused, on their spec lines,
what it cannot translate, from the same facts (``codegen.torch_target``) this module translates with.
"""

from __future__ import annotations

import dataclasses
import keyword
import re
from dataclasses import dataclass, field

from .. import __version__
from ..features import Features
from ..graph.ir import Layer, Profile, SolverSettings, TrainingJob
from ..graph.shapes import fmt_shape
from ..runtime.contract import layout_of
from ..runtime.job import FLT_EPSILON
from ..torch_target import LAYER_TYPES, LOSS, LOSSES, OPTIMIZERS, SPARSE_OPTIMIZERS
from .env import render
from .literals import py, py_str
from .torch_collection import collection_lines
from .torch_features import features_json


# Names the generated forward() uses itself, and nn.Module attributes a layer attribute must not shadow.
RESERVED_LOCALS = frozenset({"self", "torch", "nn", "F", "np", "math", "json"}) | frozenset(keyword.kwlist)
MODULE_ATTRS = frozenset({
    "training", "forward", "parameters", "named_parameters", "buffers", "named_buffers", "children", "modules",
    "named_modules", "state_dict", "load_state_dict", "train", "eval", "to", "cuda", "cpu", "float", "double", "half",
    "type", "apply", "zero_grad", "register_buffer", "register_parameter", "add_module", "requires_grad_", "dump_patches",
    "call_super_init", "extra_repr", "get_submodule", "get_parameter", "get_buffer", "share_memory", "bfloat16",
    "ipu", "xpu", "mtia", "to_empty", "register_module", "compile",
})

# The table updates train_torch.py's RowSparseOptimizer reproduces exactly (rows without gradient stay as they are):
# SGD and AdaGrad under every update_type; Adam only where HugeCTR updates just the looked-up rows (Global Adam moves
# every row with moment state, so its tables keep the dense step).
ROW_UPDATE_TYPES = {"SGD": None, "AdaGrad": None, "Adam": ("Local", "LazyGlobal")}
GRAD_SCALER_DEFAULT = 65536.0   # torch's GradScaler initial scale, used for fp16 when the solver sets no scaler


def _row_update(job: TrainingJob) -> tuple[str | None, dict]:
    """(RowSparseOptimizer kind or None, its hyper-parameters) for the spec's optimizer."""
    kind = job.optimizer.type
    if kind not in ROW_UPDATE_TYPES:
        return None, {}
    update_types = ROW_UPDATE_TYPES[kind]
    if update_types is not None and str(job.optimizer.update_type) not in update_types:
        return None, {}
    return kind, _row_hyper(job)


def _row_hyper(job: TrainingJob) -> dict:
    """The hyper-parameters of the spec's optimizer as RowSparseOptimizer (and PassOptimizer) read them."""
    kind, v = job.optimizer.type, job.optimizer.values
    if kind == "AdaGrad":
        return {"initial_accumulator_value": float(v["initial_accu_value"]), "eps": float(v["epsilon"])}
    if kind == "Adam":
        return {"betas": (float(v["beta1"]), float(v["beta2"])), "eps": float(v["epsilon"])}
    return {}


def _floats(value: object) -> object:
    """An optimizer hyper-parameter as DenseOptimizer reads it: numbers as floats (a tuple of them: each), flags kept."""
    if isinstance(value, tuple):
        return tuple(_floats(v) for v in value)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def _precision(solver: SolverSettings) -> str:
    """The spec's precision: use_mixed_precision -> mixed (bf16, or fp16 where the GPU has no bf16)."""
    if solver.use_mixed_precision:
        return "mixed"
    return "tf32" if solver.enable_tf32_compute else "fp32"


def _identifier(tensor: str) -> str:
    """A Python identifier for a HugeCTR tensor name (which may start with a digit or hold '.' and '-')."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", tensor)
    if not name.isidentifier() or keyword.iskeyword(name):
        name = f"t_{name}"
    return name


@dataclass
class _Names:
    """Python names for HugeCTR tensor names: kept when safe, otherwise prefixed (and always unique)."""

    locals_: dict[str, str] = field(default_factory=dict)
    attrs: dict[str, str] = field(default_factory=dict)
    reserved: frozenset[str] = frozenset()             # runtime helpers forward() calls (translate_graph)

    # (tensor names are HugeCTR strings such as "50k_label"; as Python names they are made identifiers)
    def var(self, tensor: str) -> str:
        if tensor not in self.locals_:
            name = _identifier(tensor)
            name = name if name not in RESERVED_LOCALS | self.reserved else f"t_{name}"
            while name in self.locals_.values():
                name = f"t_{name}"
            self.locals_[tensor] = name
        return self.locals_[tensor]

    def attr(self, tensor: str) -> str:
        if tensor not in self.attrs:
            name = _identifier(tensor)
            name = name if name not in MODULE_ATTRS and not name.startswith("_") else f"layer_{name}"
            while name in self.attrs.values():
                name = f"layer_{name}"
            self.attrs[tensor] = name
        return self.attrs[tensor]


@dataclass
class _Model:
    profile: Profile                                   # the job's HugeCTR release (layer forms that changed)
    init: list[str] = field(default_factory=list)      # lines of Model.__init__ after super().__init__()
    forward: list[str] = field(default_factory=list)   # lines of Model.forward before the return
    helpers: set[str] = field(default_factory=set)     # helper classes / functions the model needs (runtime.layers)
    output: str = ""
    losses: list[Layer] = field(default_factory=list)  # the loss layers, in graph order
    loss_inputs: list[str] = field(default_factory=list)   # the local each one reads

def _width(shape) -> int:
    return shape.width   # (an MLP's built width where HugeCTR records num_output: shapes.Shape.built_width)


def _mlp_modules(layer: Layer) -> list[tuple[int, int, bool] | None]:
    """HugeCTR's MLP (src/layers/mlp_layer.cu, 4.2 - 25.03) as the modules of an nn.Sequential: per width a linear
    layer (in, out, bias; bias per `biases`, else `use_bias`) and its activation (None: a ReLU; per `activations`,
    else `act_type`), the last layer's included."""
    p = layer.values
    widths = [int(w) for w in p["num_outputs"]]
    acts = [a.member for a in p["activations"]] or [p["act_type"].member] * len(widths)
    biases = [bool(b) for b in p["biases"]] or [bool(p["use_bias"])] * len(widths)
    modules: list[tuple[int, int, bool] | None] = []
    width = _width(layer.in_shapes[0])
    for out, a, bias in zip(widths, acts, biases):
        modules += [(width, out, bias)] + ([None] if a == "Relu" else [])
        width = out
    return modules


def mlp_linears(layer: Layer) -> list[tuple[int, int, int, bool]]:
    """The MLP's linear layers as (index in its nn.Sequential, in, out, bias), in order (codegen.weights)."""
    return [(i, *m) for i, m in enumerate(_mlp_modules(layer)) if m is not None]


def _mlp(layer: Layer) -> str:
    parts = ["nn.ReLU()" if m is None else f"nn.Linear({m[0]}, {m[1]}" + ("" if m[2] else ", bias=False") + ")"
             for m in _mlp_modules(layer)]
    return f"nn.Sequential({', '.join(parts)})"


def _select(p: dict, source: str) -> str:
    """HugeCTR's Select (src/layers/select_layer.cu, 23.08 - 25.03): the entries `index` of dimension `dim` (0 is the
    batch, as in the torch tensor), in the order given."""
    dim = int(p["dim"])
    return f"{source}[{', '.join([':'] * dim + [py([int(i) for i in p['index']])])}]"


def _initialized(m: _Model, p: dict, kind: str, expr: str, weight: str = "weight_init_type",
                 bias: str | None = "bias_init_type") -> str:
    """A weighted module as runtime.initializers.hugectr_init draws it: HugeCTR's rule for ``kind`` with the layer's
    Initializer_t types (``weight`` and ``bias``: their parameter names; Default is not written). A norm whose types
    are both Default is left as torch builds it: HugeCTR's Default gamma and beta are torch's ones and zeros."""
    args = [expr, py_str(kind)]
    for key, name in (("weight", weight), ("bias", bias)):
        value = p[name] if name is not None else None
        if value is not None and value.member != "Default":
            args.append(f"{key}={py_str(value.member)}")
    if kind in ("BatchNorm", "LayerNorm") and len(args) == 2:
        return expr
    m.helpers.add("hugectr_init")
    return f"hugectr_init({', '.join(args)})"


def _layer(m: _Model, n: _Names, layer: Layer) -> None:
    t, p = layer.type, layer.values   # every argument in effect, HugeCTR's defaults included (graph.ir.dense_values)
    ins = [n.var(b) for b in layer.bottoms]
    outs = [n.var(x) for x in layer.tops]
    top = layer.tops[0]
    shape = ", ".join(str(d) for d in layer.out_shapes[0].dims) if layer.out_shapes else ""
    comment = f"  # {fmt_shape(layer.out_shapes[0])}" if t not in LOSSES else ""

    def module(expr: str) -> str:
        attr = n.attr(top)
        m.init.append(f"self.{attr} = {expr}")
        return f"self.{attr}"

    if t == "Reshape":
        if p["selected"]:
            slots = [int(s) for s in p["selected_slots"]]
            m.forward.append(f"{outs[0]} = {ins[0]}[:, {py(slots)}, :].reshape(-1, {shape}){comment}")
        else:
            m.forward.append(f"{outs[0]} = {ins[0]}.reshape(-1, {shape}){comment}")
    elif t == "Concat":
        axis = int(p["axis"])
        m.forward.append(f"{outs[0]} = torch.cat([{', '.join(ins)}], dim={axis}){comment}")
    elif t == "Slice":
        for out, (start, end) in zip(outs, p["ranges"]):
            m.forward.append(f"{out} = {ins[0]}[..., {int(start)}:{int(end)}]")
    elif t in ("InnerProduct", "FusedInnerProduct"):
        fc = module(_initialized(m, p, "InnerProduct",
                                 f"nn.Linear({_width(layer.in_shapes[0])}, {int(p['num_output'])})"))
        expr = f"{fc}({ins[0]})"
        if t == "FusedInnerProduct" and p["act_type"].member == "Relu":
            expr = f"F.relu({expr})"
        # A FusedInnerProduct's tops after the first (Head, Body: _mask, _dRelu, _db) are HugeCTR's backward buffers.
        for out in outs if t == "InnerProduct" else outs[:1]:
            m.forward.append(f"{out} = {expr}{comment}")
    elif t == "MLP":
        mlp = module(_initialized(m, p, "MLP", _mlp(layer)))
        m.forward.append(f"{outs[0]} = {mlp}({ins[0]})  # (B, {_width(layer.out_shapes[0])})")
    elif t == "Select":
        m.forward.append(f"{outs[0]} = {_select(p, ins[0])}{comment}")
    elif t in ("ReLU", "ReLUHalf"):
        m.forward.append(f"{outs[0]} = F.relu({ins[0]})")
    elif t == "Sigmoid":
        m.forward.append(f"{outs[0]} = torch.sigmoid({ins[0]})")
    elif t == "ELU":
        m.forward.append(f"{outs[0]} = F.elu({ins[0]}, alpha={py(float(p['elu_alpha']))})")
    elif t == "Softmax" and len(ins) == 2:     # HugeCTR builds a MaskedSoftmaxLayer (scores, mask)
        m.helpers.add("masked_softmax")
        m.forward.append(f"{outs[0]} = masked_softmax({ins[0]}, {ins[1]}, factor={py(float(p['factor']))}, "
                         f"per_row={py(m.profile.has('masked_softmax_rows'))}){comment}")
    elif t == "Softmax":
        m.forward.append(f"{outs[0]} = F.softmax({ins[0]}, dim=-1)")
    elif t == "Cast":
        m.forward.append(f"{outs[0]} = {ins[0]}  # Cast: float32 throughout")
    elif t == "Dropout":
        drop = module(f"nn.Dropout(p={py(float(p['dropout_rate']))})")
        m.forward.append(f"{outs[0]} = {drop}({ins[0]})")
    elif t == "BatchNorm":
        bn = module(_initialized(m, p, "BatchNorm", f"nn.BatchNorm1d({_width(layer.in_shapes[0])}, "
                                 f"eps={py(float(p['eps']))}, momentum={py(float(p['factor']))})",
                                 "gamma_init_type", "beta_init_type"))
        m.forward.append(f"{outs[0]} = {bn}({ins[0]})")
    elif t == "LayerNorm":
        ln = module(_initialized(m, p, "LayerNorm",
                                 f"nn.LayerNorm({_width(layer.in_shapes[0])}, eps={py(float(p['eps']))})",
                                 "gamma_init_type", "beta_init_type"))
        m.forward.append(f"{outs[0]} = {ln}({ins[0]})")
    elif t in ("Add", "Sub", "ElementwiseMultiply"):
        op = {"Add": " + ", "Sub": " - ", "ElementwiseMultiply": " * "}[t]
        m.forward.append(f"{outs[0]} = {op.join(ins)}{comment}")
    elif t == "MultiCross":
        m.helpers.add("MultiCross")
        proj = p.get("projection_dim")   # (an argument from HugeCTR 4.3; 0 is none)
        extra = f", projection_dim={int(proj)}" if proj else ""
        mc = module(_initialized(m, p, "MultiCross",
                                 f"MultiCross({_width(layer.in_shapes[0])}, num_layers={int(p['num_layers'])}{extra})"))
        m.forward.append(f"{outs[0]} = {mc}({ins[0]}){comment}")
    elif t == "Interaction":
        m.helpers.add("Interaction")
        it = module(f"Interaction(num_features={layer.in_shapes[1].dims[0] + 1})")
        for out in outs:
            m.forward.append(f"{out} = {it}({ins[0]}, {ins[1]}){comment}")
    elif t == "FmOrder2":
        m.helpers.add("fm_order2")
        m.forward.append(f"{outs[0]} = fm_order2({ins[0]}, out_dim={int(p['out_dim'])}){comment}")
    elif t == "WeightMultiply":
        m.helpers.add("WeightMultiply")
        rows, cols = (int(d) for d in p["weight_dims"])
        wm = module(_initialized(m, p, "WeightMultiply", f"WeightMultiply({rows}, {cols})", bias=None))
        m.forward.append(f"{outs[0]} = {wm}({ins[0]}){comment}")
    elif t in ("ReduceSum", "ReduceMean"):
        fn = "sum" if t == "ReduceSum" else "mean"
        m.forward.append(f"{outs[0]} = {ins[0]}.{fn}(dim={int(p['axis'])}, keepdim=True){comment}")
    elif t in ("PReLU_Dice", "Scale", "DotProduct", "FusedReshapeConcat", "FusedReshapeConcatGeneral",
               "MatrixMultiply", "SequenceMask", "MultiHeadAttention"):   # DIN, BST: runtime.attention
        _attention_layer(m, layer, ins, outs, comment)
    elif t in LOSSES:
        m.losses.append(layer)
        m.loss_inputs.append(ins[0])
    else:   # the model builder refuses a layer type outside LAYER_TYPES (model/torch_rules.py)
        raise AssertionError(f"layer {top!r}: type {t!r} has no branch here (LAYER_TYPES has it: {t in LAYER_TYPES})")


def _attention_layer(m: _Model, layer: Layer, ins: list[str], outs: list[str], comment: str) -> None:
    """The forward line of a layer of HugeCTR's attention models: a runtime.attention helper (none has
    parameters) or torch.matmul."""
    t, p = layer.type, layer.values
    args = ", ".join(ins)
    if t == "MatrixMultiply":       # 3D or 4D, batched over the leading dimensions (shapes.py refuses 2D)
        m.forward.append(f"{outs[0]} = torch.matmul({ins[0]}, {ins[1]}){comment}")
        return
    if t == "PReLU_Dice":
        call = f"prelu_dice({ins[0]}, alpha={py(float(p['elu_alpha']))}, eps={py(float(p['eps']))})"
    elif t == "Scale":
        call = f"scale({ins[0]}, axis={int(p['axis'])}, factor={int(float(p['factor']))})"
    elif t == "DotProduct":
        call = f"dot_product({args})"
    elif t == "FusedReshapeConcat":
        call = f"fused_reshape_concat({args})"
    elif t == "FusedReshapeConcatGeneral":
        call = f"fused_reshape_concat_general({args})"
    elif t == "SequenceMask" and m.profile.has("sequence_mask_from_to"):
        call = (f"sequence_mask_from_to({ins[0]}, {ins[1]}, max_from={int(p['max_sequence_len_from'])}, "
                f"max_to={int(p['max_sequence_len_to'])})")
    elif t == "SequenceMask":       # (a second input is not read before 23.08)
        call = f"sequence_mask({ins[0]}, max_len={int(p['max_sequence_len'])})"
    elif m.profile.has("mha_23_09"):
        mask = f", mask={ins[3]}" if len(ins) > 3 else ""
        call = (f"multi_head_attention({ins[0]}, {ins[1]}, {ins[2]}, "
                f"heads={int(p['num_attention_heads'])}{mask})")
    elif len(layer.in_shapes[0].dims) == 2:     # 3D query, key, value (batch dimension included)
        call = f"attention_scores({ins[0]}, {ins[1]}, {ins[2]}, heads={int(p['num_attention_heads'])})"
    else:
        call = f"attention_4d({ins[0]}, {ins[1]}, transpose_b={py(bool(p['transpose_b']))})"
    m.helpers.add(call[:call.index("(")])
    m.forward.append(f"{', '.join(outs)} = {call}{comment}")


def _wrapped(items: list, indent: str, width: int = 116) -> str:
    """A list literal broken over lines of at most ``width`` characters."""
    one = py(items)
    if len(indent) + len(one) <= width:
        return one
    lines, line = [], ""
    for item in items:
        text = py(item) + ","
        if line and len(indent) + 4 + len(line) + 1 + len(text) > width:
            lines.append(line)
            line = text
        else:
            line = f"{line} {text}" if line else text
    lines.append(line)
    return "[\n" + "".join(f"{indent}    {x}\n" for x in lines) + f"{indent}]"


def _layout_literal(layout: dict) -> str:
    sparse = ",\n".join(f"        [{py(name)}, {nnz}, {_wrapped(cols, '        ', 110)}]"
                        for name, nnz, cols in layout["sparse"])
    return ("{\n"
            f"    \"labels\": {_wrapped(layout['labels'], '    ')},\n"
            f"    \"continuous\": {_wrapped(layout['continuous'], '    ')},\n"
            f"    \"sparse\": [\n{sparse},\n    ],\n"
            "}")


def _passes_literal(passes: list[dict]) -> str:
    return "[\n" + "".join(f"    {{\n        \"train\": {_wrapped(p['train'], '        ', 108)},\n"
                            f"        \"eval\": {py(p['eval'])},\n    }},\n" for p in passes) + "]"


def _lr_schedule(job: TrainingJob) -> dict:
    """CreateSolver's learning-rate schedule in effect (the builder's: the spec's values over HugeCTR's defaults)."""
    return dataclasses.asdict(job.settings.schedule)


def module_attrs(job: TrainingJob) -> dict[str, str]:
    """The Model attribute that holds the module of each HugeCTR tensor (an embedding's or a layer's top): the
    prefix of its parameters' state_dict keys, as codegen.weights maps HugeCTR's files onto them."""
    return dict(_translate(job, frozenset())[1].attrs)


def translate_graph(job: TrainingJob) -> _Model:
    """The graph as Model.__init__ and forward() lines (the builder checked that every layer translates)."""
    m, names = _translate(job, frozenset())
    if set(names.locals_.values()) & m.helpers:
        # A tensor named like a runtime helper that forward() calls (BST's "sequence_mask") would make that name a
        # local of forward() and the call an UnboundLocalError: translate again with the helpers' names reserved.
        m, names = _translate(job, frozenset(m.helpers))
    return m


def _translate(job: TrainingJob, reserved: frozenset[str]) -> tuple[_Model, _Names]:
    g = job.graph
    n, m = _Names(reserved=reserved), _Model(profile=job.profile)
    for e in g.embeddings:
        sparse = next(s for s in g.sparse if s.name == e.bottom)
        m.init.append(f"self.{n.attr(e.name)} = SparseEmbedding(cardinalities[{py_str(sparse.name)}], "
                      f"vec_size={e.vec_size}, combiner={py_str(e.combiner)}, name={py_str(n.attr(e.name))}, "
                      + ("" if e.init == "uniform" else f"init={py_str(e.init)}, ") + "placement=placement)")
        m.forward.append(f"{n.var(e.name)} = self.{n.attr(e.name)}({n.var(e.bottom)})  # {fmt_shape(e.shape)}")
    collection_lines(job, n.attr, n.var, m.init, m.forward, m.helpers)   # an embedding collection's, if any
    for layer in g.layers:
        _layer(m, n, layer)
    assert m.losses, "the graph ends without a loss layer: the model builder refuses it (model/torch_rules.py)"
    # forward() returns what the loss layers read, side by side (B, N) where there are several
    m.output = m.loss_inputs[0] if len(m.loss_inputs) == 1 else f"torch.cat([{', '.join(m.loss_inputs)}], dim=1)"
    m.forward_args = [n.var(g.dense_name)] + [n.var(s.name) for s in g.sparse]  # type: ignore[attr-defined]
    return m, n


def loss_terms(job: TrainingJob, m: _Model) -> list[dict] | None:
    """The graph's loss layers as runtime.losses.LossTerm's arguments (output and label columns, label names, label
    weight from Model.compile's loss_names / loss_weights, MultiCrossEntropyLoss's target weights); None for one
    BinaryCrossEntropyLoss of one label of dimension 1 (the trainer's own BCE)."""
    g = job.graph
    if [x.type for x in m.losses] == [LOSS] and g.label_dims == (1,):
        return None
    starts = {name: sum(g.label_dims[:i]) for i, name in enumerate(g.label_names)}
    dims = dict(zip(g.label_names, g.label_dims))
    terms, column = [], 0
    for layer in m.losses:
        p, label = layer.values, layer.bottoms[1]
        width = _width(layer.in_shapes[0])
        names = [label] if dims[label] == 1 or layer.type == "CrossEntropyLoss" else \
            [f"{label}[{j}]" for j in range(dims[label])]
        term = {"kind": layer.type, "outputs": (column, column + width),
                "labels": (starts[label], starts[label] + dims[label]), "names": tuple(names),
                "weight": job.label_weight(label)}
        if layer.type == "MultiCrossEntropyLoss":
            term["target_weights"] = tuple(float(w) for w in p["target_weight_vec"])
        terms.append(term)
        column += width
    return terms


def render_train_torch(job: TrainingJob, features: Features, header: str) -> str:
    m = translate_graph(job)
    terms = loss_terms(job, m)
    doc = features_json(job, features)
    opt_class, opt_kwargs, graph_safe = OPTIMIZERS[job.optimizer.type]
    passes = None
    if job.continuous is not None:
        passes = [{"train": list(p.source), "eval": p.eval_source} for p in job.continuous.passes]
        graph_safe = False   # continuous training runs eagerly (PassOptimizer reads its step count on the host)
    solver, fit = job.settings, job.fit_plan
    defaults = {
        "train": list(job.reader_plan.source),
        "eval": job.reader_plan.eval_source,
        "batch_size": job.batchsize,
        "eval_batch_size": solver.batchsize_eval,
        "max_eval_batches": solver.max_eval_batches,
        "max_iter": None if fit.by_epochs else fit.max_iter,
        "num_epochs": fit.num_epochs if fit.by_epochs else None,
        "display": fit.display,
        "eval_interval": fit.eval_interval,
        "snapshot": fit.snapshot,
        "seed": solver.seed,
        "precision": _precision(solver),
        "loss_scale": solver.scaler if solver.scaler is not None else GRAD_SCALER_DEFAULT,
    }
    row_update, _ = _row_update(job)
    continuous = passes is not None
    hyper = {k: _floats(v) for k, v in opt_kwargs(job.optimizer.values)}
    if job.optimizer.type == "Ftrl":
        hyper["eps"] = FLT_EPSILON if job.profile.has("ftrl_epsilon") else 0.0
    optimizer = [py_str(job.optimizer.type), f"dense={py_str(opt_class)}", f"dense_hyper={py(hyper)}"]
    if row_update is not None:
        optimizer.append(f"rows={py_str(row_update)}")
    if row_update is not None or continuous:
        optimizer.append(f"rows_hyper={py(_row_hyper(job))}")
    if continuous:
        optimizer.append(f"sparse_form={py_str(SPARSE_OPTIMIZERS[job.optimizer.type])}")
    if not graph_safe:
        optimizer.append("graph_safe=False")
    tables_note = (f"the embedding tables row by row with {SPARSE_OPTIMIZERS[job.optimizer.type]}'s step (only the "
                   "rows a pass looks up)." if continuous else
                   f"the embedding tables row by row where rows={py_str(row_update)} (--embedding-update)."
                   if row_update is not None else "the embedding collection's tables on the rows a batch looks up "
                   "(runtime/ftrl.py)." if job.optimizer.type == "Ftrl" else "the embedding tables with the dense step "
                   "(its update_type moves every row).")
    # (torch.optim has no Ftrl: the template's "the dense step as torch.optim's <class>" names the runtime's instead)
    dense_class = "(none: HugeCTR's Ftrl kernel, runtime/ftrl.py)" if opt_class == "Ftrl" else opt_class
    return render(
        "torch/train_torch.py.j2",
        header=header,
        name=py_str(job.name),
        name_text=job.name,
        runtime_version=py_str(__version__),
        layout=_layout_literal(layout_of(doc)),
        defaults=[(k, py(v)) for k, v in defaults.items()],
        schedule=[(k, py(v)) for k, v in _lr_schedule(job).items()],
        optimizer_class=dense_class,
        optimizer_name=job.optimizer.type,
        optimizer_args=optimizer,
        tables_note=tables_note,
        passes=_passes_literal(passes) if passes is not None else None,
        sparse_optimizer_class=SPARSE_OPTIMIZERS.get(job.optimizer.type),
        layer_imports=sorted({"SparseEmbedding", *(h for h in m.helpers)}),
        uses_torch=any(re.search(r"\btorch\.", line) for line in m.init + m.forward + [m.output]),
        uses_functional=any(re.search(r"\bF\.", line) for line in m.init + m.forward),
        init=m.init,
        forward=m.forward,
        forward_args=m.forward_args,  # type: ignore[attr-defined]
        output=m.output,
        losses=[f"LossTerm({', '.join(f'{k}={py(v)}' for k, v in t.items())})" for t in terms] if terms else None,
        loss_text=" and ".join(sorted({x.type for x in m.losses})),
        hugectr_version=job.hugectr_version,
    )
