"""A checkpoint is data (issue 43): ``--resume`` never runs code a pickle names, and every field is checked against
the model before it is loaded. The malicious checkpoint here is written with the plain pickle protocol, as an
attacker would; the old loader (``weights_only=False``) ran its ``os.system`` call, then failed with a TypeError."""

from __future__ import annotations

import os
import pickle
import random

import pytest
import torch
import torch.nn as nn

from codegen.runtime.checkpoint import resume
from codegen.runtime.errors import DataError

FEATURES = {"sparse": [{"name": "a", "cardinality": 4}]}


class _Runs:
    """Unpickled, calls os.system(command): what a hostile checkpoint file holds."""

    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


def _model():
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def _good(model, optimizer) -> dict:
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iteration": 7,
            "rng": torch.get_rng_state(), "features": FEATURES}


def test_a_checkpoint_whose_pickle_calls_os_system_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "checkpoint_5.pt"
    model, optimizer = _model()
    torch.save({**_good(model, optimizer), "model": _Runs(f"touch {marker}")}, path)
    with pytest.raises(DataError, match="refused: the checkpoint holds more than tensors and plain values"):
        resume(path, model, optimizer, FEATURES, torch.device("cpu"))
    assert not marker.exists()
    # The same bytes through the plain pickle protocol (no torch framing) are refused too.
    raw = tmp_path / "raw.pt"
    raw.write_bytes(pickle.dumps({"model": _Runs(f"touch {marker}"), "optimizer": {}, "iteration": 0}))
    with pytest.raises(DataError):
        resume(raw, model, optimizer, FEATURES, torch.device("cpu"))
    assert not marker.exists()


def test_a_checkpoint_of_this_model_resumes(tmp_path):
    model, optimizer = _model()
    path = tmp_path / "checkpoint_7.pt"
    torch.save(_good(model, optimizer), path)
    other, other_optimizer = nn.Linear(3, 1), None
    other_optimizer = torch.optim.SGD(other.parameters(), lr=0.1)
    state = resume(path, other, other_optimizer, FEATURES, torch.device("cpu"))
    assert state["iteration"] == 7
    assert torch.equal(other.weight, model.weight) and torch.equal(other.bias, model.bias)


@pytest.mark.parametrize("change, message", [
    ({"iteration": "7"}, "'iteration' is not a count"),
    ({"iteration": -1}, "'iteration' is not a count"),
    ({"model": [1, 2]}, "'model' is not a map of parameter names to tensors"),
    ({"model": {"weight": 3}}, "'model' is not a map of parameter names to tensors"),
    ({"optimizer": 5}, "'optimizer' is not an optimizer state"),
    ({"rng": torch.zeros(3)}, "'rng' is not a random-generator state"),
    ({"features": "x"}, "'features' is not a features.json map"),
    ({"features": {"sparse": []}}, "saved with other features"),
    ({"model": {"weight": torch.zeros(2, 2), "bias": torch.zeros(1)}}, "its weights do not fit this model"),
    ({"optimizer": {"state": {}, "param_groups": []}}, "its optimizer state does not fit this optimizer"),
])
def test_each_field_is_checked_against_the_model_before_use(tmp_path, change, message):
    model, optimizer = _model()
    path = tmp_path / "checkpoint_7.pt"
    torch.save({**_good(model, optimizer), **change}, path)
    before = model.weight.detach().clone()
    with pytest.raises(DataError, match=message):
        resume(path, model, optimizer, FEATURES, torch.device("cpu"))
    if "weights" not in message:
        assert torch.equal(model.weight, before)


@pytest.mark.parametrize("content", [b"", b"root:x:0:0:root:/root:/bin/bash\n", bytes(random.Random(3).randrange(256) for _ in range(4096)),
                                     b"PK\x03\x04" + bytes(100)])
def test_files_that_are_not_checkpoints_are_one_line(tmp_path, content):
    model, optimizer = _model()
    path = tmp_path / "checkpoint_1.pt"
    path.write_bytes(content)
    with pytest.raises(DataError, match="cannot load the checkpoint|refused"):
        resume(path, model, optimizer, FEATURES, torch.device("cpu"))


def test_a_fifo_or_a_folder_is_refused_without_being_opened(tmp_path):
    model, optimizer = _model()
    fifo = tmp_path / "fifo.pt"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path):
        with pytest.raises(DataError, match="cannot load the checkpoint \\(not a regular file\\)"):
            resume(path, model, optimizer, FEATURES, torch.device("cpu"))
    with pytest.raises(DataError, match="cannot load the checkpoint \\(No such file"):
        resume(tmp_path / "missing.pt", model, optimizer, FEATURES, torch.device("cpu"))
