"""The generated preprocessing models served by a real Triton server (2.51, python backend) on loopback.

One server per module serves the assembled repositories of the MovieLens specs (one-hot ``movielens`` and multi-hot
``movielens_genres``), generated from the demo's real NVTabular workflows (tests/demo_data.py builds them once per
session). Responses over HTTP and gRPC are compared with the offline workflow transform (nvtabular in-process),
packed into VCSR here by a straightforward loop (triton.md §3), independent of the model's vectorised code.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from codegen.demo.cli import demo_spec_text
from codegen.output import write
from codegen.pipeline import open_spec, read_workflow_features, render_spec
from tests.conftest import REPO, run_ctrgen
from tests.demo_data import built_demo
from tests.triton_server import Server

pytestmark = pytest.mark.slow
SPECS = ("movielens", "movielens_genres")


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


@pytest.fixture(scope="module")
def deployed():
    demo = built_demo()
    scratch = Path(tempfile.mkdtemp(prefix="ctrgen-serving-"))
    server = None
    try:
        out = {}
        for name in SPECS:
            spec_dir = demo.root / "serving_specs"       # demo_spec_text wants the data below its parent
            spec_dir.mkdir(exist_ok=True)
            spec = spec_dir / f"{name}.yaml"
            spec.write_text(demo_spec_text((REPO / "specs" / f"{name}.yaml").read_text(), spec_name=name,
                                           dataset_dir=demo.root / name, spec_dir=spec_dir))
            ctx = open_spec(spec)
            ctx.lock_path.write_text(read_workflow_features(ctx, ctx.workflow_path).lock_text())   # ctrgen lock
            rendered = render_spec(ctx)
            write(ctx.root / "generated" / name, rendered.files)                                # ctrgen generate
            _fake_weights(scratch / "weights" / name, rendered.triton)
            result = run_ctrgen("assemble", str(spec), "--workflow", str(ctx.workflow_path),
                                "--weights", str(scratch / "weights" / name), "--out", str(scratch / "repos" / name))
            assert result.returncode == 0, result.stderr
            assert "--backend-config=hugectr,ps=/model/ps.json" in result.stdout
            out[name] = {"repo": scratch / "repos" / name, "workflow": ctx.workflow_path, "plan": rendered.triton,
                         "raw": demo.paths[name]["raw"]}
        server = Server(repos=[out[n]["repo"] for n in SPECS], scratch=scratch)
        server.start(load=[f"{n}_nvt" for n in SPECS])
        yield server, out
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def request_frame(raw: Path) -> pd.DataFrame:
    """Validation rows as a client sends them, plus ids the workflow never saw (mapped to its out-of-vocabulary id)."""
    valid = pd.read_parquet(raw / "valid.parquet").head(9)[["userId", "movieId"]].reset_index(drop=True)
    unseen = pd.DataFrame({"userId": [10_000_000], "movieId": [int(valid["movieId"].iloc[0])]})
    return pd.concat([valid, unseen], ignore_index=True).astype(np.int64)


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


def infer(server: Server, protocol: str, model: str, frame: pd.DataFrame, dtype=np.int64) -> dict[str, np.ndarray]:
    if protocol == "http":
        import tritonclient.http as client
        conn = client.InferenceServerClient(server.http_url)
    else:
        import tritonclient.grpc as client
        conn = client.InferenceServerClient(server.grpc_url)
    inputs = []
    for col in frame.columns:
        data = frame[col].to_numpy().astype(dtype).reshape(-1, 1)
        t = client.InferInput(col, list(data.shape), "INT64" if dtype == np.int64 else "INT32")
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
@pytest.mark.parametrize("name", SPECS)
def test_preprocessing_matches_offline_transform(deployed, name, protocol):
    server, out = deployed
    d = out[name]
    frame = request_frame(d["raw"])
    got = infer(server, protocol, f"{name}_nvt", frame)
    want = offline_vcsr(d["workflow"], d["plan"], frame)
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
    else:
        assert got["CATCOLUMN"].size == len(frame) * 2


def test_request_carries_raw_columns_only(deployed):
    """movielens_genres joins genres inside the workflow: the request has userId and movieId, not genres."""
    import tritonclient.http as client

    server, _ = deployed
    meta = client.InferenceServerClient(server.http_url).get_model_metadata("movielens_genres_nvt")
    assert [i["name"] for i in meta["inputs"]] == ["userId", "movieId"]
    assert [o["name"] for o in meta["outputs"]] == ["DES", "CATCOLUMN", "ROWINDEX"]


def test_hugectr_model_unavailable_only_for_missing_backend(deployed):
    import tritonclient.http as client
    from tritonclient.utils import InferenceServerException

    server, _ = deployed
    conn = client.InferenceServerClient(server.http_url)
    with pytest.raises(InferenceServerException) as err:
        conn.load_model("movielens")
    assert "unable to find backend library for backend 'hugectr'" in str(err.value)
    index = {m["name"]: m for m in conn.get_model_repository_index()}
    assert index["movielens"]["state"] == "UNAVAILABLE"
    assert "unable to find backend library for backend 'hugectr'" in index["movielens"]["reason"]
    assert index["movielens_nvt"]["state"] == "READY" and index["movielens_genres_nvt"]["state"] == "READY"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_wrong_dtype_is_a_triton_error_and_model_stays_ready(deployed, protocol):
    from tritonclient.utils import InferenceServerException

    server, out = deployed
    frame = request_frame(out["movielens"]["raw"])
    with pytest.raises(InferenceServerException) as err:
        infer(server, protocol, "movielens_nvt", frame, dtype=np.int32)
    assert "INT32" in str(err.value) and "INT64" in str(err.value)
    import tritonclient.http as client
    assert client.InferenceServerClient(server.http_url).is_model_ready("movielens_nvt")
    got = infer(server, protocol, "movielens_nvt", frame)
    assert got["CATCOLUMN"].size == len(frame) * 2


def test_bad_shape_is_answered_by_the_model(deployed):
    """A [batch, 2] tensor passes Triton's checks (dims [-1]) and is refused by the model itself."""
    import tritonclient.http as client
    from tritonclient.utils import InferenceServerException

    server, _ = deployed
    conn = client.InferenceServerClient(server.http_url)
    inputs = []
    for col in ("userId", "movieId"):
        t = client.InferInput(col, [3, 2], "INT64")
        t.set_data_from_numpy(np.ones((3, 2), np.int64))
        inputs.append(t)
    with pytest.raises(InferenceServerException) as err:
        conn.infer("movielens_nvt", inputs)
    assert "must have shape [batch, 1]" in str(err.value)
    assert conn.is_model_ready("movielens_nvt")
