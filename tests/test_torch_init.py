"""The generated Model's dense layers start as HugeCTR initialises them (codegen/runtime/initializers.py; the rules and
their HugeCTR sources: docs/torch.md "Initial weights"). Each rule is checked on a large tensor drawn with a fixed
seed (50,000 draws or more): its mean within 3% of its stddev (of its limit for a uniform) of 0, its stddev within
3% (the sampling error of that many draws is under 1%), and its family: a uniform draw stays inside its limit and
fills it (max |x| within 1% of it), a normal draw has tails (beyond 3.5 stddev) where a uniform of that stddev has
none. The renderer names each layer's Initializer_t."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn

from codegen.pipeline import open_spec, render_spec
from codegen.render.torch_model import translate_graph
from codegen.runtime.initializers import TRUNCATED, hugectr_init, rule
from codegen.runtime.layers import MultiCross, WeightMultiply
from specfactory import CRITEO_LOCK, dcn_spec, write_spec


def check_normal(x: torch.Tensor, std: float) -> None:
    x = x.detach().double().flatten()
    assert x.numel() >= 50_000
    assert abs(x.mean().item()) < 0.03 * std
    assert x.std().item() == pytest.approx(std, rel=0.03)
    assert x.abs().max().item() > 3.5 * std          # normal tails: U(-a, a) of this stddev stops at 1.73 stddev


def check_uniform(x: torch.Tensor, limit: float) -> None:
    x = x.detach().double().flatten()
    assert x.numel() >= 50_000
    assert abs(x.mean().item()) < 0.03 * limit
    assert x.std().item() == pytest.approx(limit / math.sqrt(3), rel=0.03)
    assert limit * 0.99 < x.abs().max().item() <= limit


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(1234)


def test_inner_product_default_is_a_plain_normal_of_the_truncated_stddev():
    """FullyConnectedLayer's Default: the weight N(0, sqrt(1 / fan_avg) / 0.8796...) not truncated, the bias
    N(0, sqrt(1 / out))."""
    fc = hugectr_init(nn.Linear(300, 500), "InnerProduct")
    check_normal(fc.weight, math.sqrt(1 / 400) / TRUNCATED)
    fc = hugectr_init(nn.Linear(3, 60_000), "InnerProduct")
    check_normal(fc.bias, math.sqrt(1 / 60_000))


def test_inner_product_uniform_xavier_and_zero():
    fc = hugectr_init(nn.Linear(300, 500), "InnerProduct", weight="Uniform", bias="Zero")
    check_uniform(fc.weight, 1 / 800)
    assert not fc.bias.any()
    fc = hugectr_init(nn.Linear(300, 500), "InnerProduct", weight="XavierUniform", bias="XavierNorm")
    check_uniform(fc.weight, math.sqrt(3 / 400))
    assert rule("InnerProduct", 1, "XavierNorm", 300, 500) == ("normal", math.sqrt(1 / 250) / TRUNCATED)  # fan_in 0
    fc = hugectr_init(nn.Linear(3, 60_000), "InnerProduct", weight="XavierNorm", bias="Uniform")
    check_uniform(fc.bias, 1 / 60_000)                                 # the bias: 1 / (0 + out)
    fc = hugectr_init(nn.Linear(300, 500), "InnerProduct", weight="XavierNorm")
    check_normal(fc.weight, math.sqrt(1 / 400) / TRUNCATED)


def test_mlp_default_is_uniform_of_the_input_width_and_xavier_follows_the_layer_parity():
    mlp = hugectr_init(nn.Sequential(nn.Linear(400, 200), nn.ReLU(), nn.Linear(200, 300)), "MLP")
    check_uniform(mlp[0].weight, math.sqrt(1 / 400))
    check_uniform(mlp[2].weight, math.sqrt(1 / 200))
    mlp = hugectr_init(nn.Sequential(nn.Linear(400, 200), nn.ReLU(), nn.Linear(200, 300, bias=False)), "MLP",
                       weight="XavierNorm", bias="Zero")
    check_normal(mlp[0].weight, math.sqrt(1 / 300) / TRUNCATED)         # layer 0: Fan_avg
    check_normal(mlp[2].weight, math.sqrt(1 / 300) / TRUNCATED)         # layer 1: Fan_out
    assert not mlp[0].bias.any()
    assert rule("MLP", 3, "XavierUniform", 200, 300) == ("uniform", math.sqrt(3 / 300))


def test_multicross_weights_are_untruncated_fan_avg_normals_and_biases_zero():
    mc = hugectr_init(MultiCross(500, num_layers=120), "MultiCross")
    check_normal(mc.weight, math.sqrt(1 / 500))
    assert not mc.bias.any()
    mc = hugectr_init(MultiCross(500, num_layers=4, projection_dim=100), "MultiCross")
    check_normal(mc.u, math.sqrt(1 / 300))
    check_normal(mc.weight, math.sqrt(1 / 300))
    assert not mc.bias.any()
    # only a Default rule; Zero by HugeCTR's index % 2 of [weight, bias] (U, V, b per layer: V takes the bias type)
    mc = hugectr_init(MultiCross(500, num_layers=2, projection_dim=100), "MultiCross", bias="Zero")
    assert not mc.weight[0].any() and mc.u[0].any() and not mc.u[1].any() and mc.weight[1].any()


def test_weight_multiply_default_is_xavier_uniform_of_its_weight_dims():
    wm = WeightMultiply(400, 200)
    check_uniform(wm.weight, math.sqrt(3 / ((400 + 400 * 200) / 2)))
    hugectr_init(wm, "WeightMultiply", weight="Uniform")
    check_uniform(wm.weight, 1 / (400 + 400 * 200))
    hugectr_init(wm, "WeightMultiply", weight="XavierNorm")
    check_normal(wm.weight, math.sqrt(1 / ((400 + 400 * 200) / 2)) / TRUNCATED)


def test_norms_start_at_one_and_zero_and_honour_zero():
    bn = hugectr_init(nn.BatchNorm1d(8), "BatchNorm", weight="Zero", bias="Uniform")
    assert not bn.weight.any() and not bn.bias.any()
    ln = hugectr_init(nn.LayerNorm(8), "LayerNorm", weight="XavierNorm")
    assert (ln.weight == 1).all() and not ln.bias.any()


def test_an_unknown_initializer_or_kind_is_refused():
    with pytest.raises(ValueError, match="Initializer_t"):
        rule("InnerProduct", 0, "Glorot", 3, 4)
    with pytest.raises(ValueError, match="kind"):
        hugectr_init(nn.Linear(3, 4), "Conv")


def test_the_generated_model_names_each_layers_initializer(tmp_path):
    """A spec's weight_init_type / bias_init_type (gamma / beta for the norms) reach hugectr_init's call; Default is
    not written."""
    spec = dcn_spec("23.06", gpus=[0])
    spec["data"]["format"] = "parquet"
    spec["targets"] = ["torch"]
    layers = spec["model"]["layers"]
    layers[3].update(weight_init_type="XavierUniform", bias_init_type="Zero")           # fc1
    layers[2].update(bias_init_type="Zero")                                              # multicross1
    job = render_spec(open_spec(write_spec(tmp_path, spec, CRITEO_LOCK))).model.job
    init = translate_graph(job).init
    assert 'self.fc1 = hugectr_init(nn.Linear(429, 1024), "InnerProduct", weight="XavierUniform", bias="Zero")' in init
    assert 'self.fc2 = hugectr_init(nn.Linear(1024, 1024), "InnerProduct")' in init
    assert 'self.multicross1 = hugectr_init(MultiCross(429, num_layers=6), "MultiCross", bias="Zero")' in init
