"""`ctrgen assemble --onnx`'s model step, in-process (no server: the venv's Triton has the python backend only): the
ONNX graph of the VCSR tensors scores as PyTorch scores read_split's rows, the VCSR it is checked on is what the
python-backend model (codegen.runtime.torch_model) unpacks back into those rows, a key outside its slot's range
makes that sample's score NaN (never another score), and the onnxruntime config reads back through Triton's
ModelConfig and agrees with the ensemble's step and the file's inputs and outputs."""

from __future__ import annotations

import math
from pathlib import PurePosixPath
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from codegen.errors import UserError
from codegen.export.onnx import torch_scores
from codegen.export.vcsr import export_vcsr, tables_of, to_vcsr, vcsr_scores
from codegen.pipeline import open_spec, render_spec
from codegen.runtime.torch_model import Serve
from codegen.serve.offline import load_script
from codegen.triton.deploy.onnx_step import check_step, onnx_config
from codegen.triton.layout import rendered_repository
from conftest import REPO

NAME = "movielens_genres"       # three slots of one table, genres a multi-hot list of up to 10 ids


@pytest.fixture(scope="module")
def step():
    rendered = render_spec(open_spec(REPO / "specs" / f"{NAME}.yaml"))
    plan = rendered.triton_torch
    features = __import__("json").loads(rendered.files[PurePosixPath("features.json")])
    torch.manual_seed(0)
    model = load_script(REPO / "generated" / NAME / "train_torch.py").Model(features).eval()
    rng = np.random.default_rng(45)
    n, slots = 40, features["sparse"][0]["columns"]
    ids = np.full((n, len(slots), 10), -1, dtype=np.int64)
    for j, col in enumerate(slots):
        for b in range(n):
            k = rng.integers(0, 11) if j == 2 else 1         # genres: 0 to 10 ids (an empty list too)
            ids[b, j, :k] = rng.integers(0, col["cardinality"], k)
    arrays = {"labels": np.zeros((n, 1), np.float32), "dense": np.zeros((n, 0), np.float32), "sparse": [ids]}
    tables = tables_of(plan, features)
    outputs = [o.name for o in plan.model("").outputs]
    return SimpleNamespace(plan=plan, rendered=rendered, features=features, model=model, arrays=arrays,
                           tables=tables, outputs=outputs, onnx=export_vcsr(model, features, tables, outputs, arrays))


def test_the_onnx_step_scores_the_vcsr_request_as_pytorch_scores_its_rows(step):
    vcsr = to_vcsr(step.arrays, step.features, step.tables)
    ours = vcsr_scores(step.onnx, vcsr, step.outputs)
    theirs = torch_scores(step.model, step.features, step.arrays).reshape(-1)
    np.testing.assert_allclose(ours, theirs, atol=1e-6, rtol=0)
    # The same VCSR is what the python-backend model unpacks: the rows again, ids and -1 padding.
    pre = step.plan.preprocessing
    serve = SimpleNamespace(name=NAME, n_continuous=0, tables=[
        (t.name, t.input, [(s.column, s.offset, s.max_keys, s.cardinality) for s in t.slots]) for t in pre.tables])
    dense, sparse = Serve._unpack(serve, *(a.reshape(-1) for a in vcsr), {"data1": 10})
    np.testing.assert_array_equal(sparse["data1"], step.arrays["sparse"][0])
    assert dense.shape == (40, 0)
    # A key outside its slot's range (the python model refuses the request): that sample's score is NaN, the others
    # are unchanged.
    des, keys, rowindex = (a.copy() for a in vcsr)
    keys[0, 0] = -5                                        # sample 0's first key, below slot 0's offset
    bad = vcsr_scores(step.onnx, (des, keys, rowindex), step.outputs)
    assert math.isnan(bad[0]) and np.array_equal(bad[1:], ours[1:])


def test_the_onnxruntime_config_reads_back_and_agrees_with_the_ensemble(step):
    repo = rendered_repository(step.rendered.files, "triton_torch")
    python = repo[PurePosixPath(NAME) / "config.pbtxt"]
    ensemble = repo[PurePosixPath(f"{NAME}_ens") / "config.pbtxt"]
    text = onnx_config(python)
    assert 'backend: "onnxruntime"' in text and 'default_model_filename: "model.onnx"' in text
    assert "allow_ragged_batch" not in text and "parameters" not in text and "dynamic_batching" not in text
    assert 'backend: "python"' in python and "allow_ragged_batch: true" in python
    check_step(text, ensemble, step.onnx, REPO)
    with pytest.raises(UserError) as exc:
        check_step(text, ensemble.replace('key: "CATCOLUMN"', 'key: "KEYS"'), step.onnx, REPO)
    assert "the ensemble maps 'KEYS', which the ONNX step does not have" in exc.value.format()
    with pytest.raises(UserError) as exc:
        check_step(text.replace('name: "ROWINDEX"', 'name: "ROWS"'), ensemble, step.onnx, REPO)
    assert "the ONNX file's inputs" in exc.value.format()


def test_onnx_needs_the_pytorch_checkpoint(tmp_path):
    from conftest import run_ctrgen

    result = run_ctrgen("assemble", str(REPO / "specs" / "movielens.yaml"), "--workflow", str(tmp_path), "--weights",
                        str(tmp_path), "--onnx", "--out", str(tmp_path / "repo"))
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "--onnx: --onnx exports the PyTorch model: it needs --checkpoint" in result.stderr
    assert not (tmp_path / "repo").exists()
