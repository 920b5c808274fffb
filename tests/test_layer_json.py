"""Each DenseLayer type's JSON keys (hugectr.md §2.6) and shape rule (§3), and the writer's version differences
(§2.9), through explicit `layers:` graphs on a Criteo-shaped table (26 slots x vec 16, 13 dense)."""

from __future__ import annotations

import json

import pytest

from conftest import run_ctrgen
from specfactory import criteo_lock, preset_spec, write_spec

R = "reshape1"   # (B, 416)
D = "dense"      # (B, 13)

# (layer under test, release, expected JSON object minus type/bottom/top, expected summary shape of its output)
CASES = {
    "BatchNorm": ({"bottom": R, "factor": 0.9, "eps": 1e-5, "gamma_init_type": "XavierUniform"}, "23.06",
                  {"bn_param": {"eps": 9.999999747378752e-06, "factor": 0.8999999761581421,
                                "gamma_init": "XavierUniform"}}, "(B, 416)"),
    "LayerNorm": ({"bottom": R}, "23.06", {"ln_param": {"eps": 9.999999747378752e-06}}, "(B, 416)"),
    "Dropout": ({"bottom": R, "dropout_rate": 0.1}, "3.3", {"rate": 0.10000000149011612}, "(B, 416)"),
    "ELU": ({"bottom": R, "elu_alpha": 1.0}, "3.3", {"elu_param": {"alpha": 1.0}}, "(B, 416)"),
    "InnerProduct": ({"bottom": R, "num_output": 7, "weight_init_type": "XavierNorm", "bias_init_type": "Zero"},
                     "3.3", {"fc_param": {"num_output": 7, "weight_init": "XavierNorm", "bias_init": "Zero"}},
                     "(B, 7)"),
    "MultiCross": ({"bottom": R, "num_layers": 3}, "3.3", {"mc_param": {"num_layers": 3}}, "(B, 416)"),
    "Concat": ({"bottom": [R, D]}, "23.06", {"axis": 1}, "(B, 429)"),
    "Slice": ({"bottom": R, "ranges": [[0, 100], [100, 416]], "top": ["s1", "s2"]}, "3.3",
              {"ranges": [[0, 100], [100, 416]]}, "(B, 100)"),
    "WeightMultiply": ({"bottom": D, "weight_dims": [13, 4]}, "3.3", {"weight_dims": [13, 4]}, "(B, 52)"),
    "FmOrder2": ({"bottom": R, "out_dim": 16}, "3.3", {"out_dim": 16}, "(B, 16)"),
    "ReduceSum": ({"bottom": R, "axis": 1}, "3.3", {"axis": 1}, "(B, 1)"),
    "ReduceMean": ({"bottom": R, "axis": 1}, "3.3", {"axis": 1}, "(B, 1)"),
    "Softmax": ({"bottom": R, "factor": 1.0}, "23.06", {"factor": 1.0}, "(B, 416)"),
    "PReLU_Dice": ({"bottom": R, "elu_alpha": 0.5, "eps": 1e-5}, "3.3",
                   {"prelu_dice_param": {"alpha": 0.5, "eps": 9.999999747378752e-06}}, "(B, 416)"),
    "MLP": ({"bottom": R, "num_outputs": [64, 32], "num_output": 32, "act_type": "Relu"}, "23.06",
            {"mlp_param": {"activation": "Relu", "num_output": 32, "num_outputs": [64, 32], "use_bias": True}},
            "(B, 32)"),
    "ReLU": ({"bottom": R}, "3.3", {}, "(B, 416)"),
    "Sigmoid": ({"bottom": R}, "3.3", {}, "(B, 416)"),
    "Add": ({"bottom": [R, "r2"]}, "3.3", {}, "(B, 416)"),
    "ElementwiseMultiply": ({"bottom": [R, "r2"]}, "3.3", {}, "(B, 416)"),
    "Interaction": ({"bottom": ["bot", "sparse_embedding1"]}, "3.3", {}, "(B, 368)"),  # 16 + 26*27/2 + 1
}


def spec_for(layer_type: str, layer: dict, version: str) -> dict:
    top = layer.pop("top", "t1")
    layers = [{"type": "Reshape", "bottom": "sparse_embedding1", "top": R, "leading_dim": 416},
              {"type": "Reshape", "bottom": "sparse_embedding1", "top": "r2", "leading_dim": 416},
              {"type": "InnerProduct", "bottom": D, "top": "bot", "num_output": 16},
              {"type": layer_type, "top": top, **layer}]
    first = top if isinstance(top, str) else top[0]
    layers += [{"type": "InnerProduct", "bottom": first, "top": "out", "num_output": 1},
               {"type": "BinaryCrossEntropyLoss", "bottom": ["out", "label"], "top": "loss"}]
    spec = preset_spec({"preset": "layers", "layers": layers}, version)
    spec["name"] = "layers"
    return spec


@pytest.mark.parametrize("layer_type", sorted(CASES))
def test_layer_json_keys_and_shape(tmp_path, layer_type):
    layer, version, extra, shape = CASES[layer_type]
    spec = spec_for(layer_type, dict(layer), version)
    path = write_spec(tmp_path / "specs", spec, criteo_lock())
    result = run_ctrgen("generate", str(path), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    doc = json.loads((tmp_path / "out" / "layers" / "layers.json").read_text())
    ours = next(x for x in doc["layers"] if x.get("top") in ("t1", ["s1", "s2"]))
    assert {k: v for k, v in ours.items() if k not in ("type", "bottom", "top")} == extra
    graph = run_ctrgen("graph", str(path))
    assert f"{layer_type}<br/>{shape}" in graph.stdout


@pytest.mark.parametrize("layer,message", [
    ({"type": "Concat", "bottom": ["sparse_embedding1", D]}, "Only 2D tensors can be concatenated"),
    ({"type": "Slice", "bottom": R, "ranges": [[0, 500]], "top": ["s"]}, "Ranges cannot be bigger than the input width"),
    ({"type": "Slice", "bottom": R, "ranges": [[10, 5]], "top": ["s"]}, "Reverse range is not allowed"),
    ({"type": "Interaction", "bottom": [D, "sparse_embedding1"]}, "the input tensors' widths must be the same"),
    ({"type": "Add", "bottom": [R, D]}, "All the input tensors must have the same dims"),
    ({"type": "WeightMultiply", "bottom": D, "weight_dims": [12, 4]}, "weight_dims[0] must be equal to in_dims[1]"),
    ({"type": "FmOrder2", "bottom": R, "out_dim": 15}, "(in_dims[1] % out_dims[1]) != 0"),
    ({"type": "ReduceSum", "bottom": R, "axis": 2}, "The axis is overflow"),
    ({"type": "Bogus", "bottom": R}, "layer type 'Bogus' does not exist in any HugeCTR release"),
    ({"type": "InnerProduct", "bottom": R, "num_ouput": 3}, "DenseLayer argument 'num_ouput' does not exist"),
])
def test_layer_checks_name_the_layer_and_its_inputs(tmp_path, layer, message):
    layer = dict(layer)
    spec = spec_for(layer.pop("type"), layer, "23.06")
    path = write_spec(tmp_path / "specs", spec, criteo_lock())
    result = run_ctrgen("generate", str(path), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert message in result.stderr, result.stderr
    assert "model.layers[3]" in result.stderr and "Traceback" not in result.stderr


def test_six_way_branch_is_refused(tmp_path):
    layers = [{"type": "Reshape", "bottom": "sparse_embedding1", "top": R, "leading_dim": 416}]
    layers += [{"type": "ReLU", "bottom": R, "top": f"r{i}"} for i in range(6)]
    layers += [{"type": "Concat", "bottom": [f"r{i}" for i in range(6)], "top": "c"},
               {"type": "InnerProduct", "bottom": "c", "top": "out", "num_output": 1},
               {"type": "BinaryCrossEntropyLoss", "bottom": ["out", "label"], "top": "loss"}]
    spec = preset_spec({"preset": "layers", "layers": layers}, "23.06")
    path = write_spec(tmp_path / "specs", spec, criteo_lock())
    result = run_ctrgen("generate", str(path), "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and "The graph should not include more than 5-way branches" in result.stderr


@pytest.mark.parametrize("version,axis,sparse_type,vocab,slice_names", [
    ("3.2", False, True, 1130496, None),
    ("3.3", False, True, 1130496, ["concat1_slice0", "concat1_slice1"]),
    ("4.3", True, True, 376832, ["concat1_slice0", "concat1_slice1"]),
    ("23.06", True, True, 376832, ["concat1_slice0", "concat1_slice1"]),
])
def test_writer_differences_by_release(tmp_path, version, axis, sparse_type, vocab, slice_names):
    doc_path = tmp_path / "out" / "dcn" / "dcn.json"
    spec = preset_spec({"preset": "dcn"}, version, batch=4096)
    path = write_spec(tmp_path / "specs", spec, criteo_lock())
    assert run_ctrgen("generate", str(path), "--out", str(tmp_path / "out")).returncode == 0
    doc = json.loads(doc_path.read_text())
    concat = next(x for x in doc["layers"] if x["type"] == "Concat")
    assert ("axis" in concat) is axis
    assert ("type" in doc["layers"][0]["sparse"][0]) is sparse_type
    assert doc["layers"][1]["sparse_embedding_hparam"]["max_vocabulary_size_global"] == vocab
    slices = [x["top"] for x in doc["layers"] if x["type"] == "Slice"]
    assert slices == ([slice_names] if slice_names else [["slice11", "slice12"]])


def test_mixed_precision_rules(tmp_path):
    spec = preset_spec({"preset": "dcn"}, "3.3", mixed_precision=True)
    spec["solver"]["scaler"] = 100
    path = write_spec(tmp_path / "a", spec, criteo_lock())
    result = run_ctrgen("generate", str(path), "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and "scaler of 128/256/512/1024" in result.stderr
    spec = preset_spec({"preset": "layers", "layers": [
        {"type": "Reshape", "bottom": "sparse_embedding1", "top": R, "leading_dim": 416},
        {"type": "ReduceMean", "bottom": R, "top": "m", "axis": 1},
        {"type": "BinaryCrossEntropyLoss", "bottom": ["m", "label"], "top": "loss"}]}, "23.06", mixed_precision=True)
    path = write_spec(tmp_path / "b", spec, criteo_lock())
    result = run_ctrgen("generate", str(path), "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and "Mixed precision not supported for: ReduceMean" in result.stderr


def test_multi_node_vvgpu_counts_every_gpu(tmp_path):
    spec = preset_spec({"preset": "dcn"}, "23.06", batch=16384)
    spec["solver"]["vvgpu"] = [[0, 1, 2, 3], [0, 1, 2, 3]]
    path = write_spec(tmp_path / "specs", spec, criteo_lock())
    assert run_ctrgen("generate", str(path), "--out", str(tmp_path / "out")).returncode == 0
    doc = json.loads((tmp_path / "out" / "dcn" / "dcn.json").read_text())
    assert doc["layers"][1]["sparse_embedding_hparam"]["max_vocabulary_size_global"] == 376832 * 8
    summary = (tmp_path / "out" / "dcn" / "summary.txt").read_text()
    assert "(2048,416)" in summary  # per-GPU batch: 16384 / 8
    spec["solver"]["batchsize"] = 16380
    path = write_spec(tmp_path / "specs2", spec, criteo_lock())
    bad = run_ctrgen("generate", str(path), "--out", str(tmp_path / "out2"))
    assert bad.returncode == 2 and "not divisible by the 8 GPUs" in bad.stderr
