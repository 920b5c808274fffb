"""Presets expand to the graphs of HugeCTR's samples, with every dimension derived from the features.

Checked against what HugeCTR itself printed or wrote: the DCN JSON of hugectr.md §2.11, and the model.summary()
tables of NVIDIA's WDL and DCN notebooks (tests/facts/summaries.json)."""

from __future__ import annotations

import json

import pytest

from specfactory import criteo_lock, preset_spec, write_spec
from upstream import reference_dcn_json, summary_as_printed_without_log

from conftest import run_ctrgen


def run(tmp_path, spec, lock, *args):
    path = write_spec(tmp_path / "specs", spec, lock)
    return run_ctrgen(*args, str(path), *(["--out", str(tmp_path / "out")] if args[0] == "generate" else []))


def graph(tmp_path, spec, lock) -> dict:
    result = run(tmp_path, spec, lock, "generate")
    assert result.returncode == 0, result.stderr
    return json.loads((tmp_path / "out" / spec["name"] / f"{spec['name']}.json").read_text())


WDL_SPARSE = [{"name": "wide_data", "columns": ["W1", "W2"], "nnz_per_slot": 1, "is_fixed_length": True},
              {"name": "deep_data", "columns": [f"C{i}" for i in range(1, 27)], "nnz_per_slot": 2}]
WDL_EMB = [{"name": "sparse_embedding2", "input": "wide_data", "workspace_size_per_gpu_in_mb": 23,
            "embedding_vec_size": 1},
           {"name": "sparse_embedding1", "input": "deep_data", "workspace_size_per_gpu_in_mb": 358,
            "embedding_vec_size": 16}]


def test_wdl_summary_is_what_hugectr_printed(tmp_path):
    # triton-inference-server/hugectr_backend@v4.3 WDL training notebook, batch 2720 (HugeCTR 4.x layout).
    spec = preset_spec({"preset": "wdl", "wide": "sparse_embedding2", "deep": "sparse_embedding1"}, "4.3",
                       batch=2720, sparse=WDL_SPARSE, embeddings=WDL_EMB)
    result = run(tmp_path, spec, criteo_lock(wide=2), "summary")
    assert result.returncode == 0, result.stderr
    assert result.stdout == summary_as_printed_without_log("hugectr_backend_v4.3_wdl_summary.txt")


def test_dcn_summary_is_what_hugectr_printed(tmp_path):
    # NVIDIA-Merlin/HugeCTR@v4.3.1 hugectr_criteo notebook, DCN with auto-Slice rows, batch 4096.
    spec = preset_spec({"preset": "dcn", "cross_layers": 6}, "4.3", batch=4096)
    result = run(tmp_path, spec, criteo_lock(), "summary")
    assert result.returncode == 0, result.stderr
    assert result.stdout == summary_as_printed_without_log("hugectr_v4.3.1_criteo_dcn_wdl_summary.txt", "cell 8")


def test_dcn_preset_writes_the_reference_json(tmp_path):
    spec = preset_spec({"preset": "dcn"}, "23.06", gpus=(0, 1, 2, 3), data_format="norm")
    spec["name"] = "dcn"
    spec["optimizer"] = {"type": "Adam", "update_type": "Global", "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-7}
    spec["data"] = {"format": "norm", "train": ["./file_list.txt"], "eval": "./file_list_test.txt"}
    path = write_spec(tmp_path / "specs", spec, criteo_lock())
    assert run_ctrgen("generate", str(path), "--out", str(tmp_path / "out")).returncode == 0
    assert (tmp_path / "out" / "dcn" / "dcn.json").read_text() == reference_dcn_json()


def test_dcn_v2_projection_dim_is_not_written_and_needs_4_3(tmp_path):
    spec = preset_spec({"preset": "dcn", "projection_dim": 64}, "23.06")
    doc = graph(tmp_path / "new", spec, criteo_lock())
    mc = next(layer for layer in doc["layers"] if layer["type"] == "MultiCross")
    assert mc["mc_param"] == {"num_layers": 6}
    model_py = (tmp_path / "new" / "out" / "dcn" / "model.py").read_text()
    assert "projection_dim=64" in model_py
    old = run(tmp_path / "old", preset_spec({"preset": "dcn", "projection_dim": 64}, "3.3"), criteo_lock(), "generate")
    assert old.returncode == 2 and "DCNv2 (projection_dim) is not in HugeCTR 3.3" in old.stderr


def test_changing_vec_size_and_feature_count_needs_no_other_edit(tmp_path):
    spec = preset_spec({"preset": "dcn"}, "23.06", vec=32)
    doc = graph(tmp_path, spec, criteo_lock(slots=20, dense=5))
    by_top = {layer["top"] if isinstance(layer["top"], str) else layer["top"][0]: layer for layer in doc["layers"][1:]}
    assert by_top["reshape1"]["leading_dim"] == 20 * 32
    assert by_top["concat1_slice0"]["ranges"] == [[0, 645], [0, 645]]
    assert doc["layers"][0]["dense"]["dense_dim"] == 5


def test_deepfm_matches_the_sample_dimensions(tmp_path):
    # NVIDIA-Merlin/HugeCTR samples/deepfm/deepfm.py: vec 11 over 26 slots and 13 dense (hugectr.md §3).
    spec = preset_spec({"preset": "deepfm"}, "23.06", vec=11)
    doc = graph(tmp_path, spec, criteo_lock())
    layers = {layer["top"] if isinstance(layer["top"], str) else tuple(layer["top"]): layer for layer in doc["layers"][2:]}
    assert layers["reshape1"]["leading_dim"] == 11
    assert layers[("slice11", "slice12")]["ranges"] == [[0, 10], [10, 11]]
    assert layers["reshape2"]["leading_dim"] == 260 and layers["reshape3"]["leading_dim"] == 26
    assert layers["weight_multiply1"]["weight_dims"] == [13, 10]
    assert layers["weight_multiply2"]["weight_dims"] == [13, 1]
    assert layers[("concat1_slice0", "concat1_slice1")]["ranges"] == [[0, 390], [0, 390]]
    assert layers[("dense_slice0", "dense_slice1")]["ranges"] == [[0, 13], [0, 13]]
    assert [layers[f"fc{i}"]["fc_param"]["num_output"] for i in (1, 2, 3, 4)] == [400, 400, 400, 1]
    assert layers["fmorder2"]["out_dim"] == 10
    assert layers["add"]["bottom"] == ["fc4", "reducesum1", "reducesum2"]


def test_deepfm_on_3_2_writes_its_slices_explicitly(tmp_path):
    spec = preset_spec({"preset": "deepfm"}, "3.2", vec=11)
    doc = graph(tmp_path, spec, criteo_lock())
    slices = [layer for layer in doc["layers"] if layer["type"] == "Slice"]
    assert [s["top"] for s in slices] == [["slice11", "slice12"], ["slice21", "slice22"], ["slice31", "slice32"]]


def test_dlrm_interaction_width_and_check(tmp_path):
    spec = preset_spec({"preset": "dlrm"}, "23.06", vec=128)
    doc = graph(tmp_path / "ok", spec, criteo_lock())
    fc4 = next(layer for layer in doc["layers"] if layer.get("top") == "fc4")
    assert fc4["bottom"] == "interaction1"
    summary = run(tmp_path / "ok", spec, criteo_lock(), "summary").stdout
    assert "interaction1                  (16384,480)" in summary  # 128 + 26*27/2 + 1
    bad = run(tmp_path / "bad", preset_spec({"preset": "dlrm"}, "23.06", vec=64), criteo_lock(), "generate")
    assert bad.returncode == 2
    assert "model.bottom_units: the bottom MLP ends at width 128 but embedding_vec_size is 64" in bad.stderr


@pytest.mark.parametrize("version", ["3.2", "3.3", "4.3", "23.06"])
@pytest.mark.parametrize("preset", ["mlp", "wdl", "dcn", "dlrm", "deepfm"])
def test_every_preset_builds_on_every_release(tmp_path, preset, version):
    kwargs = {"vec": 11 if preset == "deepfm" else 128 if preset == "dlrm" else 16}
    model = {"preset": preset}
    lock = criteo_lock()
    if preset == "wdl":
        model.update(wide="sparse_embedding2", deep="sparse_embedding1")
        kwargs.update(sparse=WDL_SPARSE, embeddings=WDL_EMB)
        lock = criteo_lock(wide=2)
    result = run(tmp_path, preset_spec(model, version, **kwargs), lock, "generate")
    assert result.returncode == 0, result.stderr
