"""Served = offline for the sample families that tests/test_triton_torch_serving.py does not serve (issue 41 item 7):
DCN, NCF, DIN, BST and MMoE, one per served path (WDL is served there, with the multi-hot MovieLens model, through the
whole ensemble).

Each family's committed generated/<name>/triton_torch/<name>/ (config.pbtxt, model.py) goes into one repository with
ctrgen's runtime at its root, as `ctrgen assemble --checkpoint` lays it out, and the version folder gets the committed
train_torch.py with what a run of it wrote (model.pt, features.json): a few steps on synthetic data of the committed
cardinalities (tests/test_families_train.py's runs; the served model must have the tables model.py's key offsets
were generated for). ONE real Triton server (python backend, CPU) loads them all; each gets the VCSR tensors the
preprocessing model would send (every slot's keys shifted by its offset, one CSR row-pointer array per table, BST's
SLEN as whole lengths) over HTTP, and each output (one per label for MMoE) must equal the run's Model loaded in this
process, then a sigmoid, within 1e-5. The preprocessing step in front of the model (the NVTabular workflow) does not
depend on the family and is served with it in tests/test_triton_torch_serving.py.
The model.pt each family serves went through HugeCTR's weight files (`ctrgen weights export`, then `import`); DCN's
also through the generated model.py run by the stand-in (it loads the files and saves them again) and two iterations
of `ctrgen train --resume` on the imported run folder (issue 47).

One member per served path (each loaded model is a backend process importing torch, about 2 s of CPU): DeepFM, DLRM
and the DLRM with Layer_t.MLP serve like DCN (their model.py configurations are DCN's but for the name: one table of
27 one-hot slots of the same cardinalities, 13 continuous columns, one output), GMF and NeuMF like NCF (one table of
userId and movieId, no continuous column, one output; only the table's name differs), shared-bottom like MMoE (one table of 32 slots, one output per label). What differs inside their
Model is the forward that served and offline share, checked layer by layer against HugeCTR's arithmetic
(tests/test_layer_parity*.py), trained (tests/test_families_train.py, tests/test_families_learn.py) and taken through
HugeCTR's weight files bit for bit (tests/test_weights.py) for every family. test_the_others_serve_like_a_member
checks each pair on the committed files.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from codegen.triton.deploy.runtime_copy import write_runtime
from conftest import REPO, run_ctrgen
from synthetic_runs import trained
from tests.triton_server import Server

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("families_served")]     # one worker, one server
FAMILIES = ("dcn", "ncf", "din", "bst", "mmoe")      # one per served path (docstring)
# family -> the member of FAMILIES whose served path it shares
SERVES_LIKE = {"deepfm": "dcn", "dlrm": "dcn", "dlrm_mlp": "dcn", "gmf": "ncf", "neumf": "ncf", "shared_bottom": "mmoe"}
STEPS = ("--device", "cpu", "--max-iter", "2", "--batch-size", "32", "--display", "2", "--eval-interval", "2",
         "--snapshot", "0", "--max-eval-batches", "1", "--eval-batch-size", "64", "--threads", "1",
         "--no-tensorboard")
BATCH = 5
TOLERANCE = 1e-5
SEQUENCE_LENGTH = {"SLEN": 10}          # BST's SequenceMask input (max_sequence_len 10 in specs/bst.yaml)
FINE_TUNED = "dcn"          # served from HugeCTR's files the stand-in wrote, fine-tuned by ctrgen train --resume


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(server, repository) with every family of FAMILIES loaded; the server stopped afterwards."""
    root = tmp_path_factory.mktemp("families-served")
    repo = root / "repo"
    for folder in ("runs", "hugectr", "imported"):
        (root / folder).mkdir()
    repo.mkdir()
    for name in FAMILIES:
        run = trained(root / "runs", name, rows_per_slot=None, fast=STEPS)
        shutil.copytree(REPO / "generated" / name / "triton_torch" / name, repo / name)
        version = repo / name / "1"
        shutil.copy(run["generated"] / "train_torch.py", version)
        shutil.copy(run["run"] / "features.json", version)
        # The served weights went through HugeCTR's files (issue 47): the run exported to <prefix>_dense / _sparse
        # files and imported back, equal to the run's bit for bit, so HugeCTR-trained weights serve like these.
        spec, files, back = REPO / "specs" / f"{name}.yaml", root / "hugectr" / name, root / "imported" / name
        done = run_ctrgen("weights", "export", str(run["run"]), "--spec", str(spec), "--hugectr", str(files))
        assert done.returncode == 0, done.stderr
        done = run_ctrgen("weights", "import", str(spec), "--hugectr", str(files), "--out", str(back))
        assert done.returncode == 0, done.stderr
        ran, imported = (torch.load(p / "model.pt", weights_only=True) for p in (run["run"], back))
        assert all(torch.equal(ran[k], imported[k]) for k in ran if not k.endswith("num_batches_tracked")), name
        if name == FINE_TUNED:
            back = _through_the_standin_and_fine_tuned(root, name, files, run, ran)
        shutil.copy(back / "model.pt", version)
    write_runtime(repo)
    server = Server(repos=[repo], scratch=root / "server")
    server.start(load=list(FAMILIES))
    try:
        yield server, repo
    finally:
        server.stop()


def _through_the_standin_and_fine_tuned(root: Path, name: str, files: Path, run: dict, ran: dict) -> Path:
    """Issue 47's path for one family: HugeCTR's files as the generated model.py writes them (run by the stand-in:
    load_dense_weights / load_sparse_weights of the exported files, then save_params_to_files), imported, then
    fine-tuned by `ctrgen train --resume` (two iterations more on the family's data); the run folder it leaves is
    what the server loads."""
    from hugectr_run import run_with_standin

    from codegen.pipeline import open_spec, render_spec

    spec = REPO / "specs" / f"{name}.yaml"
    dense = sorted(files.glob("*_dense_*.model"))
    tables = sorted(files.glob("*_sparse_*.model"), key=lambda p: int(p.name.split("_sparse_")[0].lstrip("0") or 0))
    assert len(dense) == 1 and tables, sorted(files.iterdir())
    saved = root / "standin" / name
    saved.mkdir(parents=True)
    script = saved / "model.py"
    script.write_text((REPO / "generated" / name / "model.py").read_text()
                      + f"\nmodel.load_dense_weights({str(dense[0])!r})\n"
                      + f"model.load_sparse_weights({[str(t) for t in tables]!r})\n"
                      + "model.save_params_to_files('standin', iter=3)\n")
    version = render_spec(open_spec(spec)).job.hugectr_version
    result = run_with_standin(script, version, cwd=saved, env={"CTRGEN_STANDIN_SKIP_DATA": "1"})
    assert result.returncode == 0, result.stderr
    tuned = root / f"tuned_{name}"
    done = run_ctrgen("weights", "import", str(spec), "--hugectr", str(saved), "--iter", "3", "--out", str(tuned))
    assert done.returncode == 0, done.stderr
    imported = torch.load(tuned / "model.pt", weights_only=True)
    assert all(torch.equal(ran[k], imported[k]) for k in ran if not k.endswith("num_batches_tracked"))
    done = run_ctrgen("train", str(spec), "--resume", "--out", str(tuned), "--device", "cpu", "--max-iter", "2",
                      "--train", str(run["generated"] / "train"), "--eval", str(run["valid"]), "--",
                      *STEPS[STEPS.index("--batch-size"):])
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((tuned / "metrics.json").read_text())["iterations"] == 3 + 2
    after = torch.load(tuned / "model.pt", weights_only=True)
    assert any(not torch.equal(after[k], imported[k]) for k in after if k.endswith(".weight"))
    return tuned


def _request(config, features: dict, rng: np.random.Generator):
    """The VCSR tensors of BATCH samples ([1, n] each, as the ensemble passes them) and the ids per sparse input."""
    ids = {s["input"]: np.stack([rng.integers(0, c["cardinality"], BATCH) for c in s["columns"]], axis=1)
           for s in features["sparse"]}
    all_ids, offsets, rowindex = [], [], []
    for _table, input_name, slots in config.TABLES:
        all_ids.append(ids[input_name])
        offsets += [offset for _column, offset, _keys, _card in slots]
        rowindex.append(np.arange(BATCH * len(slots) + 1))
    keys = (np.concatenate(all_ids, axis=1) + np.array(offsets)).astype(config.KEY_DTYPE).reshape(1, -1)
    dense = np.zeros((BATCH, len(features["continuous"])), np.float32)
    for j, c in enumerate(features["continuous"]):
        dense[:, j] = (rng.integers(1, SEQUENCE_LENGTH[c["name"]] + 1, BATCH) if c["name"] in SEQUENCE_LENGTH
                       else rng.normal(size=BATCH))
    tensors = {"DES": dense.reshape(1, -1), "CATCOLUMN": keys,
               "ROWINDEX": np.concatenate(rowindex).astype(np.int32).reshape(1, -1)}
    return tensors, dense, ids


def _infer(server: Server, model: str, tensors: dict, outputs: list[str]) -> dict[str, np.ndarray]:
    import tritonclient.http as client

    wire = {np.dtype(np.float32): "FP32", np.dtype(np.int64): "INT64", np.dtype(np.int32): "INT32"}
    inputs = []
    for key, data in tensors.items():
        t = client.InferInput(key, list(data.shape), wire[data.dtype])
        t.set_data_from_numpy(data)
        inputs.append(t)
    with server.http() as conn:
        result = conn.infer(model, inputs, outputs=[client.InferRequestedOutput(o) for o in outputs])
        return {o: result.as_numpy(o) for o in outputs}


@pytest.mark.parametrize("name", FAMILIES)
def test_each_family_served_scores_like_the_offline_model(served, name):
    """About 11 s of CPU, paid by the first case (the module's setup): five two-step runs (1.5 s) and one server
    loading five python-backend models, each a process importing torch and the runtime (10 s in all): one server
    start for every family instead of one each."""
    server, repo = served
    version = repo / name / "1"
    config = _config(version, name)
    features = json.loads((version / "features.json").read_text())
    tensors, dense, ids = _request(config, features, np.random.default_rng(11))
    labels = [c["name"] for c in features["labels"]]
    outputs = labels if len(labels) > 1 else ["OUTPUT0"]
    got = _infer(server, name, tensors, outputs)
    script = _load(version / "train_torch.py", f"served_{name}_train_torch")
    model = script.Model(features)
    model.load_state_dict(torch.load(version / "model.pt", weights_only=True))
    model.eval()
    with torch.no_grad():
        want = torch.sigmoid(model(torch.from_numpy(dense),
                                   *[torch.from_numpy(ids[s["input"]][:, :, None]) for s in features["sparse"]]))
    want = want.numpy().reshape(BATCH, -1)
    assert want.shape[1] == len(labels)
    for j, output in enumerate(outputs):
        assert got[output].shape == (1, BATCH) and got[output].dtype == np.float32, (output, got[output])
        np.testing.assert_allclose(got[output][0], want[:, j], rtol=0, atol=TOLERANCE)
    assert want.std() > 0                                     # scores differ by row: the ids reach the tables


@pytest.mark.parametrize("name", sorted(SERVES_LIKE))
def test_the_others_serve_like_a_member(name):
    """A family not served here has its member's served path: the same config.pbtxt but for the model's name, and
    model.py's same tables (but for a table's name), slots, offsets, cardinalities, continuous count and key dtype."""
    like = SERVES_LIKE[name]
    folder = {n: REPO / "generated" / n / "triton_torch" / n for n in (name, like)}
    configs = {n: [line.replace(f'"{n}"', '"X"') for line in (f / "config.pbtxt").read_text().splitlines()
                   if not line.startswith("#")] for n, f in folder.items()}      # the header names the spec
    assert configs[name] == configs[like]
    plans = {}
    for n, f in folder.items():           # the literals, read without importing (no bytecode written in generated/)
        tree = ast.parse((f / "1" / "model.py").read_text())
        values = {t.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                  for t in node.targets if isinstance(t, ast.Name) and t.id in ("TABLES", "N_CONTINUOUS", "KEY_DTYPE")}
        plans[n] = ([(table[1], table[2]) for table in values["TABLES"]], values["N_CONTINUOUS"], values["KEY_DTYPE"])
    assert plans[name] == plans[like]


def _config(version: Path, name: str):
    """model.py's configuration (TABLES, KEY_DTYPE) without its Triton import."""
    import sys
    import types

    stub = types.ModuleType("triton_python_backend_utils")
    saved = sys.modules.get("triton_python_backend_utils")
    sys.modules["triton_python_backend_utils"] = stub
    try:
        return _load(version / "model.py", f"served_{name}_config")
    finally:
        if saved is None:
            del sys.modules["triton_python_backend_utils"]
        else:
            sys.modules["triton_python_backend_utils"] = saved
