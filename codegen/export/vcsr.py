"""The ONNX model step of an assembled Triton repository (``ctrgen assemble --onnx``): the trained Model behind the
interface of the python-backend model it replaces, so that the preprocessing model and the ensemble stay as they are.

Inputs, batch dimension 1 as the preprocessing model sends them (HugeCTR's VCSR): ``DES`` float32 [1, samples x
continuous]; ``CATCOLUMN`` int64 [1, keys], sample-major over every slot of every table, each key shifted by its
slot's offset; ``ROWINDEX`` int32 [1, ...], one CSR row-pointer array per table. Outputs: the python model's, one
[1, samples x labels] sample-major (one output) or one [1, samples] per label. The graph unpacks the VCSR tensors as
codegen/runtime/torch_model.py does; where that model refuses a request (a key outside its slot's range, more keys
than nnz_per_slot), the graph cannot refuse: that sample's scores are NaN, never another row's score.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

import numpy as np

from ..runtime.contract import CATCOLUMN, DES, ROWINDEX
from .onnx import OPSET


@dataclass(frozen=True)
class InputSlots:
    """One embedding table in CATCOLUMN's order: its sparse input and each slot's (offset, nnz, cardinality)."""

    input: str
    slots: tuple[tuple[int, int, int], ...]


def tables_of(plan, features: dict) -> list[InputSlots]:
    """The tables of the repository plan's preprocessing model, each slot's nnz that of its sparse input."""
    nnz = {s["input"]: int(s["nnz"]) for s in features["sparse"]}
    return [InputSlots(t.input, tuple((int(s.offset), nnz[t.input], int(s.cardinality)) for s in t.slots))
            for t in plan.preprocessing.tables]


def vcsr_module(model, features: dict, tables: list[InputSlots], outputs: list[str]):
    """``model`` (weights loaded) as a module of (DES, CATCOLUMN, ROWINDEX) returning the step's outputs."""
    import torch

    n_cont = len(features["continuous"])
    n_slots = sum(len(t.slots) for t in tables)
    inputs = [s["input"] for s in features["sparse"]]

    class Vcsr(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, des, keys, rowindex):
            keys, rowindex = keys.reshape(-1), rowindex.reshape(-1).long()
            batch = torch.div(rowindex.shape[0] - len(tables), n_slots, rounding_mode="floor")
            counts, start = [], 0
            for t in tables:
                pointers = rowindex[start:start + batch * len(t.slots) + 1]
                counts.append((pointers[1:] - pointers[:-1]).reshape(batch, len(t.slots)))
                start = start + batch * len(t.slots) + 1
            count = torch.cat(counts, dim=1)                          # (samples, slots), in CATCOLUMN's order
            flat = count.reshape(-1)
            starts = (torch.cumsum(flat, 0) - flat).reshape(batch, n_slots)
            bad = torch.zeros_like(count[:, 0], dtype=torch.bool)
            sparse, g = {}, 0
            for t in tables:
                ids = []
                for offset, nnz, card in t.slots:
                    pos = torch.arange(nnz).reshape(1, nnz)
                    n = count[:, g:g + 1]
                    valid = pos < n
                    index = torch.where(valid, starts[:, g:g + 1] + pos, torch.zeros_like(pos))
                    values = keys[index.clamp(max=keys.shape[0] - 1)].long() - offset
                    wrong = valid & ((values < 0) | (values >= card))
                    bad = bad | wrong.any(dim=1) | (n[:, 0] > nnz)
                    ids.append(torch.where(valid & ~wrong, values, torch.full_like(values, -1)))
                    g += 1
                sparse[t.input] = torch.stack(ids, dim=1)             # (samples, slots, nnz), -1 padding
            dense = des.reshape(batch, n_cont).float()
            scores = torch.sigmoid(self.model(dense, *[sparse[name] for name in inputs]).float())
            if not n_cont:      # DES is empty but still an input the ensemble sends: keep it in the graph
                scores = scores + des.reshape(-1).sum() * 0
            scores = torch.where(bad.reshape(-1, 1), torch.full_like(scores, float("nan")), scores)
            if len(outputs) == 1:
                return scores.reshape(1, -1)
            return tuple(scores[:, j].reshape(1, -1) for j in range(len(outputs)))

    return Vcsr().eval()


def to_vcsr(arrays: dict, features: dict, tables: list[InputSlots]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The preprocessing model's VCSR tensors of read_split's rows (what the check feeds both models)."""
    by_input = dict(zip([s["input"] for s in features["sparse"]], arrays["sparse"]))
    keys: list[int] = []
    pointers = []
    for t in tables:
        ids = by_input[t.input]
        counts = (ids >= 0).sum(axis=2)                              # (samples, slots)
        pointers.append(np.concatenate([[0], np.cumsum(counts.reshape(-1))]))
    for b in range(len(arrays["labels"])):
        for t in tables:
            ids = by_input[t.input][b]
            for j, (offset, _nnz, _card) in enumerate(t.slots):
                keys.extend(int(k) + offset for k in ids[j] if k >= 0)
    des = np.ascontiguousarray(arrays["dense"], dtype=np.float32).reshape(1, -1)
    return (des, np.asarray(keys, dtype=np.int64).reshape(1, -1),
            np.concatenate(pointers).astype(np.int32).reshape(1, -1))


def export_vcsr(model, features: dict, tables: list[InputSlots], outputs: list[str], arrays: dict) -> bytes:
    """The ONNX file of the model step, traced on the first rows of ``arrays``; every input and output dimension
    after the batch one is dynamic."""
    import torch

    module = vcsr_module(model, features, tables, outputs)
    small = {"labels": arrays["labels"][:3], "dense": arrays["dense"][:3], "sparse": [s[:3] for s in arrays["sparse"]]}
    example = tuple(torch.from_numpy(a) for a in to_vcsr(small, features, tables))
    axes = {name: {1: f"{name}_size"} for name in (DES, CATCOLUMN, ROWINDEX, *outputs)}
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, example, buffer, dynamo=False, opset_version=OPSET,
                          input_names=[DES, CATCOLUMN, ROWINDEX], output_names=outputs, dynamic_axes=axes,
                          do_constant_folding=True)
    return buffer.getvalue()


def vcsr_scores(data: bytes, vcsr: tuple, outputs: list[str]) -> np.ndarray:
    """The file's scores of one VCSR request by onnxruntime on the CPU, sample-major (samples x labels)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    out = session.run(outputs, dict(zip((DES, CATCOLUMN, ROWINDEX), vcsr)))
    return np.stack([np.asarray(o, dtype=np.float32).reshape(-1) for o in out], axis=1).reshape(-1) \
        if len(outputs) > 1 else np.asarray(out[0], dtype=np.float32).reshape(-1)
