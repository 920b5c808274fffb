"""The dense part of the graph: the spec's layers (or its preset's) -> checked DenseLayer keyword arguments, output
shapes by HugeCTR's rules (shapes.py), GroupDenseLayer expanded as HugeCTR expands it, and the Slice layers HugeCTR's
graph_analysis() inserts for tensors used twice, as functions over the build context (graph/context.py)."""

from __future__ import annotations

from ..errors import Located
from ..hugectr import api as A
from ..hugectr import versions as V
from ..hugectr.arg_types import dense_layer_problem, dense_layer_type
from ..specfile.graph import ExplicitGraph
from .context import BuildContext
from .ir import CallValue, Embedding, Enum, Layer, dense_values, enum_values
from .preset_table import expand_preset
from .presets import RawLayer
from .shapes import LOSS_LAYERS, Shape, Target, fmt_shape, infer

# GroupLayer_t members a spec's layers: may name (model.add(hugectr.GroupDenseLayer(...)) in model.py).
GROUP_LAYERS = ("GroupFusedInnerProduct",)

# DenseLayer keywords whose values are HugeCTR enums, with the enum type.
ENUM_PARAMS = {
    "gamma_init_type": "Initializer_t", "beta_init_type": "Initializer_t", "weight_init_type": "Initializer_t",
    "bias_init_type": "Initializer_t", "regularizer_type": "Regularizer_t", "pos_type": "FcPosition_t",
    "act_type": "Activation_t",
}
ENUM_MEMBERS = {
    "Initializer_t": ("Default", "Uniform", "XavierNorm", "XavierUniform", "Zero"),
    "Regularizer_t": ("L1", "L2"),
    "FcPosition_t": ("Non", "Head", "Body", "Tail", "Isolated"),
    "Activation_t": ("Relu", "Non"),
}


def raw_layers(ctx: BuildContext, embeddings: list[Embedding], dense_dim: int,
               labels: tuple[str, ...]) -> list[RawLayer]:
    m = ctx.spec.model
    if isinstance(m, ExplicitGraph):
        out = []
        for i, l in enumerate(m.layers):
            extra = dict(l.model_extra or {})
            bottoms = (l.bottom,) if isinstance(l.bottom, str) else tuple(l.bottom)
            tops = (l.top,) if isinstance(l.top, str) else tuple(l.top)
            if l.type in GROUP_LAYERS:
                out.extend(_group_layers(ctx, l.type, bottoms, tops, extra, ("model", "layers", i)))
                continue
            out.append(RawLayer(l.type, bottoms, tops, extra, ("model", "layers", i)))
        return out
    try:
        return expand_preset(m, embeddings, dense_dim, labels, ctx.spec.input.dense_name, ctx.profile)
    except Located as exc:   # a preset stops at its first problem
        ctx.fail(exc.loc, exc.message, fix=exc.fix)
        return []


def _group_layers(ctx: BuildContext, type_: str, bottoms: tuple, tops: tuple, extra: dict,
                  origin: tuple) -> list[RawLayer]:
    """GroupDenseLayer(GroupFusedInnerProduct, ...) as HugeCTR's Model::add(GroupDenseLayer&) expands it: a Head,
    Body and Tail FusedInnerProduct chain whose inner tensors carry _mask, _dRelu and _db companions
    (NVIDIA-Merlin/HugeCTR@v23.06.01:HugeCTR/src/pybind/model.cpp l.1374)."""
    msg = ctx.profile.missing_function("GroupDenseLayer")
    if msg:
        ctx.fail((*origin, "type"), msg, fix="use FusedInnerProduct layers, or another release")
        return []
    unknown = sorted(set(extra) - {"num_outputs", "last_act_type"})
    outs = extra.get("num_outputs")
    if unknown or not isinstance(outs, list) or len(outs) < 2 or len(outs) != len(tops):
        ctx.fail(origin, f"{type_} takes num_outputs (one width per top, at least two) and last_act_type"
                         + (f"; not {unknown}" if unknown else ""), fix="give top names and num_outputs in pairs")
        return []
    if not ctx.spec.solver.use_mixed_precision:
        ctx.fail(origin, '"GroupFusedInnerProduct can only be used when use_mixed_precision is set true"',
                 fix="set solver.use_mixed_precision: true")
        return []
    last = extra["last_act_type"] if "last_act_type" in extra else \
        str(A.default("GroupDenseLayer", "last_act_type", ctx.profile.name)).partition(".")[2]   # member name
    group = (type_, bottoms, tops, tuple(int(x) for x in outs), last)
    names = [list(bottoms)] + [[t, f"{t}_mask", f"{t}_dRelu", f"{t}_db"] for t in tops[:-1]] + [[tops[-1]]]
    layers = []
    n = len(outs)
    for k in range(n):
        pos = "Head" if k == 0 else "Tail" if k == n - 1 else "Body"
        act = last if k == n - 1 else "Relu"
        layers.append(RawLayer("FusedInnerProduct", tuple(names[k]), tuple(names[k + 1]),
                               {"num_output": int(outs[k]), "pos_type": pos, "act_type": act}, origin, group))
    return layers


def _params(ctx: BuildContext, raw: RawLayer) -> tuple:
    p = ctx.profile
    out = []
    for name, value in raw.params.items():
        loc = (*raw.origin, name) if raw.origin[:2] == ("model", "layers") else raw.origin
        msg = p.missing(V.DENSE_LAYER_ARGS, name, "DenseLayer argument")
        if msg:
            ctx.fail(loc, f"layer {raw.tops[0]!r}: {msg}", fix="remove it or check its spelling")
            continue
        why = dense_layer_problem(p.name, name, value)
        if why:
            ctx.fail(loc, f"layer {raw.tops[0]!r}: {name} {why}", fix="write the value as HugeCTR's "
                          "DenseLayer argument takes it")
            continue
        if name in V.DENSE_LAYER_OBJECTS:
            # DenseLayerSwitchs / DenseLayerComputeConfig: {hugectr.X: {...}} -> hugectr.X(...) in model.py
            value = enum_values(value)
            if not isinstance(value, CallValue):
                ctx.fail(loc, f"layer {raw.tops[0]!r}: {name} takes a hugectr object, written "
                              f"{{hugectr.{V.DENSE_LAYER_OBJECTS[name]}: {{...}}}}", fix="write it that way")
                continue
            out.append((name, value))
            continue
        if name in ENUM_PARAMS:
            enum = ENUM_PARAMS[name]
            if value not in ENUM_MEMBERS[enum]:
                ctx.fail(loc, f"layer {raw.tops[0]!r}: {value!r} is not a {enum} member",
                         fix=f"use one of {list(ENUM_MEMBERS[enum])}")
                continue
            value = Enum(enum, value)
        elif name == "activations":
            acts = []
            for a in value if isinstance(value, list) else [value]:
                member = a.split(".", 1)[1] if isinstance(a, str) and a.startswith("Activation_t.") else a
                if member not in ENUM_MEMBERS["Activation_t"]:
                    ctx.fail(loc, f"layer {raw.tops[0]!r}: {a!r} is not an Activation_t member",
                             fix=f"use {list(ENUM_MEMBERS['Activation_t'])}")
                acts.append(Enum("Activation_t", str(member)))
            value = acts
        elif name == "ranges":
            value = [tuple(int(x) for x in r) for r in value]
        elif dense_layer_type(p.name, name) == "float32":
            value = float(value)
        out.append((name, value))
    order = [*p.dense_layer_defaults(), *V.DENSE_LAYER_OBJECTS]
    return tuple(sorted(out, key=lambda kv: order.index(kv[0])))


def infer_layers(ctx: BuildContext, raws: list[RawLayer], inputs: dict[str, Shape]) -> list[Layer]:
    p, s = ctx.profile, ctx.spec
    shapes = dict(inputs)
    layers = []
    poisoned: set[str] = set()  # tops of layers that failed: their consumers are not reported again
    for raw in raws:
        where = raw.origin
        name = raw.tops[0] if raw.tops else "?"
        if poisoned & set(raw.bottoms):
            poisoned.update(raw.tops)
            continue
        msg = p.missing(V.LAYERS, raw.type, "layer type")
        if msg:
            ctx.fail((*where, "type") if where[:2] == ("model", "layers") else where, f"layer {name!r}: {msg}",
                     fix="use a layer type the target release has")
            poisoned.update(raw.tops)
            continue
        if s.solver.use_mixed_precision and raw.type not in V.MIXED_PRECISION_LAYERS:
            ctx.fail(where, f'layer {name!r}: "Mixed precision not supported for: {raw.type}"',
                     fix="remove the layer or disable mixed precision")
        if not s.solver.use_mixed_precision and raw.type in V.SINGLE_PRECISION_EXCLUDED:
            ctx.fail(where, f'layer {name!r}: "Single precision not supported for: {raw.type}" '
                            '("FusedInnerProduct support half only")',
                     fix="use InnerProduct + ReLU, or enable mixed precision")
        before = len(ctx.problems)
        params = _params(ctx, raw)
        bad = len(ctx.problems) > before     # a refused argument: the layer's outputs are not reported again
        for b in raw.bottoms:
            if b not in shapes:
                ctx.fail(where, f'layer {name!r}: "{b}, bottom tensor name does not exists"',
                         fix=f"use a tensor defined earlier: {sorted(shapes)}")
                bad = True
        for t in raw.tops:
            if t in shapes:
                ctx.fail(where, f'layer {name!r}: "{t}, top tensor name already exists"',
                         fix="give every layer output a new name")
                bad = True
            if t in raw.bottoms:
                ctx.fail(where, f'layer {name!r}: "bottom and top include a same layer name"')
                bad = True
        if bad:
            poisoned.update(raw.tops)
            continue
        ins = [shapes[b] for b in raw.bottoms]
        values = dense_values(params, p.name)
        try:
            outs = infer(raw.type, values, ins, len(raw.tops), Target(p.name, bool(s.solver.use_mixed_precision)))
        except Located as exc:
            inputs_desc = ", ".join(f"{b} {fmt_shape(shapes[b])}" for b in raw.bottoms)
            ctx.fail(where, f"layer {name!r} ({raw.type} of {inputs_desc}): {exc.message}")
            poisoned.update(raw.tops)
            continue
        shapes.update(zip(raw.tops, outs))
        layers.append(Layer(type=raw.type, bottoms=raw.bottoms, tops=raw.tops, params=params,
                            out_shapes=tuple(outs), in_shapes=tuple(ins), origin=raw.origin, group=raw.group,
                            values=values))
    if ctx.spec.reader_check is not None:
        return layers   # a data-reader test: no loss, never compiled
    if layers and layers[-1].type not in LOSS_LAYERS and not ctx.problems:
        ctx.fail(("model",), "the last layer must be a loss (e.g. BinaryCrossEntropyLoss)")
    if len(layers) < 2 and not ctx.problems:
        ctx.fail(("model",), '"The model should include input and at least two layers"')
    return layers


def graph_analysis(ctx: BuildContext, layers: list[Layer], inputs: dict[str, Shape]) -> list[Layer]:
    """HugeCTR's graph_analysis() (hugectr.md §2.7): auto Slice layers for tensors used by several layers."""
    p = ctx.profile
    uses: dict[str, int] = {}
    for layer in layers:
        for b in layer.bottoms:
            uses[b] = uses.get(b, 0) + 1
    shapes = dict(inputs)
    for layer in layers:
        shapes.update(zip(layer.tops, layer.out_shapes))
    for tensor, n in sorted(uses.items()):
        if n > 5:
            ctx.fail(("model",), f'tensor {tensor!r} feeds {n} layers: "The graph should not include more than '
                                 '5-way branches"', fix="add Slice layers to split it")
    multi = {t for t, n in uses.items() if n > 1}
    if not multi:
        return list(layers)
    if not p.has("auto_slice"):
        names = sorted(multi)
        ctx.fail(("model",), f"tensors {names} feed several layers; HugeCTR {p.name} has no automatic Slice "
                             f"insertion ({V.BEHAVIOUR['auto_slice'].describe()} has)",
                 fix="split each with an explicit Slice layer")
        return list(layers)
    out: list[Layer] = []
    emitted: set[str] = set()
    next_index: dict[str, int] = {}
    for layer in layers:
        new_bottoms = []
        for b in layer.bottoms:
            if b not in multi:
                new_bottoms.append(b)
                continue
            if b not in emitted:
                shape = shapes[b]
                width = shape.dims[-1] if p.has("auto_slice_last_dim") else shape.dims[0]
                n = uses[b]
                tops = tuple(f"{b}_slice{k}" for k in range(n))
                out_shape = Shape((*shape.dims[:-1], width), shape.rows)
                params = (("ranges", [(0, width)] * n),)
                out.append(Layer(type="Slice", bottoms=(b,), tops=tops, params=params, out_shapes=(out_shape,) * n,
                                 in_shapes=(shape,), auto=True, values=dense_values(params, p.name)))
                emitted.add(b)
            k = next_index.get(b, 0)
            next_index[b] = k + 1
            new_bottoms.append(f"{b}_slice{k}")
        out.append(Layer(type=layer.type, bottoms=tuple(new_bottoms), tops=layer.tops, params=layer.params,
                         out_shapes=layer.out_shapes,
                         in_shapes=layer.in_shapes, origin=layer.origin, group=layer.group, values=layer.values))
    return out
