"""The PyTorch model served end to end by a real Triton server (2.51, python backend) on loopback.

For the multi-hot MovieLens spec ``movielens_genres`` and ``wdl`` (two tables, continuous columns, BYTES request
columns): the spec is pointed at the demo's real NVTabular workflow, train_torch.py trains a few iterations on the CPU
on the demo's synthetic data, ``ctrgen assemble --checkpoint`` builds the repository from
generated/<name>/triton_torch/, and raw rows sent to ``<name>_ens`` over HTTP and gRPC must score what the offline
path scores: the workflow transform (nvtabular in-process), read by the runtime's ``read_split``, through the
trained ``Model`` loaded in-process, then a sigmoid. A model.pt that does not fit the Model fails the load with the
runtime's reason through a real server in tests/test_serve.py (`ctrgen serve`, which reports it); a failed load
leaves the other models ready (tests/test_triton_serving.py).
The one-hot ``movielens`` is not served here: its served path is a strict subset of ``movielens_genres``'s (the same
request columns userId and movieId, the same workflow, one table without the multi-hot slot), and the demo serves it
end to end with served = offline (tests/test_demo_serve.py); each served spec costs this server two backend
processes (NVTabular, torch) and its assembly a workflow-load check.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from codegen.demo.cli import DEMO_SPECS, demo_spec_text
from codegen.output import write
from codegen.pipeline import open_spec, render_spec
from codegen.runtime.data import read_split
from codegen.workflow import read_workflow_features
from tests.conftest import REPO, run_ctrgen
from tests.demo_data import built_demo
from tests.test_torch_target import train
from tests.test_triton_serving import WIRE, deploy_hugectr_only
from tests.triton_server import Server

# One worker, one server: tests/test_serving_errors.py and tests/test_triton_serving.py query the same server
# (conftest's torch_served fixture).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("triton_torch_serving")]
# Iterations and batch of each training: a few steps (the scores must differ by row, not be good); wdl fewest, its
# deep part has two 1,024-wide layers. (Not movielens: the module docstring says why.)
SERVED = {"movielens_genres": (40, 256), "wdl": (10, 256)}
# One CPU instance per python model: each instance is a backend process importing NVTabular or torch (2-3 s of CPU
# on start); tests/test_demo_serve.py serves the default two preprocessing instances.
CPU_INSTANCE = "triton:\n  preprocessing:\n    instance: {count: 1}\n  torch:\n    instance: {kind: KIND_CPU}\n"
TOLERANCE = 1e-5
_OFFLINE: dict[str, np.ndarray] = {}      # spec name -> offline scores of its request_frame


def _load_script(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _deploy(name: str, demo, spec_dir: Path, scratch: Path) -> dict:
    """ctrgen lock + generate, train_torch.py on the CPU, ctrgen assemble --checkpoint."""
    dataset = DEMO_SPECS[name]
    spec = spec_dir / f"{name}.yaml"
    text = demo_spec_text((REPO / "specs" / f"{name}.yaml").read_text(), spec_name=name,
                          dataset_dir=demo.root / dataset, spec_dir=spec_dir)
    assert "\ntriton:" not in text
    spec.write_text(text + CPU_INSTANCE)
    ctx = open_spec(spec)
    ctx.lock_path.write_text(read_workflow_features(ctx, ctx.workflow_path).lock_text())       # ctrgen lock
    rendered = render_spec(ctx)
    generated = ctx.root / "generated" / rendered.name
    write(generated, rendered.files)                                                           # ctrgen generate
    iters, batch = SERVED[name]
    checkpoint = scratch / "checkpoints" / name
    train(generated, checkpoint, iters, batch)
    repo = scratch / "repos" / name
    result = run_ctrgen("assemble", str(spec), "--workflow", str(ctx.workflow_path), "--checkpoint", str(checkpoint),
                        "--out", str(repo))
    assert result.returncode == 0, result.stderr
    assert "--backend-config" not in result.stdout and f"--load-model={name}_ens" in result.stdout
    version = repo / name / "1"
    assert sorted(p.name for p in version.iterdir()) == ["features.json", "model.pt", "model.py", "train_torch.py"]
    assert (version / "train_torch.py").read_text() == (generated / "train_torch.py").read_text()
    return {"repo": repo, "workflow": ctx.workflow_path, "plan": rendered.triton_torch, "generated": generated,
            "checkpoint": checkpoint, "raw": demo.paths[dataset]["raw"], "spec": spec}


@contextlib.contextmanager
def serve_deployed():
    """The specs of SERVED deployed and one server loading their ensembles; yields (server, {name: deployment}).
    Once per session: conftest's ``torch_served`` fixture. The server also holds the HugeCTR repositories of
    tests/test_triton_serving.py (``deploy_hugectr_only``), which queries its preprocessing models: one server for
    both."""
    demo = built_demo()
    scratch = Path(tempfile.mkdtemp(prefix="ctrgen-torch-serving-"))
    server = None
    try:
        spec_dir = demo.root / "torch_serving_specs"     # demo_spec_text wants the data below its parent
        spec_dir.mkdir(exist_ok=True)
        out = {name: _deploy(name, demo, spec_dir, scratch) for name in SERVED}
        out.update(deploy_hugectr_only(demo, scratch))
        server = Server(repos=[d["repo"] for d in out.values()], scratch=scratch)
        server.start(load=[f"{name}_ens" for name in SERVED])       # loads each ensemble's two models too
        yield server, out
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture(scope="module")
def deployed(torch_served):
    return torch_served


def request_frame(raw: Path, plan, rows: int = 40) -> pd.DataFrame:
    """Validation rows as a client sends them (complete rows: BYTES cannot carry None), plus a row with a userId
    the workflow never saw (MovieLens)."""
    columns = [c.name for c in plan.preprocessing.request]
    valid = pd.read_parquet(raw / "valid.parquet")[columns].dropna().head(rows).reset_index(drop=True)
    if "userId" in columns:
        unseen = valid.head(1).copy()
        unseen["userId"] = 10_000_000
        valid = pd.concat([valid, unseen], ignore_index=True)
    return valid


def offline_scores(d: dict, frame: pd.DataFrame, tmp: Path) -> np.ndarray:
    """Workflow transform in-process -> the runtime's read_split -> Model.forward in-process -> sigmoid."""
    import nvtabular as nvt

    plan = d["plan"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        workflow = nvt.Workflow.load(str(d["workflow"]))
        workflow.remove_inputs(list(plan.preprocessing.labels))
        out = workflow.transform(nvt.Dataset(frame, cpu=True)).to_ddf().compute().reset_index(drop=True)
    script = _load_script(d["generated"] / "train_torch.py", f"offline_{plan.name}")
    features = json.loads((d["checkpoint"] / "features.json").read_text())
    for label in features["labels"]:
        out[label["name"]] = np.zeros(len(out), np.float32)       # read_split reads labels too; unused here
    out.to_parquet(tmp / "transformed.parquet")
    arrays = read_split([tmp / "transformed.parquet"], features)
    model = script.Model(features)
    model.load_state_dict(torch.load(d["checkpoint"] / "model.pt", weights_only=True))
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(arrays["dense"]), *[torch.from_numpy(ids) for ids in arrays["sparse"]])
    return torch.sigmoid(logits).numpy().ravel()


@contextlib.contextmanager
def _client(server: Server, protocol: str):
    """The tritonclient module and a client of the server, closed on exit (an open one delays the server's exit)."""
    if protocol == "http":
        import tritonclient.http as client
    else:
        import tritonclient.grpc as client
    with server.http() if protocol == "http" else server.grpc() as conn:
        yield client, conn


def infer(server: Server, protocol: str, model: str, frame: pd.DataFrame, output: str = "OUTPUT0"):
    with _client(server, protocol) as (client, conn):
        return _infer(client, conn, model, frame, output)


def _infer(client, conn, model: str, frame: pd.DataFrame, output: str):
    inputs = []
    for col in frame.columns:
        data = frame[col].to_numpy()
        if data.dtype == object:
            data = np.array([str(v).encode() for v in data], dtype=np.object_)
        data = data.reshape(-1, 1)
        t = client.InferInput(col, list(data.shape), WIRE[data.dtype.name])
        t.set_data_from_numpy(data)
        inputs.append(t)
    result = conn.infer(model, inputs, outputs=[client.InferRequestedOutput(output)])
    out = result.get_output(output)
    return result.as_numpy(output), out["datatype"] if isinstance(out, dict) else out.datatype


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("name", list(SERVED))
def test_ensemble_scores_raw_rows_like_the_offline_model(deployed, name, protocol, tmp_path):
    """Seconds: the first test of the module pays the session's `torch_served` setup (two specs trained and
    assembled, one real Triton server loading two ensembles); each case then sends raw rows over HTTP or gRPC."""
    server, out = deployed
    d = out[name]
    frame = request_frame(d["raw"], d["plan"])
    got, datatype = infer(server, protocol, f"{name}_ens", frame)
    if name not in _OFFLINE:           # the same rows over HTTP and gRPC: scored offline once
        _OFFLINE[name] = offline_scores(d, frame, tmp_path)
    want = _OFFLINE[name]
    assert datatype == "FP32" and got.shape == (1, len(frame))       # the HugeCTR backend's layout
    np.testing.assert_allclose(got.ravel(), want, rtol=0, atol=TOLERANCE)
    assert want.std() > 1e-4                                          # a trained model: scores differ by row
    if name == "movielens_genres":
        assert list(frame.columns) == ["userId", "movieId"]          # genres are joined inside the workflow


def test_scores_do_not_depend_on_the_batch(deployed):
    """Row by row and all at once give the same scores (the VCSR unpacking keeps rows apart)."""
    server, out = deployed
    d = out["movielens_genres"]
    frame = request_frame(d["raw"], d["plan"], rows=6)
    together, _ = infer(server, "http", "movielens_genres_ens", frame)
    alone = [infer(server, "http", "movielens_genres_ens", frame.iloc[[i]])[0].item() for i in range(len(frame))]
    np.testing.assert_allclose(together.ravel(), alone, rtol=0, atol=TOLERANCE)


def test_served_models_and_metadata(deployed):
    server, _ = deployed
    with server.http() as conn:
        for name in SERVED:
            for model in (f"{name}_nvt", name, f"{name}_ens"):
                assert conn.is_model_ready(model), model
            meta = conn.get_model_metadata(name)
            assert [i["name"] for i in meta["inputs"]] == ["DES", "CATCOLUMN", "ROWINDEX"]
            assert [(o["name"], o["datatype"]) for o in meta["outputs"]] == [("OUTPUT0", "FP32")]
            config = conn.get_model_config(name)
            assert config["backend"] == "python" and config["instance_group"][0]["kind"] == "KIND_CPU"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_malformed_vcsr_is_a_triton_error_and_the_model_stays_ready(deployed, protocol):
    from tritonclient.utils import InferenceServerException

    server, out = deployed
    tables = out["movielens_genres"]["plan"].preprocessing.tables
    slots = sum(len(t.slots) for t in tables)
    entries = slots + len(tables) + 1      # one more than a one-row batch's: not B x slots + tables (slots > 1)
    assert slots > 1
    tensors = {"DES": np.zeros((1, 0), np.float32), "CATCOLUMN": np.arange(1, entries, dtype=np.int64)[None],
               "ROWINDEX": np.arange(entries, dtype=np.int32)[None]}
    with _client(server, protocol) as (client, conn):
        inputs = []
        for key, data in tensors.items():
            t = client.InferInput(key, list(data.shape), WIRE[data.dtype.name])
            t.set_data_from_numpy(data)
            inputs.append(t)
        with pytest.raises(InferenceServerException) as err:
            conn.infer("movielens_genres", inputs)
        assert f"ROWINDEX has {entries} entries: not batch x {slots} slots + {len(tables)} tables" in str(err.value)
        assert conn.is_model_ready("movielens_genres")
