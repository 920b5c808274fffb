"""The Triton PyTorch model step (``<name>``): the Model train_torch.py trained, fed by the preprocessing model.

A generated ``<name>/1/model.py`` holds its configuration (tables in CATCOLUMN's order, continuous width, key dtype)
and hands the stub's calls to ``Serve``; its version folder holds train_torch.py (whose ``Model`` is the network),
model.pt and features.json, all put there by `ctrgen assemble --checkpoint`. Inputs are the preprocessing model's VCSR
tensors (the HugeCTR backend's input, triton.md §3), batch dimension 1: DES float32 [1, batch x continuous], sample-
major; CATCOLUMN [1, keys], sample-major, each key shifted by its slot's offset; ROWINDEX int32, one CSR row-pointer
array per table. They are unpacked into the Model's inputs and the output is sigmoid(logits), FP32: one output,
one value per sample and label, shape [1, batch x labels] (what the HugeCTR backend returns); or, where the config
declares one output per label column (several labels), each label's scores [1, batch] under its name. KIND_GPU instances run on their GPU,
others on the CPU with the torch_num_threads parameter's threads each. Each execute() unpacks every request the
dynamic batcher queued and runs one forward for all of them. A malformed request gets HTTP 400 with a message (gRPC
INVALID_ARGUMENT); the model stays loaded.
"""

import gc
import json
from pathlib import Path

import numpy as np
import torch

from . import RuntimeMismatch, require
from .contract import CATCOLUMN, DES, ROWINDEX
from .contract import FEATURES_FILE as FEATURES
from .data import load_features
from .errors import DataError

WEIGHTS = "model.pt"


class RequestError(Exception):
    """A bad request: answered with HTTP 400 (INVALID_ARG), the model stays ready."""


class Serve:
    """The TritonPythonModel of a generated PyTorch model step: ``config`` holds what the generated model.py names
    (MODEL_NAME, TABLES, N_CONTINUOUS, KEY_DTYPE), ``pb_utils`` is the stub's triton_python_backend_utils, ``script``
    the generated train_torch.py (its Model and RUNTIME), imported by the model."""

    def __init__(self, config, pb_utils, script):
        self.pb, self.name, self.tables = pb_utils, config.MODEL_NAME, config.TABLES
        self.n_continuous, self.key_dtype = config.N_CONTINUOUS, np.dtype(config.KEY_DTYPE)
        self.script = script

    def initialize(self, args):
        config = json.loads(args["model_config"])
        threads = int(config.get("parameters", {}).get("torch_num_threads", {}).get("string_value") or 0)
        if threads > 0 and args["model_instance_kind"] != "GPU":
            torch.set_num_threads(threads)
            try:
                torch.set_num_interop_threads(1)
            except RuntimeError:        # only allowed before the first parallel work; the stub is fresh here
                pass

        here = Path(args["model_repository"]) / args["model_version"]
        for name in (WEIGHTS, FEATURES):
            if not (here / name).is_file():
                raise self.pb.TritonModelException(
                    f"{self.name}: no {name} in {str(here)!r} (run ctrgen assemble --checkpoint)")
        script = self.script
        try:
            require(script.RUNTIME, "train_torch.py")
        except RuntimeMismatch as exc:
            raise self.pb.TritonModelException(f"{self.name}: {exc}") from None
        try:
            features = load_features(here / FEATURES, script.LAYOUT)      # refuses other columns than the script's
        except DataError as exc:
            raise self.pb.TritonModelException(f"{self.name}: {exc}") from None
        trained = {c["name"]: c["cardinality"] for s in features["sparse"] for c in s["columns"]}
        for table, _input, slots in self.tables:
            for column, _offset, _keys, cardinality in slots:
                if trained.get(column) != cardinality:
                    raise self.pb.TritonModelException(
                        f"{self.name}: column {column!r} of table {table!r} has cardinality {trained.get(column)} in "
                        f"{FEATURES}, but this repository was generated for {cardinality}: regenerate it from the "
                        "features lock of the workflow the model was trained with")
        gpu = args["model_instance_kind"] == "GPU"
        self.device = torch.device(f"cuda:{args['model_instance_device_id']}" if gpu else "cpu")
        model = script.Model(features)
        state = torch.load(here / WEIGHTS, map_location=self.device, weights_only=True)
        try:
            model.load_state_dict(state)
        except RuntimeError as exc:
            raise self.pb.TritonModelException(f"{self.name}: {WEIGHTS} does not fit the Model of train_torch.py: "
                                                f"{exc}") from None
        self.model = model.to(self.device).eval()
        self.torch = torch
        self.inputs = [s["input"] for s in features["sparse"]]    # Model.forward(dense, *sparse) order
        self.nnz = {s["input"]: s["nnz"] for s in features["sparse"]}
        self.outputs = [o["name"] for o in config["output"]]
        labels = [c["name"] for c in features["labels"]]
        if len(self.outputs) > 1 and self.outputs != labels:
            # several outputs are one per label column, in features.json's order (codegen.triton.plan TorchStep)
            raise self.pb.TritonModelException(
                f"{self.name}: the outputs {self.outputs} are not the labels {labels} of {FEATURES}: regenerate the "
                "repository from the features lock of the workflow the model was trained with")
        # torch's modules and the Model live as long as the model: out of the collector's full passes (hundreds of
        # thousands of objects, scanned on every full collection otherwise, and again when the stub exits: ~0.5 s).
        gc.freeze()

    def execute(self, requests):
        """Every queued request unpacked, one forward for all of them, the scores split back per request."""
        responses = [None] * len(requests)
        good = []
        for i, request in enumerate(requests):
            try:
                good.append((i, self._unpack(self._input(request, DES, np.float32),
                                       self._input(request, CATCOLUMN, self.key_dtype),
                                       self._input(request, ROWINDEX, np.int32), self.nnz)))
            except RequestError as exc:
                responses[i] = self._error(str(exc), self.pb.TritonError.INVALID_ARG)
            except Exception as exc:  # report it, keep serving
                responses[i] = self._error(f"{self.name}: {type(exc).__name__}: {exc}", self.pb.TritonError.INTERNAL)
        if good:
            try:
                scores = self._forward([inputs for _, inputs in good])
                start = 0
                for i, (dense, _sparse) in good:
                    n = len(dense)
                    responses[i] = self.pb.InferenceResponse(output_tensors=self._outputs(scores[start:start + n]))
                    start += n
            except Exception as exc:  # report it, keep serving
                for i, _ in good:
                    responses[i] = self._error(f"{self.name}: {type(exc).__name__}: {exc}",
                                               self.pb.TritonError.INTERNAL)
        return responses

    def _outputs(self, scores):
        """One request's (samples, labels) scores as the output tensors: one output, [1, samples x labels]
        sample-major (the HugeCTR backend's layout); one output per label, that label's column [1, samples]."""
        if len(self.outputs) == 1:
            parts = [scores.reshape(1, -1)]
        elif scores.shape[1] != len(self.outputs):
            raise RuntimeError(f"the Model returns {scores.shape[1]} columns for the {len(self.outputs)} outputs "
                               f"{self.outputs}")
        else:
            parts = [scores[:, j].reshape(1, -1) for j in range(len(self.outputs))]
        to_dlpack = self.torch.utils.dlpack.to_dlpack
        return [self.pb.Tensor.from_dlpack(name, to_dlpack(part.contiguous())) for name, part in zip(self.outputs, parts)]

    def _forward(self, batches):
        """[(dense, {input: ids})] -> sigmoid(logits) of all their samples, (samples, labels) float32 on the CPU."""
        torch = self.torch
        dense = np.concatenate([d for d, _ in batches]) if len(batches) > 1 else batches[0][0]
        sparse = [np.concatenate([s[name] for _, s in batches]) if len(batches) > 1 else batches[0][1][name]
                  for name in self.inputs]
        with torch.no_grad():
            logits = self.model(torch.from_numpy(dense).to(self.device),
                                *[torch.from_numpy(ids).to(self.device) for ids in sparse])
            return torch.sigmoid(logits).float().cpu().reshape(len(dense), -1)

    def _input(self, request, name, dtype):
        """An input as a flat numpy array. Tensors cross the backend through DLPack, not as_numpy() / Tensor(name,
        array): the python backend of Triton 2.51 builds those arrays with the numpy C API it was compiled against,
        and under numpy 2 they read as their first element repeated (seen on the GPU machine)."""
        tensor = self.pb.get_input_tensor_by_name(request, name)
        if tensor is None:
            raise RequestError(f"{self.name}: missing input {name!r}")
        array = self.torch.from_dlpack(tensor.to_dlpack()).cpu().numpy()
        if array.dtype != np.dtype(dtype):
            raise RequestError(f"{self.name}: input {name!r} must be {np.dtype(dtype).name}, got {array.dtype}")
        return array.reshape(-1)

    def _error(self, message, code):
        return self.pb.InferenceResponse(output_tensors=[], error=self.pb.TritonError(message, code))

    def _unpack(self, des, keys, rowindex, nnz):
        """VCSR -> (dense (batch, continuous) float32, {sparse input: (batch, slots, nnz) int64 ids, -1 padded})."""
        n_slots = sum(len(slots) for _, _, slots in self.tables)
        if (rowindex.size - len(self.tables)) % n_slots:
            raise RequestError(f"{self.name}: ROWINDEX has {rowindex.size} entries: not batch x {n_slots} slots "
                               f"+ {len(self.tables)} tables")
        batch = (rowindex.size - len(self.tables)) // n_slots
        if des.size != batch * self.n_continuous:
            raise RequestError(f"{self.name}: DES has {des.size} values, expected {batch} x {self.n_continuous}")
        counts, start = [], 0
        for table, _input, slots in self.tables:
            pointers = rowindex[start:start + batch * len(slots) + 1].astype(np.int64)
            start += batch * len(slots) + 1
            if pointers[0] != 0 or (np.diff(pointers) < 0).any():
                raise RequestError(f"{self.name}: ROWINDEX of table {table!r} must start at 0 and never decrease")
            counts.append(np.diff(pointers).reshape(batch, len(slots)))
        counts = np.concatenate(counts, axis=1)                 # (batch, slots): keys of each (sample, slot), in order
        if counts.sum() != keys.size:
            raise RequestError(f"{self.name}: CATCOLUMN has {keys.size} keys, ROWINDEX counts {int(counts.sum())}")
        starts = (np.cumsum(counts.ravel()) - counts.ravel()).reshape(counts.shape)   # sample-major segments
        sparse, col = {}, 0
        for _table, name, slots in self.tables:
            ids = np.full((batch, len(slots), nnz[name]), -1, dtype=np.int64)
            for j, (column, offset, _max_keys, cardinality) in enumerate(slots):
                n = counts[:, col + j]
                if n.size and n.max() > nnz[name]:
                    raise RequestError(f"{self.name}: a sample has {int(n.max())} keys in slot {column!r}, more than "
                                       f"its nnz_per_slot {nnz[name]}")
                rows = np.repeat(np.arange(batch), n)
                pos = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
                values = keys[np.repeat(starts[:, col + j], n) + pos].astype(np.int64) - offset
                if values.size and (values.min() < 0 or values.max() >= cardinality):
                    raise RequestError(f"{self.name}: slot {column!r} has a key outside its range "
                                       f"[{offset}, {offset + cardinality})")
                ids[rows, j, pos] = values
            col += len(slots)
            sparse[name] = ids
        return des.reshape(batch, self.n_continuous).astype(np.float32, copy=False), sparse
