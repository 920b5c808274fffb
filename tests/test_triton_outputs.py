"""Several labels served (issue 41 item 3): the PyTorch model step and its ensemble name one output per label column,
[1, batch] FP32 each, and the python-backend model answers each label's scores under its name.

A two-label spec (tests/test_multilabel.py's MMoE-like one) renders; its config.pbtxt files parse back through
Triton's ModelConfig; then the runtime's ``Serve`` runs in this process on a two-label checkpoint through a stand-in
``triton_python_backend_utils`` (the real server runs the model in tests/test_triton_torch_serving.py) and its
outputs equal the offline forward, label by label. A real server serves a two-label model end to end in
tests/test_serve.py (its module's model has two labels: `ctrgen serve`, `ctrgen query` and `--compare`, a column per
label) and in tests/test_families_served.py (MMoE).
"""

from __future__ import annotations

import gc
import importlib.util
import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as mc

from codegen.pipeline import open_spec, render_spec
from codegen.triton.layout import rendered_repository
from codegen.triton.lint.modelconfig import parse_config_text
from codegen.triton.lint.validate import validate_repository
from test_boundaries import project, spec_with
from test_multilabel import MMOE, TWO

LABELS = ["rating", "liked"]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    spec = spec_with({"targets": ["hugectr", "torch"]}, spec_with(MMOE))
    return render_spec(open_spec(project(tmp_path_factory.mktemp("two"), spec, TWO)))


def _repo(rendered, folder: str) -> dict[str, str]:
    return {str(p): t for p, t in rendered_repository(rendered.files, folder).items()}


def _config(text: str) -> mc.ModelConfig:
    return parse_config_text(text)


def test_model_step_and_ensemble_name_one_output_per_label(rendered):
    repo = _repo(rendered, "triton_torch")
    model, ens = _config(repo["m/config.pbtxt"]), _config(repo["m_ens/config.pbtxt"])
    want = [(name, "TYPE_FP32", [-1]) for name in LABELS]
    for cfg in (model, ens):
        assert [(t.name, mc.DataType.Name(t.data_type), list(t.dims)) for t in cfg.output] == want
    assert dict(ens.ensemble_scheduling.step[1].output_map) == {name: name for name in LABELS}
    # The HugeCTR repository keeps the backend's one output; the torch ensemble is therefore its own file.
    hugectr = _repo(rendered, "triton")
    assert [t.name for t in _config(hugectr["m/config.pbtxt"]).output] == ["OUTPUT0"]
    assert [t.name for t in _config(hugectr["m_ens/config.pbtxt"]).output] == ["OUTPUT0"]
    assert "triton_torch/m_ens/config.pbtxt" in {str(p) for p in rendered.files}


def test_validate_accepts_the_layout_and_flags_an_output_the_model_lacks(rendered, tmp_path):
    root = tmp_path / "repo"
    for rel, text in _repo(rendered, "triton_torch").items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    assert [p for p in validate_repository(root) if p.severity == "error"] == []
    ens = root / "m_ens" / "config.pbtxt"
    ens.write_text(ens.read_text().replace('key: "liked"', 'key: "clicked"'))
    problems = validate_repository(root)
    assert any("'clicked' is not an output of m" in p.message for p in problems), problems
    assert any("'liked' is not produced by any step" in p.message for p in problems), problems


# ---- the python-backend model in this process ----------------------------------------------------------------------

class _Tensor:
    def __init__(self, name, array):
        self.name, self.array = name, array

    @classmethod
    def from_dlpack(cls, name, capsule):
        return cls(name, torch.utils.dlpack.from_dlpack(capsule).numpy().copy())

    def to_dlpack(self):
        return torch.utils.dlpack.to_dlpack(torch.from_numpy(self.array))


class _Response:
    def __init__(self, output_tensors, error=None):
        self.output_tensors, self.error = output_tensors, error


def _stub_pb() -> types.ModuleType:
    """What Serve uses of triton_python_backend_utils: requests are {input name: _Tensor}."""
    pb = types.ModuleType("triton_python_backend_utils")
    pb.TritonModelException = type("TritonModelException", (Exception,), {})
    pb.TritonError = type("TritonError", (), {"INVALID_ARG": 3, "INTERNAL": 13,
                                              "__init__": lambda self, message, code=None: setattr(self, "message",
                                                                                                     message)})
    pb.Tensor, pb.InferenceResponse = _Tensor, _Response
    pb.get_input_tensor_by_name = lambda request, name: request.get(name)
    return pb


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture()
def served(rendered, tmp_path, monkeypatch):
    """(Serve initialized on a seeded two-label checkpoint, the Model, the config module, the stand-in pb). What
    initialize built (torch's modules, the Model) is left out of the collector's full passes (gc.freeze: the stub's
    collections while serving and its exit scan none of it); this process collects as before afterwards."""
    from codegen.runtime.torch_model import Serve

    pb = _stub_pb()
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", pb)
    repo = _repo(rendered, "triton_torch")
    version = tmp_path / "m" / "1"
    version.mkdir(parents=True)
    for name in ("train_torch.py", "features.json"):
        (version / name).write_text(rendered.files[next(p for p in rendered.files if str(p) == name)])
    (version / "model.py").write_text(repo["m/1/model.py"])
    config = _load(version / "model.py", "two_label_model")
    script = _load(version / "train_torch.py", "two_label_train_torch")
    torch.manual_seed(3)
    model = script.Model(json.loads((version / "features.json").read_text())).eval()
    torch.save(model.state_dict(), version / "model.pt")
    cfg = json_format.MessageToDict(_config(repo["m/config.pbtxt"]), preserving_proto_field_name=True)
    serve = Serve(config, pb, script)
    args = {"model_config": json.dumps(cfg), "model_instance_kind": "CPU", "model_repository": str(tmp_path / "m"),
            "model_version": "1", "model_instance_device_id": "0", "model_instance_name": "m_0"}
    frozen = gc.get_freeze_count()
    serve.initialize(args)
    assert gc.get_freeze_count() > frozen
    yield serve, model, config, args
    gc.unfreeze()


def _request(config, rng, batch: int):
    """A VCSR request of one-hot slots (the preprocessing model's output) and the ids it carries."""
    slots = [s for _t, _i, table_slots in config.TABLES for s in table_slots]
    ids = np.stack([rng.integers(0, card, batch) for _c, _o, _k, card in slots], axis=1)      # (batch, slots)
    offsets = np.array([offset for _c, offset, _k, _card in slots])
    keys = (ids + offsets).astype(config.KEY_DTYPE).reshape(-1)           # sample-major
    rowindex = np.concatenate([np.arange(batch * len(table_slots) + 1) for _t, _i, table_slots in config.TABLES])
    dense = rng.normal(size=(batch, config.N_CONTINUOUS)).astype(np.float32)
    request = {"DES": _Tensor("DES", dense.reshape(-1)), "CATCOLUMN": _Tensor("CATCOLUMN", keys),
               "ROWINDEX": _Tensor("ROWINDEX", rowindex.astype(np.int32))}
    return request, dense, ids


def test_execute_answers_each_labels_scores_under_its_name(served):
    serve, model, config, _args = served
    assert len(config.TABLES) == 1                       # the per-table id tensors below assume one table
    rng = np.random.default_rng(5)
    requests = [_request(config, rng, batch) for batch in (3, 5)]       # two queued requests, one forward
    responses = serve.execute([r for r, _d, _i in requests])
    for response, (_r, dense, ids) in zip(responses, requests):
        assert response.error is None
        with torch.no_grad():
            want = torch.sigmoid(model(torch.from_numpy(dense), torch.from_numpy(ids[:, :, None]))).numpy()
        assert want.shape == (len(ids), 2)
        got = {t.name: t.array for t in response.output_tensors}
        assert list(got) == LABELS
        for j, name in enumerate(LABELS):
            assert got[name].shape == (1, len(ids)) and got[name].dtype == np.float32
            np.testing.assert_allclose(got[name][0], want[:, j], rtol=1e-6, atol=1e-7)
        assert not np.allclose(got["rating"], got["liked"])         # two towers, two different scores


def test_outputs_that_are_not_the_labels_fail_the_load(served):
    serve, _model, _config_module, args = served
    cfg = json.loads(args["model_config"])
    cfg["output"] = cfg["output"][::-1]                 # features.json's order is the config's
    with pytest.raises(serve.pb.TritonModelException, match="are not the labels"):
        serve.initialize({**args, "model_config": json.dumps(cfg)})


# ---- ctrgen query's printing and --compare -------------------------------------------------------------------------

def test_query_prints_a_column_per_output_and_compares_each(capsys, tmp_path):
    from codegen.errors import UserError
    from codegen.serve.cli_query import _compare, _print_scores
    from codegen.serve.query import QueryResult

    served = np.array([[0.25, 0.5], [0.125, 0.75]])
    result = QueryResult(served, tuple(LABELS))
    _print_scores(result)
    assert capsys.readouterr().out.splitlines() == ["row\trating\tliked", "0\t0.25\t0.5", "1\t0.125\t0.75"]
    assert _compare(result, served + [[0.0, 1e-6]], tmp_path, 1e-5)
    assert not _compare(result, served + [[0.0, 1e-3]], tmp_path, 1e-5)          # only `liked` differs
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].startswith("served = offline (rating): max |served - offline| = 0 ")
    assert lines[-1].startswith("served != offline (liked): max |served - offline| = 0.001 ")
    with pytest.raises(UserError, match="scores 1 value"):
        _compare(result, served[:, :1], tmp_path, 1e-5)
    one = QueryResult(served[:, :1], ("OUTPUT0",))           # one output: today's lines, no header
    _print_scores(one)
    assert capsys.readouterr().out.splitlines() == ["0\t0.25", "1\t0.125"]
    assert _compare(one, served[:, :1], tmp_path, 1e-5)                # and one verdict line, no label named
    assert capsys.readouterr().out.splitlines() == ["served = offline: max |served - offline| = 0 over 2 row(s) "
                                                    "(tolerance 1e-05)"]
