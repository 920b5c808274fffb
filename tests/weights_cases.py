"""Small models for tests/test_weights*.py: a committed spec copied beside its features lock with every cardinality
cut to 3-6 rows (the model's layers and widths unchanged, its tables tiny), its generated Model with seeded values,
and a reader of HugeCTR's files written from the format (hugectr.md §5, the way hugectr2onnx's hugectr_loader.py
reads them), independent of codegen.weights."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import yaml

from conftest import REPO


def tiny_spec(root: Path, name: str) -> Path:
    """specs/<name>.yaml (without its workflow) and its lock with small cardinalities, in root/<name>/."""
    folder = root / name
    folder.mkdir(parents=True)
    text = "\n".join(line for line in (REPO / "specs" / f"{name}.yaml").read_text().splitlines()
                     if not line.startswith("workflow:"))
    (folder / f"{name}.yaml").write_text(text + "\n")
    lock_name = yaml.safe_load(text).get("features_lock") or f"{name}.features.lock.json"
    lock = json.loads((REPO / "specs" / lock_name).read_text())
    for i, column in enumerate(lock["categorical"]):
        column["cardinality"] = 3 + i % 4
    (folder / lock_name).write_text(json.dumps(lock))
    return folder / f"{name}.yaml"


def seeded(state: dict, seed: int, tables: list[str]) -> dict:
    """Every float tensor of ``state`` drawn afresh (variances positive); the padding row of each table (``tables``:
    their keys) zero, as the trainer keeps it."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for key, value in state.items():
        if value.dtype.is_floating_point:
            value = torch.randn(value.shape, generator=g)
            if key.endswith("running_var"):
                value = value.abs() + 0.5
            if key in tables:
                value[-1] = 0
        out[key] = value.clone()
    return out


# ---- an independent reader: the graph JSON's layers in order, each weight layer's bytes at the running offset ----

def _width(dims: dict, name: str) -> int:
    return dims[name] if isinstance(dims[name], int) else dims[name][-1]


def read_dense_as_hugectr2onnx(graph_json: Path, dense_file: Path) -> dict[str, list[np.ndarray]]:
    """{layer top: its arrays} of a dense file, walking the graph JSON as hugectr2onnx does: tensor widths from the
    Data layer and each layer's parameters; InnerProduct (in, out) + (out,), MultiCross per layer (w, b), BatchNorm
    and LayerNorm (gamma, beta), WeightMultiply (d0, d1), MLP per width (in, out) + (out,). Other layer types with
    weights are not read here (the test picks families without them)."""
    layers = json.loads(graph_json.read_text())["layers"]
    blob = np.fromfile(dense_file, dtype="<f4")
    dims: dict = {}
    at = 0
    out: dict[str, list[np.ndarray]] = {}

    def take(*shape: int) -> np.ndarray:
        nonlocal at
        n = int(np.prod(shape))
        part = blob[at:at + n].reshape(shape)
        at += n
        return part

    for layer in layers:
        t, bottom, top = layer["type"], layer.get("bottom"), layer.get("top")
        bottoms = bottom if isinstance(bottom, list) else [bottom]
        tops = top if isinstance(top, list) else [top]
        if t == "Data":
            dims[layer["dense"]["top"]] = layer["dense"]["dense_dim"]
            for s in layer["sparse"]:
                dims[s["top"]] = (s["slot_num"],)
        elif "Embedding" in t:
            dims[top] = (dims[bottom][0], layer["sparse_embedding_hparam"]["embedding_vec_size"])
        elif t == "Reshape":
            dims[top] = layer["leading_dim"]
        elif t == "Concat":
            dims[top] = sum(_width(dims, b) for b in bottoms)
        elif t == "Slice":
            for name, (a, b) in zip(tops, layer["ranges"]):
                dims[name] = b - a
        elif t in ("InnerProduct", "FusedInnerProduct"):
            n_in, n_out = _width(dims, bottoms[0]), layer["fc_param"]["num_output"]
            out[tops[0]] = [take(n_in, n_out), take(n_out)]
            for name in tops:
                dims[name] = n_out
        elif t == "MLP":
            width, arrays = _width(dims, bottoms[0]), []
            for n_out in layer["mlp_param"]["num_outputs"]:
                arrays += [take(width, n_out), take(n_out)]
                width = n_out
            out[tops[0]] = arrays
            for name in tops:
                dims[name] = width
        elif t == "MultiCross":
            width = _width(dims, bottoms[0])
            out[top] = [take(width) for _ in range(2 * layer["mc_param"]["num_layers"])]
            dims[top] = width
        elif t in ("BatchNorm", "LayerNorm"):
            width = _width(dims, bottoms[0])
            out[top] = [take(width), take(width)]
            dims[top] = width
        elif t == "WeightMultiply":
            d0, d1 = layer["weight_dims"]
            out[top] = [take(d0, d1)]
            dims[top] = d0 * d1
        elif t == "Interaction":
            slots, vec = dims[bottoms[1]]
            for name in tops:
                dims[name] = vec + (slots + 1) * slots // 2 + 1
        elif t in ("ReLU", "Dropout", "Sigmoid", "Add", "ElementwiseMultiply", "ReduceSum", "FmOrder2"):
            width = 1 if t == "ReduceSum" else layer["out_dim"] if t == "FmOrder2" else _width(dims, bottoms[0])
            for name in tops:
                dims[name] = width
        elif t == "BinaryCrossEntropyLoss":
            pass
        else:
            raise AssertionError(f"the reader does not know {t}")
    assert at == blob.size, (at, blob.size)
    return out


def read_table(folder: Path, vec: int) -> dict[int, np.ndarray]:
    """key -> vector of a sparse model folder (key int64, emb_vector float32 x vec, in the same order)."""
    keys = np.fromfile(folder / "key", dtype="<i8")
    vectors = np.fromfile(folder / "emb_vector", dtype="<f4").reshape(-1, vec)
    assert len(keys) == len(vectors)
    return dict(zip(keys.tolist(), vectors))
