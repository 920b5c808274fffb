"""A client's wrong shape or dtype gets HTTP 400 with a message (gRPC INVALID_ARGUMENT) from every served model.

The real Triton server of tests/test_triton_torch_serving.py (one per session: conftest's ``torch_served``) serves
the PyTorch repository of ``movielens_genres`` (trained a few iterations on the demo data and assembled there): the
preprocessing model ``movielens_genres_nvt`` (raw userId and movieId; genres joined inside the workflow), the model
step ``movielens_genres`` and the ensemble ``movielens_genres_ens``. Each bad request must be refused with 400 and a
line that names the input; the models stay ready and answer the next good request. (The one-hot ``movielens`` is not
served there: the module docstring of tests/test_triton_torch_serving.py says why.)
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import numpy as np
import pandas as pd
import pytest

from tests.triton_server import Server

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("triton_torch_serving")]     # the same server
NAME = "movielens_genres"           # the served MovieLens model (module docstring)


@pytest.fixture(scope="module")
def server(torch_served) -> Server:
    return torch_served[0]


@pytest.fixture(scope="module")
def plan(torch_served):
    return torch_served[1][NAME]["plan"]


@pytest.fixture(scope="module")
def good_raw(torch_served) -> dict:
    """Two validation rows as a request (their movieIds are in the movies the workflow joins genres from)."""
    valid = pd.read_parquet(torch_served[1][NAME]["raw"] / "valid.parquet").head(2)
    return {col: ("INT64", [2, 1], [int(v) for v in valid[col]]) for col in ("userId", "movieId")}


def post(server: Server, model: str, inputs: dict[str, tuple[str, list, list]]) -> tuple[int, dict]:
    """(HTTP status, JSON body) of one KServe v2 request; inputs: name -> (datatype, shape, flat data)."""
    body = {"inputs": [{"name": k, "datatype": t, "shape": s, "data": d} for k, (t, s, d) in inputs.items()]}
    request = urllib.request.Request(f"http://{server.http_url}/v2/models/{model}/infer",
                                     data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def vcsr(server: Server, good_raw: dict) -> dict:
    status, body = post(server, f"{NAME}_nvt", good_raw)
    assert status == 200, body
    return {o["name"]: (o["datatype"], o["shape"], o["data"]) for o in body["outputs"]}


@pytest.mark.parametrize("model", [f"{NAME}_nvt", f"{NAME}_ens"])
def test_raw_column_of_the_wrong_shape_is_400(server, good_raw, model):
    users, movies = good_raw["userId"][2], good_raw["movieId"][2]
    status, body = post(server, model, {"userId": ("INT64", [2, 2], users + movies), "movieId": good_raw["movieId"]})
    assert status == 400, body
    assert "input 'userId' must have shape [batch, 1], got [2, 2]" in body["error"]


@pytest.mark.parametrize("model", [f"{NAME}_nvt", f"{NAME}_ens"])
def test_raw_column_of_the_wrong_dtype_is_400(server, good_raw, model):
    status, body = post(server, model, {**good_raw, "userId": ("INT32", [2, 1], good_raw["userId"][2])})
    assert status == 400, body
    assert "userId" in body["error"] and "INT64" in body["error"]


def test_model_step_inputs_that_do_not_fit_are_400(server, plan, good_raw):
    good = vcsr(server, good_raw)
    des, keys, rowindex = good["DES"], good["CATCOLUMN"], good["ROWINDEX"]
    slots, tables = sum(len(t.slots) for t in plan.preprocessing.tables), len(plan.preprocessing.tables)
    assert len(rowindex[2]) == 2 * slots + tables                  # GOOD_RAW's two rows
    entries = 2 * slots + tables - 1                 # two rows' entries less one: not B x slots + tables (slots > 1)
    assert slots > 1
    short = {"DES": des, "CATCOLUMN": keys, "ROWINDEX": ("INT32", [1, entries], rowindex[2][:entries])}
    status, body = post(server, NAME, short)
    assert status == 400 and f"ROWINDEX has {entries} entries" in body["error"], body
    outside = {"DES": des, "CATCOLUMN": ("INT64", keys[1], [10**9] * len(keys[2])), "ROWINDEX": rowindex}
    status, body = post(server, NAME, outside)
    assert status == 400 and "has a key outside its range" in body["error"], body
    wrong_type = {"DES": des, "CATCOLUMN": ("INT32", keys[1], keys[2]), "ROWINDEX": rowindex}
    status, body = post(server, NAME, wrong_type)
    assert status == 400 and "CATCOLUMN" in body["error"], body
    status, body = post(server, NAME, good)          # still ready
    assert status == 200 and np.isfinite(body["outputs"][0]["data"]).all()


def test_grpc_clients_get_invalid_argument_and_the_ensemble_keeps_serving(server, good_raw):
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    with server.grpc() as client:
        bad = grpcclient.InferInput("userId", [1, 3], "INT64")
        bad.set_data_from_numpy(np.array([[1, 2, 3]], dtype=np.int64))
        movie = grpcclient.InferInput("movieId", [1, 1], "INT64")
        movie.set_data_from_numpy(np.array([good_raw["movieId"][2][:1]], dtype=np.int64))
        with pytest.raises(InferenceServerException) as caught:
            client.infer(f"{NAME}_ens", [bad, movie])
        assert caught.value.status() == "StatusCode.INVALID_ARGUMENT"
        assert "must have shape [batch, 1]" in caught.value.message()
        user = grpcclient.InferInput("userId", [1, 1], "INT64")
        user.set_data_from_numpy(np.array([good_raw["userId"][2][:1]], dtype=np.int64))
        scores = client.infer(f"{NAME}_ens", [user, movie]).as_numpy("OUTPUT0")
        assert scores.shape == (1, 1) and np.isfinite(scores).all()
