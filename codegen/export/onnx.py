"""The ONNX file of a trained Model, and its check with onnxruntime.

What the file holds: the Model of the generated train_torch.py with the run's weights, followed by the sigmoid the
served model applies, so that it returns scores (probabilities), not logits. Its inputs are named as features.json
names them, each with a dynamic first dimension, ``batch``:

- ``dense``: float32 [batch, continuous columns], in features.json's order (absent when the model has none);
- one per sparse input (its name in the spec, e.g. ``data1``): int64 [batch, slots, nnz], each slot's ids as the
  trainer reads them from the transformed Parquet data (0 <= id < the column's cardinality; -1 pads a multi-hot
  list shorter than nnz).

Its outputs are one per label column, named as the label (e.g. ``rating``): float32 [batch].

The file is written by torch's TorchScript ONNX exporter (``dynamo=False``, opset ``OPSET``), which needs the onnx
package only: the dynamo exporter needs onnxscript and onnx_ir besides. With the same weights and the same torch and
onnx versions it writes the same bytes. The check runs the file with onnxruntime on validation rows and compares its
scores with the PyTorch Model's: the largest absolute difference must be at most ``TOLERANCE``.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

import numpy as np

from ..errors import UserError

OPSET = 17                    # onnxruntime >= 1.12 and Triton's onnxruntime backend (23.xx and later) run it
TOLERANCE = 1e-5              # the largest score difference accepted, as `ctrgen query --compare` accepts
TRACE_ROWS = 3                # the rows the exporter traces with (any count: the batch dimension is dynamic)
MAX_PROTO_BYTES = 2 << 30     # a protobuf message holds at most 2 GiB: larger weights need ONNX external data
DENSE = "dense"


@dataclass(frozen=True)
class Signature:
    """The ONNX file's input and output names, in order."""

    inputs: list[str]
    outputs: list[str]


def signature(features: dict) -> Signature:
    """Input and output names of the file for features.json (module docstring); refused when two would be the same
    (ONNX names every value once)."""
    inputs = ([DENSE] if features["continuous"] else []) + [s["input"] for s in features["sparse"]]
    outputs = [label["name"] for label in features["labels"]]
    names = inputs + outputs
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UserError.one("features.json", f"the name {twice[0]!r} would name two of the ONNX file's inputs and "
                            f"outputs {names}", field="labels" if twice[0] in outputs else "sparse",
                            fix="rename the sparse input or the label column in the spec, then train again")
    return Signature(inputs, outputs)


def scores_module(model, features: dict):
    """``model`` (the generated Model, weights loaded) as a module of the file's inputs returning one score tensor
    [batch] per label."""
    import torch

    has_dense = bool(features["continuous"])

    class Scores(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs):
            if has_dense:
                dense, sparse = inputs[0], inputs[1:]
            else:           # no continuous column: the Model still takes its (batch, 0) dense tensor
                sparse = inputs
                dense = torch.zeros(sparse[0].shape[0], 0, dtype=torch.float32)
            scores = torch.sigmoid(self.model(dense, *sparse).float())
            return tuple(scores[:, j] for j in range(scores.shape[1]))

    return Scores().eval()


def feeds(arrays: dict, features: dict, rows: slice = slice(None)) -> list[np.ndarray]:
    """The file's inputs, in order, of read_split's arrays (dense float32, each sparse input's int64 ids)."""
    dense = [np.ascontiguousarray(arrays["dense"][rows], dtype=np.float32)] if features["continuous"] else []
    return dense + [np.ascontiguousarray(ids[rows], dtype=np.int64) for ids in arrays["sparse"]]


def weight_bytes(model) -> int:
    return sum(t.numel() * t.element_size() for t in model.state_dict().values())


def export_bytes(model, features: dict, arrays: dict) -> bytes:
    """The ONNX file of ``model`` (weights loaded, eval mode), traced on the first rows of ``arrays``."""
    import torch

    sig = signature(features)
    size = weight_bytes(model)
    if size >= MAX_PROTO_BYTES - (64 << 20):
        raise UserError.one("model.pt", f"the weights are {size / (1 << 30):.1f} GiB; one ONNX file holds at most "
                            "2 GiB (protobuf's limit) and ctrgen export writes no external data files",
                            fix="export a model with smaller embedding tables")
    module = scores_module(model, features)
    example = tuple(torch.from_numpy(a) for a in feeds(arrays, features, slice(0, TRACE_ROWS)))
    batch = {0: "batch"}
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")       # the exporter's deprecation and tracer warnings: not the user's concern
        torch.onnx.export(module, example, buffer, dynamo=False, opset_version=OPSET, input_names=sig.inputs,
                          output_names=sig.outputs, dynamic_axes={name: batch for name in sig.inputs + sig.outputs},
                          do_constant_folding=True)
    return buffer.getvalue()


def torch_scores(model, features: dict, arrays: dict) -> np.ndarray:
    """The PyTorch scores (rows, labels) of ``arrays``: sigmoid of the Model's logits, as the served model gives."""
    import torch

    module = scores_module(model, features)
    with torch.no_grad():
        out = module(*(torch.from_numpy(a) for a in feeds(arrays, features)))
    return np.stack([o.numpy() for o in out], axis=1)


def onnx_scores(data: bytes, features: dict, arrays: dict) -> np.ndarray:
    """The file's scores (rows, labels) of ``arrays`` by onnxruntime on the CPU, all rows in one batch."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1          # a check, not a benchmark: one thread, the same sums every time
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    sig = signature(features)
    out = session.run(sig.outputs, dict(zip(sig.inputs, feeds(arrays, features))))
    return np.stack([np.asarray(o, dtype=np.float32).reshape(-1) for o in out], axis=1)


def largest_difference(data: bytes, model, features: dict, arrays: dict) -> float:
    """The largest absolute difference between the file's and the Model's scores of the rows in ``arrays``."""
    ours, theirs = onnx_scores(data, features, arrays), torch_scores(model, features, arrays)
    if ours.shape != theirs.shape:
        return float("inf")
    diff = np.abs(ours.astype(np.float64) - theirs.astype(np.float64))
    if not np.isfinite(diff).all():         # NaN compares as no difference: it is the largest there is
        return float("inf")
    return float(np.max(diff, initial=0.0))
