"""HugeCTR's initial values of the dense layers' parameters (Initializer_t: Default, Uniform, XavierNorm, XavierUniform,
Zero), written once: a generated Model passes each weighted module it builds through ``hugectr_init`` with the
layer's kind and its weight_init_type / bias_init_type (gamma / beta for the norms), which overwrites torch's own
initial values. Draws come from torch's global generator, which the trainer seeds with --seed before it builds the
Model. docs/torch.md ("Initial weights") lists each rule with the HugeCTR source it follows (the same in 3.0 - 25.03).

HugeCTR numbers a layer's parameters (index) and takes each one's Initializer_t as types[index % len(types)], types
being [weight_init_type, bias_init_type] ([weight_init_type] for WeightMultiply). A layer type without its own rule for
Uniform / XavierNorm / XavierUniform uses its Default one; Zero always gives zeros."""

from __future__ import annotations

import math

import torch
import torch.nn as nn

INIT_TYPES = ("Default", "Uniform", "XavierNorm", "XavierUniform", "Zero")
# VarianceScalingSimulator's "truncated" normal (include/data_simulator.hpp): stddev sqrt(scale / fan) / this, drawn
# as a plain normal (GaussianDataSimulator keeps mu and sigma and ignores its min and max: nothing is truncated).
TRUNCATED = 0.87962566103423978
FC = "InnerProduct"       # FullyConnectedLayer, FusedFullyConnectedLayer, FusedReluBiasFullyConnectedLayer
NORMS = ("BatchNorm", "LayerNorm")
KINDS = (FC, "MLP", "MultiCross", "WeightMultiply") + NORMS


def _scaling(mode: str, uniform: bool, fan_in: float, fan_out: float, truncated: bool = True) -> tuple[str, float]:
    """VarianceScalingSimulator(scale 1, mode, distribution, fan_in, fan_out, truncated)."""
    fan = {"Fan_in": fan_in, "Fan_out": fan_out, "Fan_avg": (fan_in + fan_out) / 2}[mode]
    scale = 1.0 / max(1.0, fan)
    if uniform:
        return "uniform", math.sqrt(3.0 * scale)
    return "normal", math.sqrt(scale) / TRUNCATED if truncated else math.sqrt(scale)


def rule(kind: str, index: int, init: str, fan_in: int, fan_out: int, projected: bool = False) -> tuple[str, float]:
    """The distribution HugeCTR draws parameter ``index`` of a layer of ``kind`` from, given its Initializer_t
    ``init`` and the fans its source reads: ("normal", stddev) with mean 0, ("uniform", limit) for U(-limit, limit),
    or ("constant", value). fan_in / fan_out: an InnerProduct's or MLP linear's input and output width; MultiCross's
    width and projection_dim (or width), ``projected`` where it has a projection_dim; WeightMultiply's weight_dims."""
    if init not in INIT_TYPES:
        raise ValueError(f"{init!r} is not an Initializer_t member ({', '.join(INIT_TYPES)})")
    if init == "Zero":
        return "constant", 0.0
    if kind == FC:                        # index 0: the weight, 1: the bias
        bottom = fan_in if index == 0 else 0
        if init == "Uniform":
            return "uniform", 1.0 / (bottom + fan_out)
        if init in ("XavierNorm", "XavierUniform"):
            return _scaling("Fan_avg", init == "XavierUniform", bottom, fan_out)
        if index == 0:
            return _scaling("Fan_avg", False, fan_in, fan_out)
        return "normal", math.sqrt(1.0 / fan_out)
    if kind == "MLP":                     # index 2i: layer i's kernel, 2i + 1: its bias
        layer = index // 2
        if init in ("XavierNorm", "XavierUniform"):
            # mlp_layer.cu picks the mode by the layer's parity (its comment says weight vs bias): kept as it is
            return _scaling("Fan_out" if layer % 2 else "Fan_avg", init == "XavierUniform", fan_in, fan_out)
        return "uniform", math.sqrt(1.0 / fan_in)          # Default is Uniform: kernel and bias alike
    if kind == "MultiCross":              # only a Default rule: (w, b) per layer, or (U, V, b) with projection_dim
        bias = index % 3 == 2 if projected else index % 2 == 1
        return ("constant", 0.0) if bias else _scaling("Fan_avg", False, fan_in, fan_out, truncated=False)
    if kind == "WeightMultiply":          # only a weight; its Default is XavierUniform's rule
        bottom = fan_in if index == 0 else 0
        if init == "Uniform":
            return "uniform", 1.0 / (bottom + fan_in * fan_out)
        return _scaling("Fan_avg", init != "XavierNorm", bottom, fan_in * fan_out)
    if kind in NORMS:                     # gamma (index 0) ones, beta zeros
        return "constant", 1.0 if index == 0 else 0.0
    raise ValueError(f"no HugeCTR initializer rule for layer kind {kind!r} (one of {', '.join(KINDS)})")


@torch.no_grad()
def _fill(tensor: torch.Tensor, kind: str, index: int, types: tuple[str, ...], fan_in: int, fan_out: int,
          projected: bool = False) -> None:
    family, value = rule(kind, index, types[index % len(types)], fan_in, fan_out, projected)
    if tensor.is_meta:     # (a Model on the meta device places sharded tables: nothing to draw, and drawing there
        return             # imports torch._dynamo)
    if family == "normal":
        tensor.normal_(0.0, value)
    elif family == "uniform":
        tensor.uniform_(-value, value)
    else:
        tensor.fill_(value)


def hugectr_init(module: nn.Module, kind: str, weight: str = "Default", bias: str = "Default") -> nn.Module:
    """``module`` (a layer of ``kind`` as the generated Model builds it) with every parameter drawn as HugeCTR draws
    it, its Initializer_t types being ``weight`` and ``bias`` (gamma and beta of the norms); returns the module."""
    types = (weight,) if kind == "WeightMultiply" else (weight, bias)
    if kind == FC:
        _fill(module.weight, kind, 0, types, module.in_features, module.out_features)
        _fill(module.bias, kind, 1, types, module.in_features, module.out_features)
    elif kind == "MLP":
        linears = [m for m in module if isinstance(m, nn.Linear)]
        for i, linear in enumerate(linears):
            _fill(linear.weight, kind, 2 * i, types, linear.in_features, linear.out_features)
            if linear.bias is not None:     # (HugeCTR holds an unused bias where use_bias is off)
                _fill(linear.bias, kind, 2 * i + 1, types, linear.in_features, linear.out_features)
    elif kind == "MultiCross":
        width, projection = module.bias.shape[1], module.projection_dim
        for layer in range(module.bias.shape[0]):
            if projection is None:
                _fill(module.weight[layer], kind, 2 * layer, types, width, width)
                _fill(module.bias[layer], kind, 2 * layer + 1, types, width, width)
            else:
                _fill(module.u[layer], kind, 3 * layer, types, width, projection, True)
                _fill(module.weight[layer], kind, 3 * layer + 1, types, projection, width, True)
                _fill(module.bias[layer], kind, 3 * layer + 2, types, width, projection, True)
    elif kind == "WeightMultiply":
        _fill(module.weight, kind, 0, types, *module.weight.shape)
    elif kind in NORMS:
        _fill(module.weight, kind, 0, types, 0, 0)
        _fill(module.bias, kind, 1, types, 0, 0)
    else:
        raise ValueError(f"no HugeCTR initializer rule for layer kind {kind!r} (one of {', '.join(KINDS)})")
    return module
