"""Every dense layer type the PyTorch target translates, against HugeCTR's arithmetic (tests/hugectr_reference.py,
written from HugeCTR's layer unit tests). Each layer is translated by the real renderer (render/torch_model.py's
``_layer`` on a one-layer graph, its shapes from graph/shapes.py), its Model lines run as the generated file runs
them, forward and backward (torch.autograd) on small seeded inputs in float64, against the numpy reference's output
and gradients. Tolerance: TOL (float64 both sides; the formulas must agree, not just come close). The new layer
types also get one end-to-end check: a spec using them builds and the rendered train_torch.py's Model trains a step.
"""

from __future__ import annotations

import importlib.util
import json
from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import hugectr_reference as ref
from codegen.graph.ir import Enum, Layer, dense_values
from codegen.graph.shapes import Shape, Target, infer
from codegen.render.torch_model import _layer, _Model, _Names
from codegen.hugectr import versions as V
from codegen.runtime import layers as runtime_layers
from test_boundaries import _layers, project, spec_with

TOL = {"rtol": 1e-9, "atol": 1e-12}
B = 6


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


class Translated:
    """One layer as the renderer translates it: the module its __init__ lines build and its forward lines."""

    def __init__(self, type_: str, params: dict, in_shapes: list[Shape], n_tops: int = 1,
                 release: tuple[int, int] = (23, 6)):
        self.bottoms = tuple(f"in{i}" for i in range(len(in_shapes)))
        self.tops = tuple(f"out{i}" for i in range(n_tops))
        major, minor = release
        name = f"{major}.{minor:02d}" if major > 4 else f"{major}.{minor}"
        values = dense_values(params, name)     # as the builder resolves them (HugeCTR's defaults included)
        outs = infer(type_, values, list(in_shapes), n_tops, Target(name))
        layer = Layer(type_, self.bottoms, self.tops, tuple(params.items()), tuple(outs), tuple(in_shapes),
                      values=values)
        self.m, self.n = _Model(V.profile(name)), _Names()
        _layer(self.m, self.n, layer)
        self.module = nn.Module()
        self.names = {"self": self.module, "torch": torch, "nn": nn, "F": F,
                      **{h: getattr(runtime_layers, h) for h in self.m.helpers}}
        for line in self.m.init:
            exec(line, self.names)
        self.module.double()

    def __call__(self, *inputs: torch.Tensor):
        local = dict(self.names, **{self.n.var(b): x for b, x in zip(self.bottoms, inputs)})
        for line in self.m.forward:
            exec(line, local)
        if self.m.loss_inputs:      # a loss layer: what it reads (forward() returns it)
            return local[self.m.loss_inputs[0]]
        return local[self.n.var(self.tops[0])]

    def param(self, name: str) -> torch.Tensor:
        return dict(self.module.named_parameters())[name]


def leaf(a: np.ndarray) -> torch.Tensor:
    return torch.tensor(a, dtype=torch.float64, requires_grad=True)


def run(layer: Translated, xs: list[np.ndarray], dy: np.ndarray) -> tuple[np.ndarray, list[torch.Tensor]]:
    inputs = [leaf(x) for x in xs]
    y = layer(*inputs)
    y.backward(torch.tensor(dy))
    return y.detach().numpy(), inputs


def close(a, b) -> None:
    np.testing.assert_allclose(np.asarray(a.detach().numpy() if isinstance(a, torch.Tensor) else a), b, **TOL)


def set_param(p: torch.Tensor, value: np.ndarray) -> None:
    with torch.no_grad():
        p.copy_(torch.tensor(value))


def S(*dims: int, rows: int = 1) -> Shape:
    return Shape(tuple(dims), Fraction(rows))


RELU, NON = Enum("Activation_t", "Relu"), Enum("Activation_t", "Non")


# ---- memory layers: Reshape, Concat, Slice, Cast, Select --------------------------------------------------------

def test_reshape_and_selected_slots():
    """Reshape keeps HugeCTR's row-major layout (reshape_layer_test.cpp: a copy); selected slots take the slots
    given, in their order (reshape_layer.cu, selected_slots), backward scatters dy back."""
    x = rng().normal(size=(B, 4, 3))
    layer = Translated("Reshape", {"leading_dim": 6}, [S(4, 3)])
    y, (xt,) = run(layer, [x], dy := rng(1).normal(size=(B * 2, 6)))
    close(y, x.reshape(B * 2, 6))
    close(xt.grad, dy.reshape(x.shape))
    layer = Translated("Reshape", {"selected": True, "selected_slots": [3, 1]}, [S(4, 3)])
    y, (xt,) = run(layer, [x], dy := rng(2).normal(size=(B, 6)))
    close(y, x[:, [3, 1], :].reshape(B, 6))
    want = np.zeros_like(x)
    want[:, [3, 1], :] = dy.reshape(B, 2, 3)
    close(xt.grad, want)


def test_concat_and_slice():
    """Concat along the last axis (concat_layer_test.cpp); Slice copies its ranges of the width
    (slice_layer_test.cpp); backward of both the matching pieces of dy (a Slice's overlapping ranges add up)."""
    a, b = rng().normal(size=(B, 3)), rng(1).normal(size=(B, 5))
    y, (at, bt) = run(Translated("Concat", {"axis": 1}, [S(3), S(5)]), [a, b], dy := rng(2).normal(size=(B, 8)))
    close(y, np.concatenate([a, b], axis=1))
    close(at.grad, dy[:, :3])
    close(bt.grad, dy[:, 3:])
    layer = Translated("Slice", {"ranges": [(0, 3), (2, 5)]}, [S(5)], n_tops=2)
    xt = leaf(b)
    layer(xt)
    local = dict(layer.names, in0=xt)
    for line in layer.m.forward:
        exec(line, local)
    close(local["out0"], b[:, 0:3])
    close(local["out1"], b[:, 2:5])
    (local["out0"].sum() + 2 * local["out1"].sum()).backward()
    close(xt.grad, np.array([1, 1, 3, 2, 2.0]) * np.ones((B, 5)))


def test_cast_is_the_identity_in_float32():
    x = rng().normal(size=(B, 4))
    y, (xt,) = run(Translated("Cast", {}, [S(4)]), [x], dy := rng(1).normal(size=(B, 4)))
    close(y, x)
    close(xt.grad, dy)


@pytest.mark.parametrize("dim, index, shape", [(1, [3, 0, 3 - 1], (5, 4)), (2, [1], (3, 4)), (1, [2, 0], (5,))])
def test_select(dim, index, shape):
    x = rng().normal(size=(B, *shape))
    layer = Translated("Select", {"dim": dim, "index": index}, [S(*shape)], release=(23, 8))
    want, grads = ref.select(x, dim, index, dy := rng(1).normal(size=np.take(x, index, axis=dim).shape))
    y, (xt,) = run(layer, [x], dy)
    close(y, want)
    close(xt.grad, grads["x"])


# ---- fully connected: InnerProduct, FusedInnerProduct, MLP, GroupFusedInnerProduct's chain ----------------------

def _linear(layer: Translated, prefix: str, kernel: np.ndarray, bias: np.ndarray | None) -> None:
    set_param(layer.param(f"{prefix}weight"), kernel.T)     # nn.Linear keeps (out, in); HugeCTR's kernel is (in, out)
    if bias is not None:
        set_param(layer.param(f"{prefix}bias"), bias)


@pytest.mark.parametrize("type_, act, relu", [("InnerProduct", None, False), ("FusedInnerProduct", None, True),
                                              ("FusedInnerProduct", RELU, True), ("FusedInnerProduct", NON, False)])
def test_fully_connected(type_, act, relu):
    x, kernel, bias = rng().normal(size=(B, 5)), rng(1).normal(size=(5, 3)), rng(2).normal(size=3)
    params = {"num_output": 3, **({"act_type": act} if act is not None else {})}
    layer = Translated(type_, params, [S(5)])
    _linear(layer, "out0.", kernel, bias)
    want, grads = ref.fully_connected(x, kernel, bias, dy := rng(3).normal(size=(B, 3)), relu=relu)
    y, (xt,) = run(layer, [x], dy)
    close(y, want)
    close(xt.grad, grads["x"])
    close(layer.param("out0.weight").grad.T, grads["kernel"])
    close(layer.param("out0.bias").grad, grads["bias"])


def test_group_fused_inner_product_chain():
    """GroupFusedInnerProduct as HugeCTR expands it (graph/layers.py): Head and Body FusedInnerProducts with ReLU,
    each with four tops (the output and HugeCTR's _mask, _dRelu, _db buffers), the Tail with last_act_type. The
    renderer computes each layer once and reads only the first top."""
    x = rng().normal(size=(B, 4))
    head = Translated("FusedInnerProduct", {"num_output": 3, "pos_type": Enum("FcPosition_t", "Head"),
                                            "act_type": RELU}, [S(4)], n_tops=4)
    assert len(head.m.forward) == 1 and len(head.m.init) == 1
    tail = Translated("FusedInnerProduct", {"num_output": 2, "pos_type": Enum("FcPosition_t", "Tail"),
                                            "act_type": NON}, [S(3)] * 4)
    k1, b1, k2, b2 = (rng(i).normal(size=s) for i, s in enumerate([(4, 3), 3, (3, 2), 2], 1))
    _linear(head, "out0.", k1, b1)
    _linear(tail, "out0.", k2, b2)
    xt = leaf(x)
    h = head(xt)
    y = tail(h, h, h, h)
    y.backward(torch.tensor(dy := rng(9).normal(size=(B, 2))))
    want, grads = ref.mlp(x, [k1, k2], [b1, b2], [True, False], dy)
    close(y, want)
    close(xt.grad, grads["x"])
    close(head.param("out0.weight").grad.T, grads["kernel0"])
    close(tail.param("out0.bias").grad, grads["bias1"])


@pytest.mark.parametrize("params, relus, biases", [
    ({"num_outputs": [4, 3, 2]}, [True] * 3, [True] * 3),                           # act_type Relu, use_bias default
    ({"num_outputs": [4, 2], "act_type": NON, "use_bias": False}, [False] * 2, [False] * 2),
    ({"num_outputs": [4, 3, 2], "activations": [RELU, NON, RELU], "biases": [True, False, True]},
     [True, False, True], [True, False, True]),
])
def test_mlp(params, relus, biases):
    """MLP (4.2+): per layer the activation of `activations` (else act_type) and the bias of `biases` (else
    use_bias); the last layer's activation applies too (mlp_layer.cu)."""
    widths = params["num_outputs"]
    x = rng().normal(size=(B, 5))
    layer = Translated("MLP", {**params, "num_output": widths[-1]}, [S(5)])
    kernels = [rng(i).normal(size=(a, b)) for i, (a, b) in enumerate(zip([5, *widths], widths), 1)]
    bs = [rng(10 + i).normal(size=w) if on else None for i, (w, on) in enumerate(zip(widths, biases))]
    linears = [name[:-len(".weight")] for name, _ in layer.module.named_parameters() if name.endswith("weight")]
    for prefix, k, b in zip(linears, kernels, bs):
        _linear(layer, prefix + ".", k, b)
    assert sum(1 for name, _ in layer.module.named_parameters() if name.endswith("bias")) == sum(biases)
    want, grads = ref.mlp(x, kernels, bs, relus, dy := rng(9).normal(size=(B, widths[-1])))
    y, (xt,) = run(layer, [x], dy)
    close(y, want)
    close(xt.grad, grads["x"])
    for i, prefix in enumerate(linears):
        close(layer.param(prefix + ".weight").grad.T, grads[f"kernel{i}"])
        if biases[i]:
            close(layer.param(prefix + ".bias").grad, grads[f"bias{i}"])


# ---- activations ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("type_, params, fn", [
    ("ReLU", {}, ref.relu), ("ReLUHalf", {}, ref.relu), ("Sigmoid", {}, ref.sigmoid),
    ("ELU", {"elu_alpha": 0.7}, lambda x, dy: ref.elu(x, 0.7, dy)), ("Softmax", {}, ref.softmax)])
def test_activation(type_, params, fn):
    x = rng().normal(size=(B, 5))
    want, grads = fn(x, dy := rng(1).normal(size=(B, 5)))
    y, (xt,) = run(Translated(type_, params, [S(5)]), [x], dy)
    close(y, want)
    close(xt.grad, grads["x"])


def test_dropout_scales_kept_elements_in_training_and_passes_through_in_evaluation():
    x = rng().normal(size=(200, 5)) + 3.0      # no zeros of its own
    layer = Translated("Dropout", {"dropout_rate": 0.3}, [S(5)])
    torch.manual_seed(0)
    y, (xt,) = run(layer, [x], dy := rng(1).normal(size=x.shape))
    keep = (y != 0).astype(float)
    assert 0.6 < keep.mean() < 0.8
    want, grads = ref.dropout(x, keep, 0.3, dy)
    close(y, want)
    close(xt.grad, grads["x"])
    layer.module.eval()
    y, _ = run(layer, [x], dy)
    close(y, x)


# ---- normalizations ---------------------------------------------------------------------------------------------

def test_batch_norm_training_statistics_factor_and_evaluation():
    """Training normalizes with the batch's mean and biased variance; `factor` is cuDNN's exponentialAverageFactor,
    torch's momentum (running = (1 - factor) * running + factor * batch, unbiased variance); evaluation uses the
    running statistics; eps as given."""
    x, gamma, beta = rng().normal(size=(B, 4)) * 2 + 1, rng(1).normal(size=4), rng(2).normal(size=4)
    layer = Translated("BatchNorm", {"factor": 0.25, "eps": 1e-3}, [S(4)])
    bn = layer.module.out0
    set_param(bn.weight, gamma)
    set_param(bn.bias, beta)
    want, grads = ref.batch_norm(x, gamma, beta, 1e-3, dy := rng(3).normal(size=(B, 4)))
    y, (xt,) = run(layer, [x], dy)
    close(y, want)
    close(xt.grad, grads["x"])
    close(bn.weight.grad, grads["gamma"])
    close(bn.bias.grad, grads["beta"])
    mean, var = ref.batch_norm_running(np.zeros(4), np.ones(4), x, 0.25)
    close(bn.running_mean, mean)
    close(bn.running_var, var)
    layer.module.eval()
    y, _ = run(layer, [x], dy)
    close(y, gamma * (x - mean) / np.sqrt(var + 1e-3) + beta)


@pytest.mark.parametrize("shape", [(5,), (3, 5)])
def test_layer_norm(shape):
    x, gamma, beta = rng().normal(size=(B, *shape)), rng(1).normal(size=5), rng(2).normal(size=5)
    layer = Translated("LayerNorm", {"eps": 1e-4}, [S(*shape)])
    set_param(layer.module.out0.weight, gamma)
    set_param(layer.module.out0.bias, beta)
    want, grads = ref.layer_norm(x, gamma, beta, 1e-4, dy := rng(3).normal(size=x.shape))
    y, (xt,) = run(layer, [x], dy)
    close(y, want)
    close(xt.grad, grads["x"])
    close(layer.module.out0.weight.grad, grads["gamma"])
    close(layer.module.out0.bias.grad, grads["beta"])


# ---- elementwise and reductions ---------------------------------------------------------------------------------

@pytest.mark.parametrize("type_, n", [("Add", 3), ("Sub", 2), ("ElementwiseMultiply", 3)])
def test_elementwise(type_, n):
    xs = [rng(i).normal(size=(B, 4)) for i in range(n)]
    want, grads = ref.elementwise(xs, type_, dy := rng(9).normal(size=(B, 4)))
    y, ts = run(Translated(type_, {}, [S(4)] * n), xs, dy)
    close(y, want)
    for i, t in enumerate(ts):
        close(t.grad, grads[f"x{i}"])


@pytest.mark.parametrize("type_, axis, shape", [("ReduceSum", 1, (4,)), ("ReduceSum", 2, (3, 4)),
                                                ("ReduceMean", 1, (3, 4)), ("ReduceMean", 2, (3, 4))])
def test_reduce(type_, axis, shape):
    x = rng().normal(size=(B, *shape))
    out = list(x.shape)
    out[axis] = 1
    want, grads = ref.reduce(x, axis, type_ == "ReduceMean", dy := rng(1).normal(size=out))
    y, (xt,) = run(Translated(type_, {"axis": axis}, [S(*shape)]), [x], dy)
    close(y, want)
    close(xt.grad, grads["x"])


# ---- the layers with runtime helpers: MultiCross, Interaction, FmOrder2, WeightMultiply ------------------------

@pytest.mark.parametrize("projection", [None, 2])
def test_multi_cross(projection):
    """Per layer HugeCTR's weight vector (DCN) or U, V (DCNv2, projection_dim) and its bias vector."""
    x = rng().normal(size=(B, 5))
    params = {"num_layers": 2, **({"projection_dim": projection} if projection else {})}
    layer = Translated("MultiCross", params, [S(5)], release=(23, 6))
    mc = layer.module.out0
    biases = [rng(20 + i).normal(size=5) for i in range(2)]
    set_param(mc.bias, np.stack(biases))
    if projection is None:
        kernels = [rng(10 + i).normal(size=5) * 0.5 for i in range(2)]
        set_param(mc.weight, np.stack(kernels))
    else:
        kernels = [(rng(10 + i).normal(size=(5, 2)) * 0.5, rng(30 + i).normal(size=(2, 5)) * 0.5) for i in range(2)]
        set_param(mc.u, np.stack([k[0] for k in kernels]))
        set_param(mc.weight, np.stack([k[1] for k in kernels]))
    want, grads = ref.multi_cross(x, kernels, biases, dy := rng(9).normal(size=(B, 5)), projection)
    y, (xt,) = run(layer, [x], dy)
    close(y, want)
    close(xt.grad, grads["x"])
    for i in range(2):
        close(mc.bias.grad[i], grads[f"bias{i}"])
        if projection is None:
            close(mc.weight.grad[i], grads[f"kernel{i}"])
        else:
            close(mc.u.grad[i], grads[f"u{i}"])
            close(mc.weight.grad[i], grads[f"v{i}"])


@pytest.mark.parametrize("slots", [3, 8])
def test_interaction(slots):
    """The MLP output, then the strictly-lower-triangle dot products row by row, then one zero of padding."""
    mlp, emb = rng().normal(size=(B, 4)), rng(1).normal(size=(B, slots, 4))
    layer = Translated("Interaction", {}, [S(4), S(slots, 4)])
    want, grads = ref.interaction(mlp, emb, dy := rng(2).normal(size=(B, 4 + slots * (slots + 1) // 2 + 1)))
    assert (want[:, -1] == 0).all()
    y, (mt, et) = run(layer, [mlp, emb], dy)
    close(y, want)
    close(mt.grad, grads["mlp"])
    close(et.grad, grads["emb"])


def test_fm_order2():
    x = rng().normal(size=(B, 12))
    want, grads = ref.fm_order2(x, 4, dy := rng(1).normal(size=(B, 4)))
    y, (xt,) = run(Translated("FmOrder2", {"out_dim": 4}, [S(12)]), [x], dy)
    close(y, want)
    close(xt.grad, grads["x"])


def test_weight_multiply():
    x, w = rng().normal(size=(B, 3)), rng(1).normal(size=(3, 4))
    layer = Translated("WeightMultiply", {"weight_dims": [3, 4]}, [S(3)])
    set_param(layer.module.out0.weight, w)
    want, grads = ref.weight_multiply(x, w, dy := rng(2).normal(size=(B, 12)))
    y, (xt,) = run(layer, [x], dy)
    close(y, want)
    close(xt.grad, grads["x"])
    close(layer.module.out0.weight.grad, grads["weight"])


def test_binary_cross_entropy_loss():
    """The graph's loss: the Model returns the logits and the trainer's step takes F.binary_cross_entropy_with_logits
    of them (runtime/trainer.py), which must be HugeCTR's mean loss and its gradient (s - t) / batch. The trainer
    takes the loss of the logits in float32: tolerance rtol 1e-6."""
    x, t = rng().normal(size=(B, 1)), (rng(1).random(size=(B, 1)) > 0.5).astype(float)
    layer = Translated("BinaryCrossEntropyLoss", {}, [S(1), S(1)])
    xt = leaf(x)
    logits = layer(xt, torch.tensor(t))
    loss = F.binary_cross_entropy_with_logits(logits.float().double(), torch.tensor(t))
    loss.backward()
    want, grads = ref.binary_cross_entropy(x, t)
    np.testing.assert_allclose(loss.item(), want, rtol=1e-6)
    np.testing.assert_allclose(xt.grad.numpy(), grads["x"], rtol=1e-6, atol=1e-9)


# ---- end to end: a spec with each new layer type builds and its Model trains a step --------------------------------

NEW_LAYERS = {
    "MLP": ({"type": "MLP", "bottom": "r", "top": "s", "num_outputs": [16, 8], "activations": ["Relu", "Non"],
             "biases": [True, False]}, {}),
    "Select": ({"type": "Select", "bottom": "r", "top": "s", "dim": 1, "index": [3, 0, 7]},
               {"hugectr_version": "23.08"}),
    "GroupFusedInnerProduct": ({"type": "GroupFusedInnerProduct", "bottom": "r", "top": ["s1", "s"],
                                "num_outputs": [16, 8], "last_act_type": "Non"},
                               {"solver.use_mixed_precision": True, "solver.scaler": 1024}),
}


@pytest.mark.parametrize("name", sorted(NEW_LAYERS))
def test_a_spec_with_the_layer_builds_and_its_model_trains(tmp_path, name):
    from codegen.output import write
    from codegen.pipeline import open_spec, render_spec

    middle, changes = NEW_LAYERS[name]
    spec = spec_with({"triton.enabled": False, **changes}, spec_with(_layers(middle)))
    spec["hugectr_version"] = changes.get("hugectr_version", spec["hugectr_version"])
    write(tmp_path / "out", render_spec(open_spec(project(tmp_path, spec))).files)
    module_spec = importlib.util.spec_from_file_location(f"parity_{name}", tmp_path / "out" / "train_torch.py")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    features = json.loads((tmp_path / "out" / "features.json").read_text())
    torch.manual_seed(0)
    model = module.Model(features)
    ids = torch.stack([torch.randint(0, c["cardinality"], (B,)) for c in features["sparse"][0]["columns"]], dim=1)
    logits = model(torch.zeros(B, 0), ids.unsqueeze(-1))
    assert logits.shape == (B, 1)
    F.binary_cross_entropy_with_logits(logits, torch.ones(B, 1)).backward()
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("release", ["3.2", "23.06", "25.03"])
@pytest.mark.parametrize("middle, reason", [
    ({"type": "GRU", "bottom": "r", "top": "s", "num_output": 8, "batchsize": 16, "SeqLength": 2, "vector_size": 16},
     "reads the output's gradient from a gradient buffer no layer writes (get_wgrad(1))"),
    ({"type": "Gather", "bottom": "r", "top": "s", "indices": [0, 2]},
     "hands GatherLayer an output tensor it never allocates")])
def test_gru_and_gather_are_refused_with_hugectr_s_reason(tmp_path, middle, reason, release):
    """HugeCTR cannot run a model with GRU or Gather (graph/unrunnable.py UNRUNNABLE and docs/torch.md cite the lines of
    gru_layer.cu and gather_layer.cu): the graph refuses them for every target at every release, naming the layer;
    from 23.08 Gather with the text HugeCTR's SelectLayer throws."""
    from codegen.errors import UserError
    from codegen.lock import load_features
    from codegen.model.build import build_model
    from codegen.specfile.context import open_spec

    spec = spec_with({"triton.enabled": False}, spec_with(_layers(middle)))
    spec["hugectr_version"] = release
    ctx = open_spec(project(tmp_path, spec))
    with pytest.raises(UserError) as info:
        build_model(ctx, *load_features(ctx, check_stale=False))
    (problem,) = info.value.problems
    assert problem.field == "model.layers[1]", problem
    if middle["type"] == "Gather" and release == "25.03":
        assert "HugeCTR rejects this: \"Dim 0 is not allowed to do select because it's batch dim.\"" in problem.message
    else:
        assert "ctrgen refuses this: " in problem.message and reason in problem.message, problem.message


def test_every_layer_type_translates_or_is_refused_with_hugectr_s_reason():
    """All 38 Layer_t members of the releases ctrgen knows: 36 translate (each with the parity test docs/torch.md's
    table names), GRU and Gather are refused for every target with the reason UNRUNNABLE gives; none is left
    unaccounted."""
    from codegen.graph.unrunnable import UNRUNNABLE
    from codegen.hugectr import api as A
    from codegen.torch_target import LAYER_TYPES

    members = set(A.members_ever("Layer_t"))
    assert len(members) == 38
    assert members - LAYER_TYPES == set(UNRUNNABLE) == {"GRU", "Gather"}
    assert len(members & LAYER_TYPES) == 36 and not LAYER_TYPES - members
