"""The generated preprocessing models served by a real Triton server (2.51, python backend) on loopback.

The server is the session's one of conftest's ``torch_served`` (tests/test_triton_torch_serving.py; one xdist group):
it serves the PyTorch repositories of the multi-hot MovieLens spec ``movielens_genres`` and ``wdl``, generated from
the demo's real NVTabular workflows (tests/demo_data.py builds them once per session), and the two HugeCTR
repositories only these tests need (``deploy_hugectr_only``). The one-hot ``movielens`` is not served (its served path
is a strict subset of ``movielens_genres``'s; the demo serves it end to end: tests/test_demo_serve.py); its committed
spec is deployed here as ``movielens_stale``, whose model refuses the demo's workflow. ``ctrgen assemble --weights``
of the served specs writes preprocessing models byte for byte equal to the served ones (checked here), so the served
ones stand for them. Responses over HTTP and gRPC are compared with the offline workflow transform (nvtabular in-process), packed
into VCSR here by a straightforward loop (triton.md §3), independent of the model's vectorised code.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import tempfile
import types
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from codegen.output import write
from codegen.pipeline import open_spec, render_spec
from codegen.workflow import read_workflow_features
from tests.conftest import REPO, run_ctrgen
from tests.triton_server import Server

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("triton_torch_serving")]    # torch_served's server
# torch_served's specs: movielens_genres (multi-hot, genres joined inside the workflow) and wdl (two embedding tables,
# BYTES request columns, 13 continuous columns)
SERVED = ("movielens_genres", "wdl")
TAGGED_SPEC = """\
version: 1
name: tagged
hugectr_version: "23.06"
workflow: {workflow}
data: {{format: parquet, train: [/data/train/_file_list.txt], eval: /data/valid/_file_list.txt}}
features: {{label: [y]}}
input:
  sparse:
    - name: data1
      nnz_per_slot: [1, 3]
embeddings:
  - name: sparse_embedding1
    input: data1
    embedding_vec_size: 8
    workspace_size_per_gpu_in_mb: 0
    slot_size_array: true
model: {{preset: mlp, units: [16]}}
"""
# One instance of each preprocessing model (each is a backend process importing NVTabular, 2-3 s of CPU on start;
# tests/test_demo_serve.py serves the default two).
ONE_INSTANCE = "triton:\n  preprocessing:\n    instance: {count: 1}\n"
_OFFLINE: dict[str, dict] = {}      # spec name -> offline VCSR of its request_frame


def _tagged_workflow(folder: Path) -> Path:
    """A workflow whose raw input is a list column (tags): the request carries tags__values / tags__lengths."""
    from codegen.demo import etl

    nvt = etl.import_nvtabular()
    rng = np.random.default_rng(7)
    n = 60
    frame = pd.DataFrame({"userId": rng.integers(1, 12, n).astype(np.int64),
                          "tags": [rng.integers(1, 9, rng.integers(1, 4)).astype(np.int64) for _ in range(n)],
                          "y": rng.integers(0, 2, n).astype(np.float32)})
    workflow = nvt.Workflow((["userId", "tags"] >> nvt.ops.Categorify()) + (["y"] >> nvt.ops.AddTags(["target"])))
    folder.mkdir(parents=True)
    with etl.scratch_cwd(), etl.quiet():
        workflow.fit(nvt.Dataset(frame, cpu=True))
        etl.save_workflow(workflow, folder / "workflow")
    frame.to_parquet(folder / "valid.parquet")
    return folder / "workflow"


def _fake_weights(folder: Path, plan) -> None:
    """Placeholder trained files with the names ps.json gives (HugeCTR cannot train here)."""
    folder.mkdir(parents=True, exist_ok=True)
    model = plan.model("")
    for name in model.required_files:
        if "_sparse_" in name:
            (folder / name).mkdir()
            (folder / name / "key").write_bytes(np.arange(2, dtype=np.int64).tobytes())
            (folder / name / "emb_vector").write_bytes(np.zeros(2 * 16, dtype=np.float32).tobytes())
        else:
            (folder / name).write_bytes(np.zeros(8, dtype=np.float32).tobytes())


def _deploy(spec: Path, workflow: Path, scratch: Path, *, past_the_lock_check: bool = False) -> dict:
    """ctrgen generate + assemble (placeholder weights) for one spec; the lock must be current.
    ``past_the_lock_check``: assemble through the library without the CLI's workflow-vs-lock check (ctrgen assemble
    refuses such a pair), to reach the served model's own load-time check."""
    ctx = open_spec(spec)
    rendered = render_spec(ctx)
    write(ctx.root / "generated" / rendered.name, rendered.files)                                  # ctrgen generate
    weights = scratch / "weights" / rendered.name
    _fake_weights(weights, rendered.triton)
    repo = scratch / "repos" / rendered.name
    if past_the_lock_check:
        from codegen.triton.deploy.assemble import assemble

        assemble(rendered.triton, ctx.root / "generated" / rendered.name, workflow=workflow,
                 weights=weights, out=repo)
        return {"repo": repo, "workflow": workflow, "plan": rendered.triton}
    result = run_ctrgen("assemble", str(spec), "--workflow", str(workflow), "--weights", str(weights),
                        "--out", str(repo))
    assert result.returncode == 0, result.stderr
    assert "--backend-config=hugectr,ps=/model/ps.json" in result.stdout
    return {"repo": repo, "workflow": workflow, "plan": rendered.triton}


def deploy_hugectr_only(demo, scratch: Path) -> dict:
    """The HugeCTR repositories that only these tests serve, deployed by conftest's ``torch_served`` before its server
    starts (the server cannot add a repository later); ``tagged_nvt`` is loaded by this module."""
    spec_dir = demo.root / "serving_specs"       # demo_spec_text wants the data below its parent
    spec_dir.mkdir(exist_ok=True)
    out = {}
    # The committed movielens spec keeps ml-25m's cardinalities: its model must refuse the demo's workflow.
    stale = spec_dir / "movielens_stale.yaml"
    stale.write_text((REPO / "specs" / "movielens.yaml").read_text().replace("name: movielens\n",
                                                                           "name: movielens_stale\n")
                     + ONE_INSTANCE)
    shutil.copy(REPO / "specs" / "movielens.features.lock.json", spec_dir / "movielens_stale.features.lock.json")
    out["movielens_stale"] = _deploy(stale, demo.paths["movielens"]["workflow"], scratch, past_the_lock_check=True)
    tagged_wf = _tagged_workflow(scratch / "tagged")
    tagged = spec_dir / "tagged.yaml"
    tagged.write_text(TAGGED_SPEC.format(workflow=json.dumps(str(tagged_wf))) + ONE_INSTANCE)
    ctx = open_spec(tagged)
    ctx.lock_path.write_text(read_workflow_features(ctx, ctx.workflow_path).lock_text())
    out["tagged"] = {**_deploy(tagged, tagged_wf, scratch), "raw": scratch / "tagged"}
    return out


@pytest.fixture(scope="module")
def deployed(torch_served):
    """(the server, {name: deployment}): SERVED's HugeCTR repositories assembled here from the served specs (their
    preprocessing models are the served ones: test_the_hugectr_repository_has_the_served_preprocessing_model), the
    HugeCTR-only ones of ``deploy_hugectr_only``."""
    server, served = torch_served
    scratch = Path(tempfile.mkdtemp(prefix="ctrgen-serving-"))
    try:
        out = {name: {**_deploy(served[name]["spec"], served[name]["workflow"], scratch), "raw": served[name]["raw"],
                      "served_repo": served[name]["repo"]} for name in SERVED}
        out.update({name: served[name] for name in ("movielens_stale", "tagged")})
        with server.http() as conn:
            conn.load_model("tagged_nvt")
        yield server, out
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}       # (the server's bytecode of model.py)


@pytest.mark.parametrize("name", SERVED)
def test_the_hugectr_repository_has_the_served_preprocessing_model(deployed, name):
    """One spec, two repositories (--weights, --checkpoint): the same preprocessing model, workflow included.
    Seconds in its first case when it is the first test of its xdist group: the session's Triton server (conftest's
    ``torch_served``: two specs trained and assembled) starts in its setup."""
    _, out = deployed
    hugectr, served = _files(out[name]["repo"] / f"{name}_nvt"), _files(out[name]["served_repo"] / f"{name}_nvt")
    assert "1/model.py" in hugectr and "1/workflow/workflow.pkl" in hugectr
    assert hugectr == served


def request_frame(raw: Path, plan) -> pd.DataFrame:
    """Validation rows as a client sends them (complete rows: BYTES cannot carry None); MovieLens adds an id the
    workflow never saw (mapped to its out-of-vocabulary id)."""
    columns = [c.name for c in plan.preprocessing.request]
    valid = pd.read_parquet(raw / "valid.parquet")[columns].dropna().head(9).reset_index(drop=True)
    if "userId" in columns:
        unseen = valid.head(1).copy()
        unseen["userId"] = 10_000_000
        valid = pd.concat([valid, unseen], ignore_index=True)
    return valid


def offline_vcsr(workflow_dir: Path, plan, frame: pd.DataFrame) -> dict[str, np.ndarray]:
    import nvtabular as nvt

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        workflow = nvt.Workflow.load(str(workflow_dir))
        workflow.remove_inputs(list(plan.preprocessing.labels))
        out = workflow.transform(nvt.Dataset(frame, cpu=True)).to_ddf().compute().reset_index(drop=True)
    keys, rowindex = [], []
    per_table = {t.name: [0] for t in plan.preprocessing.tables}
    for i in range(len(out)):
        for table in plan.preprocessing.tables:
            for slot in table.slots:
                value = out[slot.column].iloc[i]
                ids = list(value) if isinstance(value, (list, np.ndarray)) else [value]
                keys += [int(v) + slot.offset for v in ids]
                per_table[table.name].append(per_table[table.name][-1] + len(ids))
    for table in plan.preprocessing.tables:
        rowindex += per_table[table.name]
    des = out[list(plan.preprocessing.continuous)].to_numpy(np.float32).ravel()
    return {"DES": des, "CATCOLUMN": np.array(keys, np.int64), "ROWINDEX": np.array(rowindex, np.int32)}


WIRE = {"int64": "INT64", "int32": "INT32", "float64": "FP64", "float32": "FP32", "object": "BYTES"}


def infer(server: Server, protocol: str, model: str, frame: pd.DataFrame, cast: dict | None = None) -> dict:
    if protocol == "http":
        import tritonclient.http as client
    else:
        import tritonclient.grpc as client
    with server.http() if protocol == "http" else server.grpc() as conn:
        return _infer(client, conn, model, frame, cast)


def _infer(client, conn, model: str, frame: pd.DataFrame, cast: dict | None) -> dict:
    inputs = []
    for col in frame.columns:
        if isinstance(frame[col].iloc[0], np.ndarray):     # a list column: <col> padded, <col>__lengths
            lengths = np.array([len(v) for v in frame[col]], np.int32)
            padded = np.full((len(frame), lengths.max()), -7, dtype=np.int64)      # padding is never read
            for i, v in enumerate(frame[col]):
                padded[i, :len(v)] = v
            parts = {col: padded, f"{col}__lengths": lengths.reshape(-1, 1)}
            for part, data in parts.items():
                t = client.InferInput(part, list(data.shape), WIRE[data.dtype.name])
                t.set_data_from_numpy(data)
                inputs.append(t)
            continue
        data = frame[col].to_numpy()
        if cast and col in cast:
            data = data.astype(cast[col])
        if data.dtype == object:
            data = np.array([str(v).encode() for v in data], dtype=np.object_)
        data = data.reshape(-1, 1)
        t = client.InferInput(col, list(data.shape), WIRE[data.dtype.name])
        t.set_data_from_numpy(data)
        inputs.append(t)
    outputs = [client.InferRequestedOutput(n) for n in ("DES", "CATCOLUMN", "ROWINDEX")]
    result = conn.infer(model, inputs, outputs=outputs)
    got = {n: result.as_numpy(n) for n in ("DES", "CATCOLUMN", "ROWINDEX")}
    for n in ("DES", "CATCOLUMN", "ROWINDEX"):
        out = result.get_output(n)
        got[n + ".datatype"] = out["datatype"] if isinstance(out, dict) else out.datatype
    return got


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("name", (*SERVED, "tagged"))
def test_preprocessing_matches_offline_transform(deployed, name, protocol):
    """Each preprocessing model's VCSR over HTTP and gRPC equals the offline transform packed by hand."""
    server, out = deployed
    d = out[name]
    frame = request_frame(d["raw"], d["plan"])
    got = infer(server, protocol, f"{name}_nvt", frame)
    if name not in _OFFLINE:           # the same rows over HTTP and gRPC: transformed offline once
        _OFFLINE[name] = offline_vcsr(d["workflow"], d["plan"], frame)
    want = _OFFLINE[name]
    # (an empty DES comes back as a float64 numpy array from the HTTP client; the wire datatype is what counts)
    assert [got[n + ".datatype"] for n in ("DES", "CATCOLUMN", "ROWINDEX")] == ["FP32", "INT64", "INT32"]
    for key in ("DES", "CATCOLUMN", "ROWINDEX"):
        np.testing.assert_array_equal(got[key].ravel(), want[key], err_msg=key)
    tables = d["plan"].preprocessing.tables
    slots = sum(len(t.slots) for t in tables)
    assert got["ROWINDEX"].size == len(frame) * slots + len(tables)        # B x S + T (triton.md §3)
    if name == "movielens_genres":
        assert got["CATCOLUMN"].size > len(frame) * 2                      # multi-hot genres carry several keys
        genres = next(s for s in tables[0].slots if s.column == "genres")
        assert genres.offset == sum(s.cardinality for s in tables[0].slots[:2])
    elif name == "tagged":
        assert got["CATCOLUMN"].size == len(frame) + sum(len(v) for v in frame["tags"])
        assert len({len(v) for v in frame["tags"]}) > 1                   # ragged lists in one request
    else:
        assert name == "wdl"
        assert [t.name for t in tables] == ["sparse_embedding2", "sparse_embedding1"]     # wide, then deep
        assert got["DES"].size == len(frame) * 13 and got["CATCOLUMN"].size == len(frame) * 27
        assert "C1_C2" not in frame.columns and {"C1", "C2"} <= set(frame.columns)


def test_request_carries_raw_columns_only(deployed):
    """movielens_genres joins genres inside the workflow: the request has userId and movieId, not genres."""
    server, _ = deployed
    with server.http() as conn:
        meta = conn.get_model_metadata("movielens_genres_nvt")
    assert [i["name"] for i in meta["inputs"]] == ["userId", "movieId"]
    assert [o["name"] for o in meta["outputs"]] == ["DES", "CATCOLUMN", "ROWINDEX"]


def test_hugectr_model_unavailable_only_for_missing_backend(deployed):
    from tritonclient.utils import InferenceServerException

    server, _ = deployed
    with server.http() as conn:
        with pytest.raises(InferenceServerException) as err:
            conn.load_model("movielens_stale")
        index = {m["name"]: m for m in conn.get_model_repository_index()}
    assert "unable to find backend library for backend 'hugectr'" in str(err.value)
    assert index["movielens_stale"]["state"] == "UNAVAILABLE"
    assert "unable to find backend library for backend 'hugectr'" in index["movielens_stale"]["reason"]
    for name in SERVED:
        assert index[f"{name}_nvt"]["state"] == "READY", name


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_wrong_dtype_is_a_triton_error_and_model_stays_ready(deployed, protocol):
    from tritonclient.utils import InferenceServerException

    server, out = deployed
    d = out["movielens_genres"]
    frame = request_frame(d["raw"], d["plan"])
    with pytest.raises(InferenceServerException) as err:
        infer(server, protocol, "movielens_genres_nvt", frame, cast={"userId": np.int32})
    assert "INT32" in str(err.value) and "INT64" in str(err.value)
    with server.http() as conn:
        assert conn.is_model_ready("movielens_genres_nvt")
    got = infer(server, protocol, "movielens_genres_nvt", frame)
    if "movielens_genres" not in _OFFLINE:          # (test_preprocessing_matches_offline_transform's rows)
        _OFFLINE["movielens_genres"] = offline_vcsr(d["workflow"], d["plan"], frame)
    for key in ("DES", "CATCOLUMN", "ROWINDEX"):                    # the next good request answered as before
        np.testing.assert_array_equal(got[key].ravel(), _OFFLINE["movielens_genres"][key], err_msg=key)


def test_bad_shape_is_answered_by_the_model(deployed):
    """A [batch, 2] tensor passes Triton's checks (dims [-1]) and is refused by the model itself."""
    import tritonclient.http as client
    from tritonclient.utils import InferenceServerException

    server, _ = deployed
    inputs = []
    for col in ("userId", "movieId"):
        t = client.InferInput(col, [3, 2], "INT64")
        t.set_data_from_numpy(np.ones((3, 2), np.int64))
        inputs.append(t)
    with server.http() as conn:
        with pytest.raises(InferenceServerException) as err:
            conn.infer("movielens_genres_nvt", inputs)
        assert "must have shape [batch, 1]" in str(err.value)
        assert conn.is_model_ready("movielens_genres_nvt")


def test_stale_workflow_is_refused_at_load(deployed, monkeypatch):
    """A model generated for other cardinalities would shift keys wrongly: it refuses to load, with the reason. The
    generated model.py's initialize runs in this process, as the server's python stub calls it, with a stand-in
    ``triton_python_backend_utils`` (the stub's own module exists only inside the stub): a stub process would import
    NVTabular for a model that never loads. The server's report of a python model that refuses to load:
    tests/test_serve.py; a failed load leaves the other models ready: test_hugectr_model_unavailable_only_for_missing_
    backend above."""
    _, out = deployed
    folder = out["movielens_stale"]["repo"] / "movielens_stale_nvt"
    pb = types.ModuleType("triton_python_backend_utils")
    pb.TritonModelException = type("TritonModelException", (Exception,), {})
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", pb)
    monkeypatch.setattr(sys, "path", list(sys.path))          # model.py puts the repository's root first
    spec = importlib.util.spec_from_file_location("stale_nvt_model", folder / "1" / "model.py")
    model = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, model)        # the model hands itself (its configuration) over
    spec.loader.exec_module(model)
    with pytest.raises(pb.TritonModelException) as err:
        model.TritonPythonModel().initialize({"model_repository": str(folder), "model_version": "1",
                                              "model_config": "{}", "model_instance_kind": "CPU"})
    locked = json.loads((REPO / "specs" / "movielens.features.lock.json").read_text())["categorical"][0]
    assert locked["name"] == "userId"        # ml-25m's users; the demo's workflow has far fewer
    assert str(err.value).startswith("movielens_stale_nvt: column 'userId' has cardinality "), err.value
    assert (f"in the workflow, but table 'sparse_embedding1' was trained with {locked['cardinality']}: keys would be "
            "shifted wrongly") in str(err.value), err.value
