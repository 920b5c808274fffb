"""HugeCTR's Ftrl in the torch target (runtime/ftrl.py): the dense step and the embedding collection's row step
against a numpy reference written from HugeCTR's kernels, checkpoint and resume of their state, and which specs
translate and which are refused.

The reference (``_ftrl``) follows HugeCTR v23.09.00:
- HugeCTR/src/optimizers/ftrl_optimizer.cu lines 27-43 (ftrl_update_kernel) with its call at lines 115-116 / 128-129:
  the kernel's lambda2 argument is lambda2 + beta / lr; g = wgrad / scaler; n' = n + g^2;
  z' = z + g + (sqrt(n + FLT_EPSILON) - sqrt(n' + FLT_EPSILON)) * w / lr;
  w' = (lambda1 * (1 - 2 signbit(z')) - z') / (sqrt(n' + FLT_EPSILON) / lr + lambda2 + beta / lr)
       * signbit(lambda1 - |z'|); n and z start at zero (initialize(), lines 86-99).
- HugeCTR/embedding_storage/ragged_static_embedding.cu lines 155-270 (FtrlOptimizer::update, the same arithmetic per
  element of a row) and lines 659-696 (RaggedStaticEmbeddingTable::update: the kernel runs over the batch's unique
  keys only, with each key's summed gradient); the z and n buffers start at zero (lines 482-495).
- Before v23.04.00 the kernels take sqrt(n) without FLT_EPSILON (v4.3 ftrl_optimizer.cu lines 27-42).
Tolerance: rtol 1e-5, atol 1e-6 (float32 arithmetic in a different order from the reference's float64).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn as nn

from codegen.errors import UserError
from codegen.pipeline import open_spec, render_spec
from codegen.runtime.collection import CollectionTable
from codegen.runtime.dense_optim import DenseOptimizer
from codegen.runtime.errors import DataError
from codegen.runtime.job import Optimizer
from codegen.runtime.optimizers import make_optimizer
from test_collection_torch import SHARED, torch_spec

FLT_EPSILON = float(np.finfo(np.float32).eps)   # <float.h>'s, as the kernels add it (the reference's own)
HYPER = {"beta": 0.9, "lambda1": 0.02, "lambda2": 0.1, "eps": FLT_EPSILON}   # lambda1: some elements hit zero
SPEC = Optimizer("Ftrl", "Ftrl", HYPER, graph_safe=False)
RTOL, ATOL = 1e-5, 1e-6
FTRL_SGD = ("optimizer_type=hugectr.Optimizer_t.SGD, update_type=hugectr.Update_t.Local,\n"
            "                                    atomic_update=True)")
FTRL = ("optimizer_type=hugectr.Optimizer_t.Ftrl, update_type=hugectr.Update_t.Global,\n"
        "                                    beta=0.9, lambda1=0.1, lambda2=0.1)")


def _ftrl(w, n, z, g, lr, beta, lambda1, lambda2, eps):
    """One step of HugeCTR's ftrl_update_kernel on float64 arrays (see the module docstring); returns (w, n, z)."""
    n_new = n + g * g
    z_new = z + g + (np.sqrt(n + eps) - np.sqrt(n_new + eps)) * w / lr
    x = lambda1 * (1.0 - 2.0 * np.signbit(z_new)) - z_new
    y = np.sqrt(n_new + eps) / lr + (lambda2 + beta / lr)
    return x / y * np.signbit(lambda1 - np.abs(z_new)), n_new, z_new


@pytest.mark.parametrize("eps", [FLT_EPSILON, 0.0], ids=["23.04+", "4.3-23.02"])
def test_dense_step_equals_hugectrs_kernel(eps):
    """Four steps over two parameters with a changing learning rate (the warmup's): each element as the kernel
    computes it, n and z included; some elements end at exactly zero (|z| <= lambda1), others not."""
    hyper = {**HYPER, "eps": eps}
    rng = np.random.default_rng(0)
    shapes = [(5, 3), (3,)]
    params = [nn.Parameter(torch.tensor(rng.uniform(-0.5, 0.5, s), dtype=torch.float32)) for s in shapes]
    ref = [(p.detach().double().numpy(), np.zeros(s), np.zeros(s)) for p, s in zip(params, shapes)]
    opt = DenseOptimizer(params, 0.1, "Ftrl", hyper)
    for lr in (0.05, 0.1, 0.2, 0.2):
        opt.param_groups[0]["lr"] = lr
        for i, (p, s) in enumerate(zip(params, shapes)):
            g = rng.normal(0, 0.05, s).astype(np.float32)
            p.grad = torch.tensor(g)
            ref[i] = _ftrl(*ref[i][:1], ref[i][1], ref[i][2], g.astype(np.float64), lr, **hyper)
        opt.step()
    for i, p in enumerate(params):
        np.testing.assert_allclose(p.detach().numpy(), ref[i][0], rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(opt.state["n"][i].numpy(), ref[i][1], rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(opt.state["z"][i].numpy(), ref[i][2], rtol=RTOL, atol=ATOL)
    flat = np.concatenate([r[0].reshape(-1) for r in ref])
    assert (flat == 0).any() and (flat != 0).any()


class _Lookup(nn.Module):
    """A collection table read by one lookup (sum), and a dense weight: loss = sum(pooled * C) + sum(dense * D)."""

    def __init__(self):
        super().__init__()
        self.table = CollectionTable(10, 4, name="t")
        self.dense = nn.Parameter(torch.linspace(-0.3, 0.3, 4))

    def forward(self, ids):
        return self.table(ids, 0, "sum")


def _row_reference(w, n, z, ids, c, lr):
    """HugeCTR's embedding-collection update: each unique key's summed gradient (sum combiner: the sample's C per
    occurrence), the kernel on those rows only."""
    grads = {}
    for b, sample in enumerate(ids[:, 0, :]):
        for k in sample:
            if k >= 0:
                grads[int(k)] = grads.get(int(k), 0.0) + c[b]
    w, n, z = w.copy(), n.copy(), z.copy()
    for k, g in grads.items():
        w[k], n[k], z[k] = _ftrl(w[k], n[k], z[k], g, lr, **HYPER)
    return w, n, z


def _step(model, opt, ids, c, d):
    opt.zero_grad()
    loss = (model(ids) * c).sum() + (model.dense * d).sum()
    loss.backward()
    opt.step()


def test_collection_rows_equal_hugectrs_update_and_resume():
    """Three batches with repeated keys and -1 padding: the looked-up rows step with their summed gradient, every other
    row (and its n, z) stays as it was, the padding row stays zero; the dense weight takes the dense step. A state
    saved after two batches and loaded into a fresh optimizer gives the same third step."""
    torch.manual_seed(0)
    model = _Lookup()
    opt = make_optimizer(SPEC, model, 0.1)
    w0 = model.table.weight.detach().double().numpy()[:10]
    ref = (w0, np.zeros_like(w0), np.zeros_like(w0))
    dense = (model.dense.detach().double().numpy(), np.zeros(4), np.zeros(4))
    rng = np.random.default_rng(1)
    batches = [torch.tensor([[[1, 1, 4]], [[4, -1, -1]], [[-1, -1, -1]]]),
               torch.tensor([[[2, -1, -1]], [[4, 7, -1]], [[7, 7, 7]]]),
               torch.tensor([[[0, 4, -1]], [[9, -1, -1]], [[1, -1, -1]]])]
    saved = None
    for step, ids in enumerate(batches):
        if step == 2:
            saved = copy.deepcopy((model.state_dict(), opt.state_dict()))   # as torch.save writes them
        c = rng.normal(0, 0.1, (3, 4)).astype(np.float32)
        d = rng.normal(0, 0.1, 4).astype(np.float32)
        _step(model, opt, ids, torch.tensor(c), torch.tensor(d))
        ref = _row_reference(*ref, ids.numpy(), c.astype(np.float64), 0.1)
        dense = _ftrl(*dense, d.astype(np.float64), 0.1, **HYPER)
    rows = opt.optimizers[1]
    np.testing.assert_allclose(model.table.weight.detach().numpy()[:10], ref[0], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(rows.state[0]["n"].numpy()[:10], ref[1], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(rows.state[0]["z"].numpy()[:10], ref[2], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(model.dense.detach().numpy(), dense[0], rtol=RTOL, atol=ATOL)
    untouched = [3, 5, 6, 8]
    assert np.array_equal(model.table.weight.detach().numpy()[untouched], w0[untouched].astype(np.float32))
    assert not model.table.weight[10].any() and not rows.state[0]["n"][untouched].any()

    after = model.table.weight.detach().clone()
    torch.manual_seed(0)
    fresh = _Lookup()
    fresh.load_state_dict(saved[0])
    opt2 = make_optimizer(SPEC, fresh, 0.1)
    opt2.load_state_dict(saved[1])
    rng = np.random.default_rng(1)
    for _ in range(2):
        rng.normal(0, 0.1, (3, 4)), rng.normal(0, 0.1, 4)
    c = torch.tensor(rng.normal(0, 0.1, (3, 4)).astype(np.float32))
    d = torch.tensor(rng.normal(0, 0.1, 4).astype(np.float32))
    _step(fresh, opt2, batches[2], c, d)
    assert torch.equal(fresh.table.weight, after) and torch.equal(fresh.dense, model.dense)
    with pytest.raises(DataError):
        opt2.load_state_dict([saved[1][0], {"kind": "Adam", "state": []}])


def _ftrl_spec(tmp_path, version: str):
    """SHARED (one static table over three inputs and one more) with Ftrl, imported at ``version``."""
    tmp_path.mkdir()
    return torch_spec(tmp_path, SHARED.replace(FTRL_SGD, FTRL), version=version)


def test_a_collection_spec_with_ftrl_renders_hugectrs_step(tmp_path):
    """23.09 (the FTRL sample's release): the trainer's optimizer is Ftrl with the spec's beta, lambda1, lambda2 and
    FLT_EPSILON; at 23.06 too; at 23.04 a static table has no Ftrl update in HugeCTR: refused, naming why."""
    assert FTRL_SGD in SHARED
    for version in ("23.09", "23.06"):
        rendered = render_spec(open_spec(_ftrl_spec(tmp_path / version, version)))
        text = rendered.files[next(k for k in rendered.files if str(k) == "train_torch.py")]
        assert ("dense_hyper={'beta': 0.9, 'lambda1': 0.1, 'lambda2': 0.1, 'eps': 1.1920928955078125e-07}"
                in text.replace('"', "'")), text
        assert "graph_safe=False" in text
    with pytest.raises(UserError) as exc:
        render_spec(open_spec(_ftrl_spec(tmp_path / "23.04", "23.04")))
    assert "optimizer.type" in str(exc.value) and "HugeCTR 23.04's embedding collection has no Ftrl update" in \
        str(exc.value)


def test_a_collection_spec_with_ftrl_trains_through_its_trainer():
    """Import at 23.09, generate, two steps of the generated train_torch.py in this process (the corpus tool's own
    run; about a second)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tools.corpus_trains import train_unit

    assert train_unit(SHARED.replace(FTRL_SGD, FTRL), "23.09", None, name="ebc_ftrl") == \
        {"status": "trained", "stage": "train", "torch_added": True}

