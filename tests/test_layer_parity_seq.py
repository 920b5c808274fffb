"""The PyTorch target's layers of HugeCTR's attention models (DIN, BST) against HugeCTR's arithmetic.

Three small specs (HugeCTR 3.3, 23.06 and 23.09: DotProduct exists up to 3.4, MultiHeadAttention as ctrgen models it
from 4.3, and both it and SequenceMask change form in 23.08 / 23.09) are built through the model builder and
translated by the real renderer (render/torch_model.py). Each parity test runs the rendered forward line of one
layer on seeded random inputs (float32), backpropagates a seeded random gradient, and compares output and input
gradients with the NumPy (float64) references of tests/hugectr_reference_seq.py, which are written from HugeCTR's
layer unit tests and kernels (their docstrings name file and release). Tolerance: float32 against float64,
rtol 1e-5 and atol 1e-5 (TOL) unless a test says otherwise. The end-to-end tests import each rendered
train_torch.py and run its Model forward and backward, every layer under test on the path to the loss.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import hugectr_reference_seq as ref
from codegen.lock import load_features
from codegen.model.build import build_model
from codegen.pipeline import open_spec
from codegen.render.torch_model import features_json, render_train_torch, translate_graph
from codegen.runtime import layers
from specfactory import criteo_lock, write_spec

TOL = {"rtol": 1e-5, "atol": 1e-5}
BATCH = 3

FRC = {"type": "FusedReshapeConcat", "bottom": ["hist_emb", "cate_emb"], "top": ["his", "item"]}
QKV = [{"type": "InnerProduct", "bottom": b, "top": t, "num_output": 8}
       for t, b in (("q", "hist_emb"), ("k", "cate_emb"), ("v", "cate_emb"))]
GRAPHS = {
    # DIN's layers: history and target item, attention weights, pooled history (every top reaches the loss)
    "3.3": [
        FRC, {"type": "Scale", "bottom": "item", "top": "item4", "axis": 1, "factor": 4},
        {"type": "DotProduct", "bottom": ["item4", "his"], "top": "prod"},
        {"type": "PReLU_Dice", "bottom": "prod", "top": "dice", "elu_alpha": 0.2, "eps": 1e-3},
        {"type": "FusedReshapeConcatGeneral", "bottom": ["hist_emb", "cate_emb"], "top": "rows"},
        {"type": "Reshape", "bottom": "rows", "top": "rows3", "leading_dim": 16, "time_step": 5},
        {"type": "Reshape", "bottom": "dice", "top": "dice_flat", "leading_dim": 64},
        {"type": "InnerProduct", "bottom": "dice_flat", "top": "att", "num_output": 5},
        {"type": "Reshape", "bottom": "att", "top": "att3", "leading_dim": 5, "time_step": 1},
        {"type": "MatrixMultiply", "bottom": ["att3", "rows3"], "top": "pooled"},
        {"type": "Reshape", "bottom": "pooled", "top": "pooled2", "leading_dim": 16},
        {"type": "Slice", "bottom": "dense", "top": ["gate", "rest"], "ranges": [[0, 1], [1, 13]]},
        {"type": "Scale", "bottom": "gate", "top": "gate16", "axis": 0, "factor": 16},
        {"type": "ElementwiseMultiply", "bottom": ["pooled2", "gate16"], "top": "final"},
    ],
    # BST's layers as 4.3 - 23.06 build them: scores and 4D value, the 4D products, the one-input mask
    "23.06": [
        *QKV, {"type": "MultiHeadAttention", "bottom": ["q", "k", "v"], "top": ["score", "value4d"],
               "num_attention_heads": 2},
        {"type": "Slice", "bottom": "dense", "top": ["len", "rest"], "ranges": [[0, 1], [1, 13]]},
        {"type": "SequenceMask", "bottom": "len", "top": "mask", "max_sequence_len": 5},
        {"type": "MultiHeadAttention", "bottom": ["score", "value4d"], "top": "attended", "transpose_b": False},
        {"type": "MultiHeadAttention", "bottom": ["value4d", "value4d"], "top": "vv", "transpose_b": True},
        {"type": "MatrixMultiply", "bottom": ["vv", "value4d"], "top": "mm"},
        {"type": "Reshape", "bottom": "attended", "top": "a2", "leading_dim": 40},
        {"type": "Reshape", "bottom": "mm", "top": "m2", "leading_dim": 40},
        {"type": "Reshape", "bottom": "mask", "top": "mask2", "leading_dim": 5},
        {"type": "Softmax", "bottom": ["score", "mask"], "top": "probs", "factor": 0.5},   # MaskedSoftmaxLayer
        {"type": "Reshape", "bottom": "probs", "top": "p2", "leading_dim": 50},
        {"type": "Add", "bottom": ["a2", "m2"], "top": "sum"},
        {"type": "Concat", "bottom": ["sum", "mask2", "p2"], "top": "final"},
    ],
    # 23.09+: one MultiHeadAttention (with and without the mask), the two-input mask
    "23.09": [
        *QKV, {"type": "Slice", "bottom": "dense", "top": ["len_from", "len_to", "rest"],
               "ranges": [[0, 1], [1, 2], [2, 13]]},
        {"type": "SequenceMask", "bottom": ["len_from", "len_to"], "top": "mask", "max_sequence_len_from": 5,
         "max_sequence_len_to": 5},
        {"type": "MultiHeadAttention", "bottom": ["q", "k", "v", "mask"], "top": "masked", "num_attention_heads": 2},
        {"type": "MultiHeadAttention", "bottom": ["q", "k", "v"], "top": "plain", "num_attention_heads": 4},
        {"type": "Add", "bottom": ["masked", "plain"], "top": "sum"},
        {"type": "Softmax", "bottom": ["mask", "mask"], "top": "mprobs", "factor": 2.0},   # a mask block per sample
        {"type": "Reshape", "bottom": "sum", "top": "s2", "leading_dim": 40},
        {"type": "Reshape", "bottom": "mprobs", "top": "mp2", "leading_dim": 25},
        {"type": "Concat", "bottom": ["s2", "mp2"], "top": "final"},
    ],
}


def _spec(version: str) -> dict:
    tail = [{"type": "InnerProduct", "bottom": "final", "top": "tail_fc", "num_output": 1},
            {"type": "BinaryCrossEntropyLoss", "bottom": ["tail_fc", "label"], "top": "loss"}]
    emb = {"workspace_size_per_gpu_in_mb": 8, "embedding_vec_size": 8}
    return {
        "version": 1, "name": "seq", "hugectr_version": version, "targets": ["hugectr", "torch"],
        "triton": {"enabled": False},
        "data": {"format": "parquet", "train": ["/data/train/_file_list.txt"], "eval": "/data/valid/_file_list.txt"},
        "solver": {"vvgpu": [[0]], "batchsize": 64, "batchsize_eval": 64},
        "input": {"sparse": [{"name": "hist", "columns": [f"C{i}" for i in range(1, 6)], "nnz_per_slot": 1},
                             {"name": "cate", "columns": [f"C{i}" for i in range(6, 11)], "nnz_per_slot": 1}]},
        "embeddings": [{"name": "hist_emb", "input": "hist", **emb}, {"name": "cate_emb", "input": "cate", **emb}],
        "model": {"preset": "layers", "layers": GRAPHS[version] + tail},
        "training": {"max_iter": 10, "display": 5, "eval_interval": 5},
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    """release -> (job, features) of its spec, built by the model builder (the torch rules included)."""
    out = {}
    for version in GRAPHS:
        path = write_spec(tmp_path_factory.mktemp("seq") / "specs", _spec(version), criteo_lock(slots=10), name="seq")
        ctx = open_spec(path)
        features, text = load_features(ctx, check_stale=False)
        out[version] = (build_model(ctx, features, text).job, features)
    return out


def _run_layer(built: dict, version: str, top: str, inputs: dict[str, np.ndarray], grads: list[np.ndarray]):
    """Run the rendered forward line that makes `top` on `inputs` (float32 copies), backpropagate `grads` into its
    outputs; -> (outputs, input gradients by name) as float64 arrays."""
    job, _ = built[version]
    layer = next(x for x in job.graph.layers if top in x.tops)
    model = translate_graph(job)
    (line,) = [x for x in model.forward if x.startswith(f"{', '.join(layer.tops)} = ")]
    scope = {name: getattr(layers, name) for name in model.helpers}   # as train_torch.py imports them
    scope |= {"torch": torch, "F": F}
    tensors = {k: torch.tensor(v, dtype=torch.float32, requires_grad=True) for k, v in inputs.items()}
    run = scope | tensors
    exec(line, run)   # noqa: S102 (the renderer's own line, in a namespace of its own)
    outs = [run[t] for t in layer.tops]
    differentiable = [(o, g) for o, g in zip(outs, grads) if o.requires_grad]
    if differentiable:
        torch.autograd.backward([o for o, _ in differentiable],
                                [torch.tensor(g, dtype=torch.float32) for _, g in differentiable])
    got = {k: (t.grad.double().numpy() if t.grad is not None else None) for k, t in tensors.items()}
    return [o.detach().double().numpy() for o in outs], got


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape)


def test_prelu_dice(built):
    """prelu_dice_layer_test.cpp / prelu_dice_layer.cu (v23.06.01); TOL. HugeCTR's own backward (not autograd's)."""
    rng = np.random.default_rng(1)
    x, dy = _rand(rng, BATCH * 4, 16), _rand(rng, BATCH * 4, 16)
    x[:, 0] *= 0.01     # a column of small variance, where eps weighs
    (y,), g = _run_layer(built, "3.3", "dice", {"prod": x}, [dy])
    np.testing.assert_allclose(y, ref.dice_forward(x, 0.2, 1e-3), **TOL)
    np.testing.assert_allclose(g["prod"], ref.dice_backward(x, dy, 0.2, 1e-3), **TOL)


@pytest.mark.parametrize("top, bottom, axis, factor, rows", [("item4", "item", 1, 4, BATCH), ("gate16", "gate", 0, 16, BATCH)])
def test_scale(built, top, bottom, axis, factor, rows):
    """scale_layer_test.cpp (v23.06.01), both axes; exact (a copy). The backward keeps the first copy's gradient."""
    rng = np.random.default_rng(2)
    width = 16 if axis == 1 else 1
    x = _rand(rng, rows, width)
    dy = _rand(rng, *ref.scale_forward(x, axis, factor).shape)
    (y,), g = _run_layer(built, "3.3", top, {bottom: x}, [dy])
    np.testing.assert_allclose(y, ref.scale_forward(x, axis, factor), rtol=0, atol=1e-7)
    np.testing.assert_allclose(g[bottom], ref.scale_backward(dy, axis, factor), rtol=0, atol=1e-7)


def test_dot_product(built):
    """dot_product_layer_test.cpp (v3.3); TOL; a zero input gives the zero gradient HugeCTR's backward gives."""
    rng = np.random.default_rng(3)
    a, b, dy = _rand(rng, BATCH * 4, 16), _rand(rng, BATCH * 4, 16), _rand(rng, BATCH * 4, 16)
    a[0, :3] = 0.0
    (y,), g = _run_layer(built, "3.3", "prod", {"item4": a, "his": b}, [dy])
    np.testing.assert_allclose(y, ref.dot_product_forward([a, b]), **TOL)
    da, db = ref.dot_product_backward([a, b], dy)
    np.testing.assert_allclose(g["item4"], da, **TOL)
    np.testing.assert_allclose(g["his"], db, **TOL)
    assert (g["item4"][0, :3] == 0).all()


def test_fused_reshape_concat(built):
    """fused_reshape_concat_layer_test.cpp (v23.06.01): history slots first output, last slot second; exact."""
    rng = np.random.default_rng(4)
    h, c = _rand(rng, BATCH, 5, 8), _rand(rng, BATCH, 5, 8)
    d_item, d_ad = _rand(rng, BATCH * 4, 16), _rand(rng, BATCH, 16)
    (item, ad), g = _run_layer(built, "3.3", "his", {"hist_emb": h, "cate_emb": c}, [d_item, d_ad])
    want_item, want_ad = ref.fused_reshape_concat_forward([h, c])
    np.testing.assert_array_equal(item, want_item.astype(np.float32))
    np.testing.assert_array_equal(ad, want_ad.astype(np.float32))
    for name, want in zip(("hist_emb", "cate_emb"), ref.fused_reshape_concat_backward(d_item, d_ad, [8, 8])):
        np.testing.assert_array_equal(g[name], want.astype(np.float32))


def test_fused_reshape_concat_general(built):
    """fused_reshape_concat_general_layer_test.cpp (v23.06.01); exact."""
    rng = np.random.default_rng(5)
    h, c, dy = _rand(rng, BATCH, 5, 8), _rand(rng, BATCH, 5, 8), _rand(rng, BATCH * 5, 16)
    (y,), g = _run_layer(built, "3.3", "rows", {"hist_emb": h, "cate_emb": c}, [dy])
    np.testing.assert_array_equal(y, ref.fused_reshape_concat_general_forward([h, c]).astype(np.float32))
    for name, want in zip(("hist_emb", "cate_emb"), ref.fused_reshape_concat_general_backward(dy, 5, [8, 8])):
        np.testing.assert_array_equal(g[name], want.astype(np.float32))


@pytest.mark.parametrize("version, top, a, b", [("3.3", "pooled", ("att3", (1, 5)), ("rows3", (5, 16))),
                                                ("23.06", "mm", ("vv", (2, 5, 5)), ("value4d", (2, 5, 4)))])
def test_matrix_multiply(built, version, top, a, b):
    """matrix_multiply_test.cpp (v23.06.01), 3D and 4D; TOL."""
    rng = np.random.default_rng(6)
    x, w = _rand(rng, BATCH, *a[1]), _rand(rng, BATCH, *b[1])
    dy = _rand(rng, *ref.matmul_forward(x, w).shape)
    (y,), g = _run_layer(built, version, top, {a[0]: x, b[0]: w}, [dy])
    np.testing.assert_allclose(y, ref.matmul_forward(x, w), **TOL)
    dx, dw = ref.matmul_backward(x, w, dy)
    np.testing.assert_allclose(g[a[0]], dx, **TOL)
    np.testing.assert_allclose(g[b[0]], dw, **TOL)


def test_sequence_mask_one_input(built):
    """sequence_mask_layer_test.cpp (v23.06.01) with the kernel's int lengths (a fraction truncated); exact."""
    lengths = np.array([[0.0], [2.7], [5.0]])
    (y,), _ = _run_layer(built, "23.06", "mask", {"len": lengths}, [])
    np.testing.assert_array_equal(y, ref.sequence_mask(lengths, 5))
    assert y[1, 0, 0].tolist() == [1, 1, 0, 0, 0]


def test_sequence_mask_two_inputs(built):
    """core23_layer_test/sequence_mask_layer_test.cpp (v23.09.00): rows below `from`, columns below `to`; exact."""
    lf, lt = np.array([[1.0], [3.0], [5.0]]), np.array([[4.0], [0.0], [2.0]])
    (y,), _ = _run_layer(built, "23.09", "mask", {"len_from": lf, "len_to": lt}, [])
    np.testing.assert_array_equal(y, ref.sequence_mask_from_to(lf, lt, 5, 5))


def test_multi_head_attention_3d(built):
    """multi_head_attention_layer_test.cpp (v23.06.01), 3D query/key/value -> scores / sqrt(d) and 4D value; TOL."""
    rng = np.random.default_rng(7)
    q, k, v = (_rand(rng, BATCH, 5, 8) for _ in range(3))
    ds, dv4 = _rand(rng, BATCH, 2, 5, 5), _rand(rng, BATCH, 2, 5, 4)
    (score, value4d), g = _run_layer(built, "23.06", "score", {"q": q, "k": k, "v": v}, [ds, dv4])
    want_s, want_v = ref.mha_3d_forward(q, k, v, 2)
    np.testing.assert_allclose(score, want_s, **TOL)
    np.testing.assert_allclose(value4d, want_v, **TOL)
    for name, want in zip("qkv", ref.mha_3d_backward(q, k, v, 2, ds, dv4)):
        np.testing.assert_allclose(g[name], want, **TOL)


@pytest.mark.parametrize("top, a, b, transpose_b", [("attended", "score", "value4d", False),
                                                    ("vv", "value4d", "value4d", True)])
def test_multi_head_attention_4d(built, top, a, b, transpose_b):
    """multi_head_attention_layer_test.cpp (v23.06.01), 4D: a b (heads merged) or a b^T / sqrt(d); TOL."""
    rng = np.random.default_rng(8)
    shapes = {"score": (2, 5, 5), "value4d": (2, 5, 4)}
    x = _rand(rng, BATCH, *shapes[a])
    w = x if a == b else _rand(rng, BATCH, *shapes[b])
    dy = _rand(rng, *ref.mha_4d_forward(x, w, transpose_b).shape)
    inputs = {a: x} if a == b else {a: x, b: w}
    (y,), g = _run_layer(built, "23.06", top, inputs, [dy])
    np.testing.assert_allclose(y, ref.mha_4d_forward(x, w, transpose_b), **TOL)
    dx, dw = ref.mha_4d_backward(x, w, transpose_b, dy)
    np.testing.assert_allclose(g[a], dx + dw if a == b else dx, **TOL)   # one tensor on both sides: both gradients
    if a != b:
        np.testing.assert_allclose(g[b], dw, **TOL)


@pytest.mark.parametrize("top, heads, masked", [("masked", 2, True), ("plain", 4, False)])
def test_multi_head_attention_23_09(built, top, heads, masked):
    """multi_head_attention_layer.cu (v23.09.00) with masked_softmax_layer_test.cpp's softmax; TOL. Every query row
    keeps a key: a row masked whole is scores - 10000, whose float32 rounding (HugeCTR's too) is far above TOL."""
    rng = np.random.default_rng(9)
    q, k, v = (_rand(rng, BATCH, 5, 8) for _ in range(3))
    mask = ref.sequence_mask_from_to(np.full((BATCH, 1), 5.0), np.array([[5.0], [3.0], [1.0]]), 5, 5)
    dy = _rand(rng, BATCH, 5, 8)
    inputs = {"q": q, "k": k, "v": v} | ({"mask": mask} if masked else {})
    (y,), g = _run_layer(built, "23.09", top, inputs, [dy])
    m = mask if masked else None
    np.testing.assert_allclose(y, ref.mha_23_09_forward(q, k, v, heads, m), **TOL)
    for name, want in zip("qkv", ref.mha_23_09_backward(q, k, v, heads, dy, m)):
        np.testing.assert_allclose(g[name], want, **TOL)


def test_masked_softmax_one_row_per_sample(built):
    """The two-input Softmax up to 23.06: masked_softmax_layer_test.cpp (v23.06.01), a mask row of S per sample for
    every head and row, scores scaled by `factor`; forward and backward, TOL. The mask is a SequenceMask's, one
    sample's key positions masked whole but one."""
    rng = np.random.default_rng(10)
    x = _rand(rng, BATCH, 2, 5, 5)
    mask = ref.sequence_mask(np.array([[5.0], [3.0], [1.0]]), 5)
    dy = _rand(rng, BATCH, 2, 5, 5)
    (y,), g = _run_layer(built, "23.06", "probs", {"score": x, "mask": mask}, [dy])
    want = ref.masked_softmax_layer_forward(x, mask, 0.5, per_row=False)
    np.testing.assert_allclose(y, want, **TOL)
    np.testing.assert_allclose(g["score"], ref.masked_softmax_layer_backward(want, dy, 0.5), **TOL)
    assert g["mask"] is None or not g["mask"].any()
    assert np.abs(y[2, :, :, 1:]).max() < 1e-6      # a masked key position gets no weight


def test_masked_softmax_block_per_sample(built):
    """The two-input Softmax from 23.08: core23_layer_test/masked_softmax_layer_test.cpp (v23.09.00), a (rows, S)
    mask block per sample (here the mask is also the scores); forward and backward, TOL."""
    rng = np.random.default_rng(11)
    mask = ref.sequence_mask_from_to(np.array([[5.0], [2.0], [4.0]]), np.array([[5.0], [3.0], [1.0]]), 5, 5)
    dy = _rand(rng, BATCH, 1, 5, 5)
    (y,), g = _run_layer(built, "23.09", "mprobs", {"mask": mask}, [dy])
    want = ref.masked_softmax_layer_forward(mask, mask, 2.0, per_row=True)
    np.testing.assert_allclose(y, want, **TOL)
    np.testing.assert_allclose(g["mask"], ref.masked_softmax_layer_backward(want, dy, 2.0), **TOL)


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)    # defines Model; trains only under __main__
    return module


@pytest.mark.parametrize("version", list(GRAPHS))
def test_rendered_model_runs_forward_and_backward(built, tmp_path, version):
    """The spec builds, train_torch.py renders and imports, and its Model runs forward and backward with every
    layer under test on the path to the loss (the embeddings receive a gradient through them)."""
    job, features = built[version]
    path = tmp_path / "train_torch.py"
    path.write_text(render_train_torch(job, features, "# test\n"))
    model = _import(path, f"train_torch_seq_{version.replace('.', '_')}").Model(features_json(job, features))
    torch.manual_seed(0)
    dense = torch.rand(BATCH, 13) * 5
    ids = [torch.randint(0, 1000, (BATCH, 5, 1)) for _ in range(2)]
    out = model(dense, *ids)
    assert out.shape == (BATCH, 1) and torch.isfinite(out).all()
    out.sum().backward()
    grads = {name: p.grad for name, p in model.named_parameters()}
    assert all(g is not None and torch.isfinite(g).all() for g in grads.values()), [k for k, g in grads.items() if g is None]
    assert any(g.abs().sum() > 0 for name, g in grads.items() if name.startswith("hist_emb"))
