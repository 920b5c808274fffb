"""Shape rules of the layers NVIDIA's DIN, BST and MMoE samples use, on both sides of each boundary.

Every case is an explicit `layers:` graph on a Criteo-shaped table: `hist` and `cate` are 5-slot inputs with
8-wide embeddings (B, 5, 8), `user` one slot of width 4 (B, 1, 4), `dense` (B, 13). A valid case must give the
shapes HugeCTR builds (codegen/graph/shapes.py cites the upstream files); an invalid one must fail with HugeCTR's
own text. The stand-in (tests/standin/hugectr/_shapes.py, written separately) must agree: it runs the generated
model.py and prints the same summary and JSON, and the same script with the one argument changed to its invalid value
fails there with the same text.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from codegen.errors import UserError
from codegen.lock import load_features
from codegen.model.build import build_job
from codegen.pipeline import open_spec, render_spec
from hugectr_run import run_with_standin, summary_block
from specfactory import criteo_lock, write_spec

BATCH = 64


def _spec(layers: list[dict], version: str, mixed: bool = False) -> dict:
    tail = [{"type": "InnerProduct", "bottom": "dense", "top": "tail_fc", "num_output": 1},
            {"type": "BinaryCrossEntropyLoss", "bottom": ["tail_fc", "label"], "top": "loss"}]
    return {
        "version": 1, "name": "shapes", "hugectr_version": version,
        "data": {"format": "parquet", "train": ["/data/train/_file_list.txt"], "eval": "/data/valid/_file_list.txt"},
        "solver": {"vvgpu": [[0]], "batchsize": BATCH, "batchsize_eval": BATCH, "use_mixed_precision": mixed,
                   **({"scaler": 1024} if mixed else {})},
        "input": {"sparse": [{"name": "hist", "columns": [f"C{i}" for i in range(1, 6)], "nnz_per_slot": 1},
                             {"name": "cate", "columns": [f"C{i}" for i in range(6, 11)], "nnz_per_slot": 1},
                             {"name": "user", "columns": ["C11"], "nnz_per_slot": 1}]},
        "embeddings": [{"name": "hist_emb", "input": "hist", "workspace_size_per_gpu_in_mb": 8, "embedding_vec_size": 8},
                       {"name": "cate_emb", "input": "cate", "workspace_size_per_gpu_in_mb": 8, "embedding_vec_size": 8},
                       {"name": "user_emb", "input": "user", "workspace_size_per_gpu_in_mb": 8, "embedding_vec_size": 4}],
        "model": {"preset": "layers", "layers": layers + tail},
        "training": {"max_iter": 10, "display": 5, "eval_interval": 5},
    }


def _path(tmp_path: Path, layers, version, mixed=False) -> Path:
    return write_spec(tmp_path / "specs", _spec(layers, version, mixed), criteo_lock(slots=11), name="shapes")


def _build(tmp_path: Path, layers: list[dict], version: str, mixed: bool = False):
    ctx = open_spec(_path(tmp_path, layers, version, mixed))
    features, _ = load_features(ctx, check_stale=False)
    return build_job(ctx, features)


def _shapes(job) -> dict[str, str]:
    """top name -> shape as the 4.x summary prints it on one GPU, e.g. '(256,16)'."""
    out = {}
    for layer in job.graph.layers:
        for top, s in zip(layer.tops, layer.out_shapes):
            out[top] = "(" + ",".join([str(int(BATCH * s.rows)), *map(str, s.dims)]) + ")"
    return out


FRC = {"type": "FusedReshapeConcat", "bottom": ["hist_emb", "cate_emb"], "top": ["his", "item"]}
QKV = [{"type": "InnerProduct", "bottom": "hist_emb", "top": t, "num_output": 8} for t in ("q", "k", "v")]
MHA3 = {"type": "MultiHeadAttention", "bottom": ["q", "k", "v"], "top": ["score", "value4d"],
        "num_attention_heads": 2, "transpose_b": True}

# name: (release, layers, {top: shape}, (layer index, argument, invalid value, HugeCTR's text) or None)
VALID = {
    "fused_reshape_concat": ("23.06", [FRC], {"his": "(256,16)", "item": "(64,16)"},
                             (0, "bottom", ["hist_emb", "user_emb"], "All the input tensors must have the same slot_num")),
    "scale_rows_then_sub": ("23.06", [FRC, {"type": "Scale", "bottom": "item", "top": "item4", "axis": 1, "factor": 4},
                                      {"type": "Sub", "bottom": ["item4", "his"], "top": "diff"}],
                            {"item4": "(256,16)", "diff": "(256,16)"},
                            (1, "factor", 5, "All the input tensors must have the same dims")),
    "scale_width_then_multiply": ("4.3", [{"type": "Slice", "bottom": "dense", "top": ["g", "w"],
                                           "ranges": [[0, 1], [1, 13]]},
                                          {"type": "Scale", "bottom": "g", "top": "g12", "axis": 0, "factor": 12},
                                          {"type": "ElementwiseMultiply", "bottom": ["w", "g12"], "top": "gated"}],
                                  {"g12": "(64,12)", "gated": "(64,12)"},
                                  (1, "factor", 11, "All the input tensors must have the same dims")),
    "reshape_history_rows": ("3.3", [FRC, {"type": "Reshape", "bottom": "his", "top": "flat", "leading_dim": 64}],
                             {"flat": "(64,64)"}, (1, "leading_dim", 48, "n_in_elems % leading_dim != 0")),
    "attention_3d": ("23.06", [*QKV, MHA3], {"score": "(64,2,5,5)", "value4d": "(64,2,5,4)"},
                     (3, "bottom", ["q", "k"], "MultiHeadAttentionLayer needs 3 input tensors: query, key and value")),
    "attention_4d": ("4.3", [*QKV, MHA3, {"type": "MultiHeadAttention", "bottom": ["score", "value4d"],
                                          "top": "attended"}],
                     {"attended": "(64,5,8)"},
                     (4, "bottom", ["score", "q"], "All the input tensors must have the same num of dims")),
    "masked_softmax": ("23.06", [*QKV, MHA3, {"type": "SequenceMask", "bottom": "dense", "top": "mask",
                                              "max_sequence_len": 5},
                                 {"type": "Softmax", "bottom": ["score", "mask"], "top": "probs"}],
                       {"mask": "(64,1,1,5)", "probs": "(64,2,5,5)"},
                       (4, "max_sequence_len", 4, "The last dimension of the input tensors should be the same")),
    "matrix_multiply_3d": ("23.06", [FRC, {"type": "Reshape", "bottom": "his", "top": "his3", "leading_dim": 16,
                                           "time_step": 4},
                                     {"type": "InnerProduct", "bottom": "item", "top": "att", "num_output": 4},
                                     {"type": "Reshape", "bottom": "att", "top": "att3", "leading_dim": 4,
                                      "time_step": 1},
                                     {"type": "MatrixMultiply", "bottom": ["att3", "his3"], "top": "pooled"}],
                           {"his3": "(64,4,16)", "att3": "(64,1,4)", "pooled": "(64,1,16)"},
                           (3, "leading_dim", 2, "The last two dimension of the input tensors should be m x n, n x k")),
}


# 23.09 and later: one MultiHeadAttention does the whole attention of 3D Q, K, V (and an optional 4D mask), one top.
MASK_23_09 = {"type": "SequenceMask", "bottom": ["dense", "dense"], "top": "mask", "max_sequence_len_from": 5,
              "max_sequence_len_to": 5}
MHA_23_09 = {"type": "MultiHeadAttention", "bottom": ["q", "k", "v", "mask"], "top": "attended",
             "num_attention_heads": 2}


@pytest.mark.parametrize("version", ["23.09", "25.03"])
@pytest.mark.parametrize("bottom", [["q", "k", "v", "mask"], ["q", "k", "v"]])
def test_attention_of_23_09_is_one_layer(tmp_path, version, bottom):
    got = _shapes(_build(tmp_path, [*QKV, MASK_23_09, {**MHA_23_09, "bottom": bottom}], version))
    assert got["mask"] == "(64,1,5,5)" and got["attended"] == "(64,5,8)"


@pytest.mark.parametrize("change,text", [
    ({"bottom": ["q", "k", "mask"]}, '"MultiHeadAttentionLayer needs 3D Q,K,V input tensors"'),
    ({"bottom": ["q", "k"]}, '"MultiHeadAttentionLayer needs at lease 3 input tensors "'),
    ({"bottom": ["q", "k", "v", "q"]}, '"mask should be 4D tensor"'),
    ({"top": ["score", "value4d"]}, "MultiHeadAttention makes 1 output tensor(s)"),
])
def test_attention_of_23_09_checks(tmp_path, change, text):
    with pytest.raises(UserError) as exc:
        _build(tmp_path, [*QKV, MASK_23_09, {**MHA_23_09, **change}], "23.09")
    assert text in exc.value.format()
    # the 4.3 - 23.08 form (two tops from Q, K, V) is what 23.09 refuses
    _build(tmp_path, [*QKV, MHA3], "23.08")


@pytest.mark.parametrize("case", sorted(VALID))
def test_valid_side_shapes(tmp_path, case):
    version, layers, want, _ = VALID[case]
    got = _shapes(_build(tmp_path, layers, version))
    assert {k: got[k] for k in want} == want


@pytest.mark.parametrize("case", sorted(VALID))
def test_invalid_side_message(tmp_path, case):
    version, layers, _, (index, arg, value, text) = VALID[case]
    layers = [dict(x) for x in layers]
    layers[index][arg] = value
    with pytest.raises(UserError) as exc:
        _build(tmp_path, layers, version)
    assert f'HugeCTR rejects this: "{text}"' in exc.value.format()


@pytest.mark.parametrize("layers,version,text", [
    ([FRC, {"type": "Reshape", "bottom": "his", "top": "h2", "leading_dim": 16, "time_step": 2},   # (B*2, 2, 16)
      {"type": "Reshape", "bottom": "item", "top": "i2", "leading_dim": 8, "time_step": 2},        # (B, 2, 8)
      {"type": "FusedReshapeConcat", "bottom": ["h2", "i2"], "top": ["a", "b"]}], "23.06",
     "All the input tensors must have the same batch_size"),
    ([{"type": "FusedReshapeConcat", "bottom": ["dense"], "top": ["a", "b"]}], "23.06",
     "All the input tensors must be 3D"),
    ([FRC, {"type": "Sub", "bottom": ["his", "his", "his"], "top": "d"}], "3.3", "SubLayer needs 2 input tensors"),
    ([*QKV, {**MHA3, "bottom": ["q", "k", "dense"]}], "23.06", "All the input tensors must have the same num of dims"),
    ([*QKV, {"type": "InnerProduct", "bottom": "hist_emb", "top": "v6", "num_output": 6},
      {**MHA3, "bottom": ["q", "k", "v6"]}], "23.06", "3D input tensors must have the same hidden_dim"),
    ([{"type": "MultiHeadAttention", "bottom": ["dense", "dense"], "top": "x"}], "23.06",
     "MultiHeadAttentionLayer needs two 4D or 3D input tensors "),
    ([*QKV, MHA3, {"type": "MultiHeadAttention", "bottom": ["score", "q"], "top": "x"}], "23.06",
     "All the input tensors must have the same num of dims"),
    ([FRC, {"type": "Reshape", "bottom": "his", "top": "h3", "leading_dim": 16, "time_step": 4},
      {"type": "ReduceSum", "bottom": "h3", "top": "r", "axis": 3}], "23.06", "The axis is overflow"),
    ([FRC, {"type": "Reshape", "bottom": "his", "top": "h3", "leading_dim": 16, "time_step": 3}], "3.3",
     "n_in_elems % (vector_length_ * n_slot_) != 0"),
    ([*QKV, MHA3, {"type": "SequenceMask", "bottom": "dense", "top": "mask", "max_sequence_len": 5},
      {"type": "Softmax", "bottom": ["score", "mask"], "top": "p"}], "23.06-mp",
     "MaskedSoftMaxLayer is not available for the mixed precision mode"),
])
def test_more_hugectr_checks(tmp_path, layers, version, text):
    mixed = version.endswith("-mp")
    with pytest.raises(UserError) as exc:
        _build(tmp_path, layers, version.removesuffix("-mp"), mixed)
    assert f'HugeCTR rejects this: "{text}"' in exc.value.format()


@pytest.mark.parametrize("layers,version,why", [
    ([{"type": "Scale", "bottom": "dense", "top": "s", "axis": 2, "factor": 2}], "23.06", "Scale axis must be 0"),
    ([{"type": "Scale", "bottom": "dense", "top": "s", "factor": 1.5}], "23.06", "whole number"),
    ([{"type": "Scale", "bottom": "hist_emb", "top": "s", "factor": 2}], "23.06", "Scale needs a 2D input"),
    ([FRC | {"top": ["his"]}], "23.06", "FusedReshapeConcat makes 2 output tensor(s)"),
    ([{"type": "FusedReshapeConcat", "bottom": ["user_emb"], "top": ["a", "b"]}], "23.06", "at least 2 slots"),
    ([*QKV, MHA3 | {"top": ["score"]}], "23.06", "MultiHeadAttention makes 2 output tensor(s)"),
    ([*QKV, MHA3 | {"num_attention_heads": 3}], "23.06", "must divide the hidden_dim 8"),
    ([{"type": "ReduceSum", "bottom": "dense", "top": "r", "axis": 0}], "23.06", "over axis 0"),
    ([{"type": "MatrixMultiply", "bottom": ["dense", "dense"], "top": "m"}], "23.06", "valid for one batch size"),
    ([{"type": "Softmax", "bottom": ["dense", "dense"], "top": "p"}], "3.3", "masked softmax came in 3.9"),
])
def test_refused_by_ctrgen_itself(tmp_path, layers, version, why):
    """Forms HugeCTR builds without a check but computes something else (or only for one batch size)."""
    with pytest.raises(UserError) as exc:
        _build(tmp_path, layers, version)
    assert "ctrgen refuses this:" in exc.value.format() and why in exc.value.format()


def _script(tmp_path: Path, version: str, layers: list[dict]) -> tuple[Path, dict]:
    rendered = render_spec(open_spec(_path(tmp_path, layers, version)))
    files = {str(k): v for k, v in rendered.files.items()}
    text = files["model.py"]
    if "graph_to_json" not in text:
        text = text.replace("model.fit(", 'model.graph_to_json(graph_config_file="shapes.json")\nmodel.fit(', 1)
    if "model.summary()" not in text:
        text = text.replace("model.fit(", "model.summary()\nmodel.fit(", 1)
    script = tmp_path / "model.py"
    script.write_text(text)
    return script, files


@pytest.mark.parametrize("case", sorted(VALID))
def test_standin_agrees_on_both_sides(tmp_path, case):
    version, layers, want, (index, arg, value, text) = VALID[case]
    script, files = _script(tmp_path, version, layers)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {"CTRGEN_STANDIN_SKIP_DATA": "1", "CTRGEN_STANDIN_ROOT": str(tmp_path / "root")}
    ok = run_with_standin(script, version, cwd=cwd, env=env)
    assert ok.returncode == 0, ok.stderr
    assert summary_block(ok.stdout) == files["summary.txt"]
    assert (cwd / "shapes.json").read_text() == files["shapes.json"]
    if version != "3.3":
        for top, shape in want.items():
            assert re.search(rf"\s{re.escape(top)}\s+{re.escape(shape)}\s", ok.stdout), (top, shape)
    # The same script with the one argument on the other side of the boundary: the stand-in says HugeCTR's text.
    source = script.read_text()
    top = layers[index]["top"]
    start = source.index("top_names=" + json.dumps([top] if isinstance(top, str) else top))
    block_start = source.rfind("hugectr.DenseLayer(", 0, start)
    block_end = source.index("\n)\n", start)
    block = source[block_start:block_end]
    if arg == "bottom":
        changed = re.sub(r"bottom_names=\[[^\]]*\]", "bottom_names=" + json.dumps(value), block)
    else:
        changed = re.sub(rf"\b{arg}=[^,\n]+", f"{arg}={value!r}", block)
    assert changed != block
    script.write_text(source[:block_start] + changed + source[block_end:])
    bad = run_with_standin(script, version, cwd=cwd, env=env)
    assert bad.returncode != 0
    assert text in bad.stderr, bad.stderr[-600:]


RESHAPE_V2 = {"type": "Reshape", "bottom": "hist_emb", "top": "flat"}   # hist_emb: (B, 5, 8)


@pytest.mark.parametrize("shape,want", [([-1, 40], "(64,40)"), ([-1, 8], "(320,8)"), ([-1, 5, 8], "(64,5,8)"),
                                        ([-1, 80], "(32,80)")])
def test_reshape_with_a_shape_placeholder(tmp_path, shape, want):
    # 23.08+: Reshape(shape=[-1, ...]); the -1 takes what is left of all the elements, batch included
    assert _shapes(_build(tmp_path, [{**RESHAPE_V2, "shape": shape}], "25.03"))["flat"] == want


@pytest.mark.parametrize("shape,text", [
    ([-1, -1], 'HugeCTR rejects this: "The placeholder in reshape layer should equal to 1."'),
    ([-1, 0], 'HugeCTR rejects this: "out dimension in Reshape Layer is illegal."'),
    ([40, -1], "ctrgen refuses this: Reshape(shape=[40, -1]): a fixed first dimension"),
])
def test_reshape_shape_checks(tmp_path, shape, text):
    with pytest.raises(UserError) as exc:
        _build(tmp_path, [{**RESHAPE_V2, "shape": shape}], "23.08")
    assert text in exc.value.format()


def test_a_reshape_row_wider_than_a_sample_is_refused_by_ctrgen(tmp_path):
    # HugeCTR compares leading_dim with the whole tensor (batch included), so it is not HugeCTR that rejects this
    with pytest.raises(UserError) as exc:
        _build(tmp_path, [{"type": "Reshape", "bottom": "user_emb", "top": "wide", "leading_dim": 8}], "23.06")
    text = exc.value.format()
    assert "ctrgen refuses this: Reshape(leading_dim=8) is wider than the 4 elements of one sample" in text
    assert "HugeCTR rejects this" not in text
