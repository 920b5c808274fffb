"""The static parts of the generated etl.py (templates/etl/etl.py.j2): reading and splitting the raw files, the local
Dask cluster, saving the fitted workflow.

Included verbatim in the generated etl.py: the parts may use only what etl.py imports (argparse, contextlib, logging,
os, sys, time, warnings, pathlib.Path, numpy; nvtabular, pandas, dask, cudf, rmm and merlin inside functions), never
codegen.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

# The model's facts, which the template writes (stand-ins, never included).
TRAIN_FILES: list[str] = []
VALID_FILES: list[str] | None = None
INPUT_FORMAT = "csv"
CSV_SEP = ","
INPUT_DTYPES: dict[str, str] = {}
PART_SIZE = "128MB"
CLUSTER: dict[str, Any] = {}
SHUFFLE_SEED = 0
JOIN_FILE = "join.csv"
JOIN_FORMAT = "csv"
JOIN_SEP = ","
JOIN_DTYPES: dict[str, str] = {}
JOIN_MULTI_HOT: dict[str, str] = {}


def prepare(df, offsets=None, keep_valid=None, partition_info=None):
    """Stand-in: the template writes it (what a partition keeps depends on the model)."""
    return df


def import_nvtabular():
    """Stand-in: templates/_macros.j2 writes it."""


# ctrgen: part split_lists
# ---- reading and splitting ---------------------------------------------------------------------------------------

def split_lists(df, columns: dict):
    """Text "A|B" -> list ["A", "B"] for each multi-hot column (an empty text is an empty list)."""
    for col, sep in columns.items():
        df[col] = df[col].fillna("").str.split(sep).map(lambda items: [s for s in items if s])
    return df


# ctrgen: part join_table
def read_join_table(root: Path):
    import pandas as pd

    path = root / JOIN_FILE
    if JOIN_FORMAT == "csv":
        table = pd.read_csv(path, sep=JOIN_SEP, usecols=list(JOIN_DTYPES), dtype=JOIN_DTYPES)
    else:
        table = pd.read_parquet(path, columns=list(JOIN_DTYPES)).astype(JOIN_DTYPES)
    return split_lists(table, JOIN_MULTI_HOT)


# ctrgen: part uniform
def uniform(rows: np.ndarray, seed: int) -> np.ndarray:
    """A uniform number in [0, 1) per row number (splitmix64): the split depends on nothing but rows and seed."""
    with np.errstate(over="ignore"):
        z = rows.astype(np.uint64) + np.uint64(seed + 1) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)


# ctrgen: part read
def read_inputs(nvt, root: Path, gpu: bool):
    """(train, valid) nvt.Datasets and the number of raw rows read."""
    def dataset(files):
        paths = [str(root / f) for f in files]
        extra = {"sep": CSV_SEP, "dtype": {c: ("object" if t == "str" else t) for c, t in INPUT_DTYPES.items()}} \
            if INPUT_FORMAT == "csv" else {}
        return nvt.Dataset(paths, engine=INPUT_FORMAT, part_size=PART_SIZE, cpu=not gpu, **extra).to_ddf()

    train = dataset(TRAIN_FILES)
    lengths = train.map_partitions(len).compute().tolist()
    rows_in = sum(lengths)
    if VALID_FILES is None:
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64).tolist()
        meta = prepare(train._meta)
        valid = train.map_partitions(prepare, offsets, True, meta=meta)
        train = train.map_partitions(prepare, offsets, False, meta=meta)
    else:
        valid = dataset(VALID_FILES)
        rows_in += int(valid.map_partitions(len).compute().sum())
        valid = valid.map_partitions(prepare, meta=prepare(valid._meta))
        train = train.map_partitions(prepare, meta=prepare(train._meta))
    return nvt.Dataset(train, cpu=not gpu), nvt.Dataset(valid, cpu=not gpu), rows_in


def shuffle_partition(df, partition_info=None, split: int = 0):
    """Shuffle one partition's rows with a seed of its own (the same whichever worker runs it). Split 0 is the
    training rows, 1 the validation rows: a stream of its own, the training rows' seeds as without it."""
    key = [SHUFFLE_SEED, partition_info["number"]] + ([split] if split else [])
    rng = np.random.default_rng(key)
    return df.iloc[rng.permutation(len(df))]


# ctrgen: part cluster
# ---- the cluster -------------------------------------------------------------------------------------------------

def gpu_available() -> bool:
    """NVTabular's GPU path needs cudf, dask-cuda, rmm and a visible GPU."""
    try:
        import cudf  # noqa: F401
        import dask_cuda  # noqa: F401
        import rmm  # noqa: F401
        from numba import cuda

        return len(cuda.gpus) > 0
    except (ImportError, OSError, RuntimeError):  # a missing package or driver means: run on the CPU
        return False


def cluster_kwargs(workers: int, gpu: bool, root: Path) -> dict:
    """Keyword arguments of LocalCUDACluster (gpu) or LocalCluster for a cluster of ``workers`` local workers."""
    c = CLUSTER
    kwargs = {"n_workers": workers, "protocol": c["protocol"], "threads_per_worker": c["threads_per_worker"],
              "dashboard_address": None, "memory_limit": c["memory_limit"]}
    # The host memory's spill thresholds, as each worker's own arguments (None: Dask's config decides).
    for name in ("memory_target_fraction", "memory_spill_fraction"):
        if c[name] is not None:
            kwargs[name] = c[name]
    if c["local_directory"] is not None:
        kwargs["local_directory"] = str(Path(root).resolve() / c["local_directory"])   # relative to the spec
    if gpu:
        kwargs["device_memory_limit"] = c["device_memory_limit"]
        if c["devices"] is not None:
            kwargs["CUDA_VISIBLE_DEVICES"] = c["devices"]
        return kwargs
    if c["protocol"] == "ucx":
        raise SystemExit("etl.py: etl.cluster.protocol ucx needs GPU workers (dask-cuda, UCX-Py); this machine runs "
                         "the CPU branch: use protocol tcp")
    # One process per worker: pandas holds the GIL, so threads would not run in parallel. The workers import merlin,
    # which warns about the deep-learning frameworks it does not find, and log their preload (INFO): quiet.
    kwargs.update(processes=True, silence_logs=logging.ERROR, preload=[PRELOAD])
    return kwargs


def start_client(workers: int | None, scheduler: str | None, gpu: bool, root: Path = Path(".")):
    """None (one process, dask's synchronous scheduler), a local cluster, or a client of an existing one."""
    if scheduler is None and workers is None:
        return None
    from dask.distributed import Client

    if scheduler is not None:
        return Client(scheduler)
    kwargs = cluster_kwargs(workers, gpu, root)
    if gpu:
        import rmm
        from dask_cuda import LocalCUDACluster

        client = Client(LocalCUDACluster(**kwargs))
        if CLUSTER["rmm_pool"]:
            # An RMM pool on each GPU, so that cudf does not allocate per call (seed 001's _rmm_pool).
            client.run(rmm.reinitialize, pool_allocator=True)
        return client
    from dask.distributed import LocalCluster

    quiet = {"PYTHONWARNINGS": "ignore", "DASK_LOGGING__DISTRIBUTED": "error"}
    saved = {k: os.environ.get(k) for k in quiet}
    os.environ.update(quiet)   # read by each worker's interpreter as it starts
    try:
        return Client(LocalCluster(**kwargs))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# ctrgen: part save
# ---- the run -----------------------------------------------------------------------------------------------------

def save_workflow(workflow, path: Path) -> None:
    """Workflow.save writes no schema; output_schema.pbtxt and input_schema.pbtxt (the request columns) let ctrgen
    read the workflow without nvtabular."""
    from merlin.schema.io.tensorflow_metadata import TensorflowMetadata

    workflow.save(str(path))
    TensorflowMetadata.from_merlin_schema(workflow.output_schema).to_proto_text_file(str(path), "output_schema.pbtxt")
    TensorflowMetadata.from_merlin_schema(workflow.input_schema).to_proto_text_file(str(path), "input_schema.pbtxt")


# ctrgen: part preload
# Each local Dask worker imports this file as it starts (its preload: run() changes the working directory first).
PRELOAD = os.path.abspath(__file__)


def dask_setup(worker) -> None:
    """Run by each local Dask worker as it starts: nvtabular, imported as above, before the first task would import
    it with torch."""
    import_nvtabular()
