"""The spec's etl.cluster section (seed 001's LocalCUDACluster settings) reaches the cluster etl.py starts:
LocalCUDACluster's own signature for the GPU branch (no GPU here), and the refusals. The real local Dask cluster of
the CPU branch, with the spec's settings, is tested in test_etl.py (its run of etl.py on two workers)."""

from __future__ import annotations

import inspect
import runpy
from pathlib import Path

import pytest

from conftest import run_ctrgen
from specfactory import write_spec

pytestmark = pytest.mark.slow   # dask-cuda's import: seconds (make test-fast leaves them out)

MODEL = {"version": 1, "name": "clustered", "hugectr_version": "23.06",
         "data": {"format": "parquet", "train": ["/data/train/_file_list.txt"], "eval": "/data/valid/_file_list.txt"},
         "model": {"preset": "mlp", "units": [8]}}
ETL = {"inputs": {"train": ["raw/train.parquet"], "columns": {"C1": "str", "y": "int64"}},
       "groups": [{"columns": ["C1"], "ops": ["Categorify"]},
                  {"columns": ["y"], "ops": [{"LambdaOp": {"compare": ">=", "value": 1, "dtype": "int8"}}]}],
       "output": {"dir": "out"}}
LOCK = {"ctrgen_features_lock": 1, "source": "recorded", "provenance": "test",
        "categorical": [{"name": "C1", "dtype": "int64", "cardinality": 10}], "continuous": [],
        "labels": [{"name": "y", "dtype": "int8"}]}


def _etl_module(tmp_path: Path, cluster: dict) -> dict:
    """The generated etl.py of a spec with this etl.cluster, loaded as ctrgen etl loads it."""
    from codegen.etl.run import etl_plan, render_for
    from codegen.pipeline import open_spec

    spec = write_spec(tmp_path / "specs", {**MODEL, "etl": {**ETL, "cluster": cluster}}, LOCK, name="clustered")
    ctx = open_spec(spec)
    script = tmp_path / "etl.py"
    script.write_text(render_for(ctx, etl_plan(ctx)))
    return runpy.run_path(str(script), run_name="ctrgen_etl")


def test_gpu_cluster_arguments_are_local_cuda_clusters(tmp_path):
    """Seed 001: protocol, visible devices, the spill fraction and the workers' directory, as LocalCUDACluster's own
    keyword arguments (bound to its signature: a renamed argument fails here)."""
    from dask_cuda import LocalCUDACluster

    etl = _etl_module(tmp_path, {"protocol": "ucx", "devices": [0, 1], "device_memory_limit": 0.5,
                                 "local_directory": "work"})
    kwargs = etl["cluster_kwargs"](2, True, tmp_path / "specs")
    assert kwargs == {"n_workers": 2, "protocol": "ucx", "threads_per_worker": 1, "dashboard_address": None,
                      "memory_limit": "auto", "local_directory": str((tmp_path / "specs" / "work").resolve()),
                      "device_memory_limit": 0.5, "CUDA_VISIBLE_DEVICES": "0,1"}
    inspect.signature(LocalCUDACluster).bind(**kwargs)
    # Every named argument is one of LocalCUDACluster's own (its **kwargs would take a misspelt one silently).
    assert set(kwargs) - {"dashboard_address", "protocol"} <= set(inspect.signature(LocalCUDACluster).parameters)
    with pytest.raises(SystemExit, match="protocol ucx needs GPU workers"):
        etl["cluster_kwargs"](2, False, tmp_path / "specs")


def test_cluster_problems_name_the_field(tmp_path):
    spec = write_spec(tmp_path / "a", {**MODEL, "etl": {**ETL, "cluster": {"workers": 3, "devices": [0, 1]}}}, LOCK,
                      name="clustered")
    proc = run_ctrgen("etl", str(spec), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "etl.cluster" in proc.stderr and "one worker per GPU" in proc.stderr
    spec = write_spec(tmp_path / "b", {**MODEL, "etl": {**ETL, "cluster": {"devices": [0, 1]}}}, LOCK,
                      name="clustered")
    proc = run_ctrgen("etl", str(spec), "--workers", "3", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--workers: 3 workers, but the spec's etl.cluster.devices names 2 GPUs" in proc.stderr


def test_host_memory_limits_reach_both_clusters_workers(tmp_path):
    """LocalCluster (CPU) and LocalCUDACluster get each worker's host memory and its spill shares from etl.cluster,
    as the workers' own memory-manager arguments (a misspelt one would be silently dropped by **kwargs)."""
    from distributed.worker_memory import WorkerMemoryManager

    etl = _etl_module(tmp_path, {"workers": 2, "memory_limit": "2GiB", "memory_target_fraction": 0.4,
                                 "memory_spill_fraction": 0.5})
    manager = set(inspect.signature(WorkerMemoryManager).parameters)
    for gpu in (False, True):
        kwargs = etl["cluster_kwargs"](2, gpu, tmp_path / "specs")
        memory = {k: v for k, v in kwargs.items() if k.startswith("memory_")}
        assert memory == {"memory_limit": "2GiB", "memory_target_fraction": 0.4, "memory_spill_fraction": 0.5}
        assert set(memory) <= manager
    unset = _etl_module(tmp_path / "unset", {"workers": 2})["cluster_kwargs"](2, False, tmp_path)
    assert unset["memory_limit"] == "auto" and "memory_spill_fraction" not in unset   # Dask's config decides


@pytest.mark.parametrize("cluster,field", [({"memory_limit": "16 GB"}, "etl.cluster.memory_limit"),
                                           ({"memory_spill_fraction": 1.5}, "etl.cluster.memory_spill_fraction"),
                                           ({"spill_limit": 0.5}, "etl.cluster.spill_limit")])
def test_unknown_memory_settings_are_refused_with_their_line(tmp_path, cluster, field):
    """A size Dask would read differently (or not at all), a share over 1 and a setting etl.cluster does not know
    are one line each, naming the spec's line and field."""
    from codegen.errors import UserError
    from codegen.etl.run import etl_plan
    from codegen.pipeline import open_spec

    spec = write_spec(tmp_path, {**MODEL, "etl": {**ETL, "cluster": cluster}}, LOCK, name="clustered")
    with pytest.raises(UserError) as err:
        etl_plan(open_spec(spec))
    text = err.value.format()
    assert len(text.splitlines()) == 1 and field in text, text
    line = next(i for i, s in enumerate(spec.read_text().splitlines(), 1) if list(cluster)[0] in s)
    assert f"clustered.yaml:{line}:" in text, text
