"""A client's wrong shape or dtype gets HTTP 400 with a message (gRPC INVALID_ARGUMENT) from every served model.

The real Triton server of tests/test_triton_torch_serving.py (one per session: conftest's ``torch_served``) serves
the PyTorch repository of ``movielens`` (trained a few iterations on the demo data and assembled there): the
preprocessing model ``movielens_nvt``, the model step ``movielens`` and the ensemble ``movielens_ens``. Each bad
request must be refused with 400 and a line that names the input; the models stay ready and answer the next good
request.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import numpy as np
import pytest

from tests.triton_server import Server

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("triton_torch_serving")]     # the same server


@pytest.fixture(scope="module")
def server(torch_served) -> Server:
    return torch_served[0]


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


GOOD_RAW = {"userId": ("INT64", [2, 1], [3, 4]), "movieId": ("INT64", [2, 1], [5, 6])}


def vcsr(server: Server) -> dict:
    status, body = post(server, "movielens_nvt", GOOD_RAW)
    assert status == 200, body
    return {o["name"]: (o["datatype"], o["shape"], o["data"]) for o in body["outputs"]}


@pytest.mark.parametrize("model", ["movielens_nvt", "movielens_ens"])
def test_raw_column_of_the_wrong_shape_is_400(server, model):
    status, body = post(server, model, {"userId": ("INT64", [2, 2], [3, 4, 5, 6]),
                                        "movieId": ("INT64", [2, 1], [5, 6])})
    assert status == 400, body
    assert "input 'userId' must have shape [batch, 1], got [2, 2]" in body["error"]


@pytest.mark.parametrize("model", ["movielens_nvt", "movielens_ens"])
def test_raw_column_of_the_wrong_dtype_is_400(server, model):
    status, body = post(server, model, {"userId": ("INT32", [2, 1], [3, 4]), "movieId": ("INT64", [2, 1], [5, 6])})
    assert status == 400, body
    assert "userId" in body["error"] and "INT64" in body["error"]


def test_model_step_inputs_that_do_not_fit_are_400(server):
    good = vcsr(server)
    des, keys, rowindex = good["DES"], good["CATCOLUMN"], good["ROWINDEX"]
    short = {"DES": des, "CATCOLUMN": keys, "ROWINDEX": ("INT32", [1, 4], rowindex[2][:4])}
    status, body = post(server, "movielens", short)
    assert status == 400 and "ROWINDEX has 4 entries" in body["error"], body
    outside = {"DES": des, "CATCOLUMN": ("INT64", keys[1], [10**9] * len(keys[2])), "ROWINDEX": rowindex}
    status, body = post(server, "movielens", outside)
    assert status == 400 and "has a key outside its range" in body["error"], body
    wrong_type = {"DES": des, "CATCOLUMN": ("INT32", keys[1], keys[2]), "ROWINDEX": rowindex}
    status, body = post(server, "movielens", wrong_type)
    assert status == 400 and "CATCOLUMN" in body["error"], body
    status, body = post(server, "movielens", good)          # still ready
    assert status == 200 and np.isfinite(body["outputs"][0]["data"]).all()


def test_grpc_clients_get_invalid_argument_and_the_ensemble_keeps_serving(server):
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    with server.grpc() as client:
        bad = grpcclient.InferInput("userId", [1, 3], "INT64")
        bad.set_data_from_numpy(np.array([[1, 2, 3]], dtype=np.int64))
        movie = grpcclient.InferInput("movieId", [1, 1], "INT64")
        movie.set_data_from_numpy(np.array([[5]], dtype=np.int64))
        with pytest.raises(InferenceServerException) as caught:
            client.infer("movielens_ens", [bad, movie])
        assert caught.value.status() == "StatusCode.INVALID_ARGUMENT"
        assert "must have shape [batch, 1]" in caught.value.message()
        user = grpcclient.InferInput("userId", [1, 1], "INT64")
        user.set_data_from_numpy(np.array([[3]], dtype=np.int64))
        scores = client.infer("movielens_ens", [user, movie]).as_numpy("OUTPUT0")
        assert scores.shape == (1, 1) and np.isfinite(scores).all()
