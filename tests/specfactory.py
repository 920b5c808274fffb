"""Build specs and features locks in a temporary folder for tests (the committed specs live in specs/)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml  # PyYAML is pinned (NVTabular needs it); used here only to write test specs

CRITEO_LOCK = {
    "ctrgen_features_lock": 1,
    "source": "recorded",
    "provenance": "Criteo-shaped test table",
    "categorical": [{"name": f"C{i}", "dtype": "int64", "cardinality": 1000 + i} for i in range(1, 27)],
    "continuous": [{"name": f"I{i}", "dtype": "float32"} for i in range(1, 14)],
    "labels": [{"name": "label", "dtype": "float32"}],
}

MOVIELENS_LOCK = {
    "ctrgen_features_lock": 1,
    "source": "recorded",
    "provenance": "test",
    "categorical": [{"name": "userId", "dtype": "int64", "cardinality": 162542},
                    {"name": "movieId", "dtype": "int64", "cardinality": 56586}],
    "continuous": [],
    "labels": [{"name": "rating", "dtype": "float32"}],
}


def write_spec(folder: Path, spec: dict | str, lock: dict | None = None, name: str = "spec") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(spec if isinstance(spec, str) else yaml.safe_dump(spec, sort_keys=False))
    if lock is not None:
        (folder / f"{name}.features.lock.json").write_text(json.dumps(lock, indent=2))
    return path


def dcn_spec(version: str, gpus: list[int] | None = None) -> dict:
    """The model of NVIDIA-Merlin/HugeCTR samples/dcn/dcn.py as described in hugectr.md §2.11, as explicit layers."""
    return {
        "version": 1, "name": "dcn", "hugectr_version": version,
        "data": {"format": "norm", "train": ["./file_list.txt"], "eval": "./file_list_test.txt"},
        "solver": {"vvgpu": [gpus or [0, 1, 2, 3]], "batchsize": 16384, "batchsize_eval": 16384,
                   "max_eval_batches": 300},
        "optimizer": {"type": "Adam", "update_type": "Global", "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-7},
        "input": {"sparse": [{"name": "data1", "nnz_per_slot": 2, "is_fixed_length": False}]},
        "embeddings": [{"name": "sparse_embedding1", "input": "data1",
                        "embedding_type": "DistributedSlotSparseEmbeddingHash",
                        "workspace_size_per_gpu_in_mb": 69, "embedding_vec_size": 16, "combiner": "sum"}],
        "model": {"preset": "layers", "layers": [
            {"type": "Reshape", "bottom": "sparse_embedding1", "top": "reshape1", "leading_dim": 416},
            {"type": "Concat", "bottom": ["reshape1", "dense"], "top": "concat1"},
            {"type": "MultiCross", "bottom": "concat1", "top": "multicross1", "num_layers": 6},
            {"type": "InnerProduct", "bottom": "concat1", "top": "fc1", "num_output": 1024},
            {"type": "ReLU", "bottom": "fc1", "top": "relu1"},
            {"type": "Dropout", "bottom": "relu1", "top": "dropout1", "dropout_rate": 0.5},
            {"type": "InnerProduct", "bottom": "dropout1", "top": "fc2", "num_output": 1024},
            {"type": "ReLU", "bottom": "fc2", "top": "relu2"},
            {"type": "Dropout", "bottom": "relu2", "top": "dropout2", "dropout_rate": 0.5},
            {"type": "Concat", "bottom": ["dropout2", "multicross1"], "top": "concat2"},
            {"type": "InnerProduct", "bottom": "concat2", "top": "fc3", "num_output": 1},
            {"type": "BinaryCrossEntropyLoss", "bottom": ["fc3", "label"], "top": "loss"},
        ]},
        "training": {"max_iter": 1500, "display": 1000, "eval_interval": 100, "snapshot": 1000000},
    }


def criteo_lock(wide: int = 0, slots: int = 26, dense: int = 13) -> dict:
    """A Criteo-shaped table: `wide` crossed columns first (slot order), then C1..C<slots>, I1..I<dense>."""
    cats = [{"name": f"W{i}", "dtype": "int64", "cardinality": 5000 + i} for i in range(1, wide + 1)]
    cats += [{"name": f"C{i}", "dtype": "int64", "cardinality": 1000 + i} for i in range(1, slots + 1)]
    return {"ctrgen_features_lock": 1, "source": "recorded", "provenance": "test", "categorical": cats,
            "continuous": [{"name": f"I{i}", "dtype": "float32"} for i in range(1, dense + 1)],
            "labels": [{"name": "label", "dtype": "float32"}]}


def preset_spec(preset: dict, version: str = "23.06", *, vec: int = 16, batch: int = 16384, gpus=(0,),
                sparse=None, embeddings=None, data_format: str = "parquet", mixed_precision: bool = False) -> dict:
    return {
        "version": 1, "name": preset["preset"], "hugectr_version": version,
        "data": {"format": data_format, "train": ["/data/train/_file_list.txt"], "eval": "/data/valid/_file_list.txt"},
        "solver": {"vvgpu": [list(gpus)], "batchsize": batch, "batchsize_eval": batch,
                   "use_mixed_precision": mixed_precision, **({"scaler": 1024} if mixed_precision else {})},
        "input": {"sparse": sparse or [{"name": "data1", "nnz_per_slot": 2}]},
        "embeddings": embeddings or [{"name": "sparse_embedding1", "input": "data1",
                                      "workspace_size_per_gpu_in_mb": 69, "embedding_vec_size": vec}],
        "model": preset,
    }
