"""Continuous training's table update (PassOptimizer of train_torch.py) is torch.optim's sparse step without torch.optim.

One table, a few steps on the same lookups (repeated rows, padded multi-hot lists), once with the trainer's
PassOptimizer over row-update lookups and once with torch.optim's SparseAdam / SGD / Adagrad over F.embedding /
F.embedding_bag(sparse=True) gradients: the weights agree within 1e-6, rows never looked up keep their bytes. And a
real continuous pass of the generated script imports no torch._dynamo (torch.optim's first step does: about a second
of start-up in every pass's process); a checkpoint holding torch.optim's state (an earlier trainer's) is refused in
one line.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch
import torch.nn.functional as F

from conftest import REPO
from test_torch_fast_paths import load, synthesize
from warm_python import run as run_warm

pytestmark = pytest.mark.slow

NAME = "wdl_continuous_etc"
HYPER = {   # PassOptimizer kind and hyper-parameters -> the torch.optim sparse optimizer it stands for
    "SGD": ({}, lambda p, lr: torch.optim.SGD(p, lr=lr)),
    "AdaGrad": ({"initial_accumulator_value": 0.1, "eps": 1e-7},
                lambda p, lr: torch.optim.Adagrad(p, lr=lr, initial_accumulator_value=0.1, eps=1e-7)),
    "Adam": ({"betas": (0.9, 0.999), "eps": 1e-7},
             lambda p, lr: torch.optim.SparseAdam(p, lr=lr, betas=(0.9, 0.999), eps=1e-7)),
}


def sparse_lookup(module, ids: torch.Tensor) -> torch.Tensor:
    """What the trainer's tables computed before PassOptimizer: a lookup with a sparse gradient."""
    batch, slots, nnz = ids.shape
    if nnz == 1:
        rows = (ids[..., 0] + module.slot_offsets).reshape(-1)
        return F.embedding(rows, module.weight, sparse=True).reshape(batch, slots, -1)
    keys = torch.where(ids >= 0, ids + module.slot_offsets[:, None], module.padding_row)
    return F.embedding_bag(keys.reshape(batch * slots, nnz), module.weight, mode=module.combiner,
                           padding_idx=module.padding_row, sparse=True).reshape(batch, slots, -1)


@pytest.mark.parametrize("kind", list(HYPER))
@pytest.mark.parametrize("nnz,combiner", [(1, "sum"), (3, "sum"), (3, "mean")])
def test_pass_step_equals_torch_optims_sparse_step(kind, nnz, combiner):
    m = load(NAME)
    assert m.PASS_UPDATE == "Adam" and m.PASS_UPDATE_HYPER == HYPER["Adam"][0]    # the spec's Adam, HugeCTR's values
    torch.manual_seed(0)
    cards = [7, 40, 300]
    ours = m.SparseEmbedding(cards, vec_size=8, combiner=combiner)
    theirs = m.SparseEmbedding(cards, vec_size=8, combiner=combiner)
    theirs.load_state_dict(ours.state_dict())
    initial = ours.weight.clone()
    hyper, reference = HYPER[kind]
    ours.row_updates = True
    ours.weight.requires_grad_(False)
    pass_opt = m.PassOptimizer([ours], 0.05, kind, hyper)
    torch_opt = reference([theirs.weight], 0.05)
    gen = torch.Generator().manual_seed(1)
    touched = torch.zeros(ours.weight.shape[0], dtype=torch.bool)
    for _ in range(3):    # other rows each step: lazy state (rows absent from a step keep their moments)
        ids = torch.stack([torch.randint(0, c, (16, nnz), generator=gen) for c in cards], dim=1)   # (16, 3, nnz)
        ids[:5, 1, 0] = 3                                   # repeated rows: their gradients add up
        if nnz > 1:
            ids[torch.rand(ids.shape, generator=gen) < 0.3] = -1   # padded lists
        target = torch.randn(16, 3, 8, generator=gen)
        pass_opt.zero_grad()
        ((ours(ids) - target) ** 2).sum().backward()
        pass_opt.step()
        torch_opt.zero_grad()
        ((sparse_lookup(theirs, ids) - target) ** 2).sum().backward()
        torch_opt.step()
        touched[(ids + ours.slot_offsets[:, None])[ids >= 0]] = True
    assert (ours.weight - theirs.weight.detach()).abs().max() <= 1e-6
    assert not torch.equal(ours.weight[touched], initial[touched])
    assert torch.equal(ours.weight[~touched], initial[~touched])
    assert torch.count_nonzero(ours.weight[ours.padding_row]) == 0


def test_a_continuous_pass_imports_no_dynamo_and_refuses_torch_optim_state(tmp_path):
    """Both passes of the committed script, run as a process of its own: torch._dynamo is never imported."""
    features = json.loads((REPO / "generated" / NAME / "features.json").read_text())
    for k in (1, 2):
        synthesize(features, 512, tmp_path / f"pass{k}", files=1, seed=k)
    synthesize(features, 512, tmp_path / "valid", files=1, seed=3)
    # The script as __main__, then the modules it loaded (a forked run of the warm Python, which has not got dynamo).
    probe = tmp_path / "probe.py"
    probe.write_text("import runpy, sys\n"
                     f"sys.argv = [{str(REPO / 'generated' / NAME / 'train_torch.py')!r}] + sys.argv[1:]\n"
                     "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\nexcept SystemExit as e:\n"
                     "    assert not e.code, e.code\n"
                     "print('dynamo:', sorted(k for k in sys.modules if k.startswith('torch._dynamo')))\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    env["PYTHONPATH"] = str(REPO)   # codegen.runtime of this checkout; besides it torch, numpy, pyarrow only
    proc = run_warm([sys.executable, str(probe), "--device", "cpu", "--epochs", "1", "--batch-size", "128",
                     "--max-eval-batches", "1", "--output-dir", str(tmp_path / "out"),
                     "--pass-train", str(tmp_path / "pass1"), "--pass-eval", str(tmp_path / "valid"),
                     "--pass-train", str(tmp_path / "pass2"), "--pass-eval", str(tmp_path / "valid")],
                    env=env, cwd=str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "pass 2: saved" in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1] == "dynamo: []", proc.stdout[-500:]
    state = torch.load(tmp_path / "out" / "pass_2.pt", map_location="cpu", weights_only=False)["optimizer"]
    assert [s["kind"] for s in state] == ["Adam", "Adam"] and int(state[1]["steps"]) == 8   # 2 x 512 rows / 128

    # A pass_1.pt of an earlier trainer (torch.optim's Adam + SparseAdam state) is refused in one line.
    old = torch.load(tmp_path / "out" / "pass_1.pt", map_location="cpu", weights_only=False)
    m = load(NAME)
    model = m.Model(features)
    tables = [t.weight for t in model.modules() if isinstance(t, m.SparseEmbedding)]
    dense = [p for p in model.parameters() if all(p is not t for t in tables)]
    old["optimizer"] = [torch.optim.Adam(dense).state_dict(), torch.optim.SparseAdam(tables).state_dict()]
    torch.save(old, tmp_path / "out" / "pass_1.pt")
    proc = run_warm([sys.executable, str(REPO / "generated" / NAME / "train_torch.py"), "--device", "cpu",
                     "--passes", "2", "--batch-size", "128", "--output-dir", str(tmp_path / "out"),
                     "--pass-train", str(tmp_path / "pass1"), "--pass-eval", str(tmp_path / "valid"),
                     "--pass-train", str(tmp_path / "pass2"), "--pass-eval", str(tmp_path / "valid")],
                    env=env, cwd=str(tmp_path), timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines() == ["error: the checkpoint's optimizer state is not Adam over these "
                                                "parameters"], proc.stderr
