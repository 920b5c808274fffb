"""The presets of HugeCTR's other sample families, layer for layer as upstream's samples/ scripts build them: NCF, GMF,
NeuMF, DLRM with Layer_t.MLP, DIN, BST, MMoE and shared-bottom. Each expected sequence below is written from the
sample (file and tag in its comment) as facts: layer type, bottoms, tops and the arguments, with the widths the spec's
features give. The specs are the committed ones (specs/<name>.yaml); builds are in-process, nothing is rendered."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from codegen.errors import UserError
from codegen.graph.ir import CallValue, Enum
from codegen.hugectr import versions as V
from codegen.lock import load_features
from codegen.model.build import build_job
from codegen.specfile.context import open_spec
from conftest import REPO


def spec_of(name: str, **changes) -> dict:
    spec = yaml.safe_load((REPO / "specs" / f"{name}.yaml").read_text())
    spec.pop("workflow", None)
    for dotted, value in changes.items():
        node = spec
        *parents, leaf = dotted.split(".")
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        node[int(leaf) if isinstance(node, list) else leaf] = value
    return spec


def build(tmp_path: Path, spec: dict):
    tmp_path.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "specs" / spec["features_lock"], tmp_path / spec["features_lock"])
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    ctx = open_spec(tmp_path / "m.yaml")
    features, _ = load_features(ctx, check_stale=False)
    return build_job(ctx, features)


def _value(v):
    if isinstance(v, Enum):
        return v.member
    if isinstance(v, CallValue):
        return {v.func: {k: _value(x) for k, x in v.args}}
    if isinstance(v, (list, tuple)):
        return [_value(x) for x in v]
    return v


def calls(job) -> list[tuple]:
    """The model.add calls of model.py: (type, bottoms, tops, arguments); graph_analysis' own Slices left out."""
    return [(layer.type, list(layer.bottoms), list(layer.tops), {k: _value(v) for k, v in layer.params})
            for layer in job.graph.layers if not layer.auto]


def L(type_: str, bottom, top, **params) -> tuple:  # noqa: N802 - reads like the samples' DenseLayer calls
    return (type_, [bottom] if isinstance(bottom, str) else list(bottom), [top] if isinstance(top, str) else list(top),
            {k: [list(r) for r in v] if k == "ranges" else v for k, v in params.items()})


def fc_relu_dropout(x: str, units, names=("fc{}", "relu{}", "dropout{}"), last_dropout=None) -> list[tuple]:
    out = []
    for i, w in enumerate(units, start=1):
        fc, relu, drop = (n.format(i) for n in names)
        if last_dropout and i == len(units):
            drop = last_dropout
        out += [L("InnerProduct", x, fc, num_output=w), L("ReLU", fc, relu),
                L("Dropout", relu, drop, dropout_rate=0.5)]
        x = drop
    return out


def test_ncf_is_samples_ncf(tmp_path):
    # NVIDIA-Merlin/HugeCTR@v23.06.01 samples/ncf/ncf.py: 2 slots x vec 64 -> Reshape 128, 256-256-128-64.
    seq = [L("Reshape", "mlp_embedding", "reshape_mlp", leading_dim=128),
           *fc_relu_dropout("reshape_mlp", [256, 256, 128, 64]),
           L("InnerProduct", "dropout4", "mlp_out", num_output=1),
           L("BinaryCrossEntropyLoss", ["mlp_out", "label"], "loss")]
    assert calls(build(tmp_path, spec_of("ncf"))) == seq


def test_gmf_is_samples_gmf(tmp_path):
    # NVIDIA-Merlin/HugeCTR@v23.06.01 samples/ncf/gmf.py: vec 16, Reshape 32, Slice (0, 15), (16, 31) as written.
    seq = [L("Reshape", "gmf_embedding", "reshape1", leading_dim=32),
           L("Slice", "reshape1", ["user", "item"], ranges=[(0, 15), (16, 31)]),
           L("ElementwiseMultiply", ["user", "item"], "multiply1"),
           L("InnerProduct", "multiply1", "gmf_out", num_output=1),
           L("BinaryCrossEntropyLoss", ["gmf_out", "label"], "loss")]
    assert calls(build(tmp_path, spec_of("gmf"))) == seq


def test_neumf_is_samples_neumf(tmp_path):
    # NVIDIA-Merlin/HugeCTR@v23.06.01 samples/ncf/neumf.py: vec 72 = 64 (MLP) + 8 (GMF); Reshape 144, Slices
    # (0, 127), (128, 143) and (0, 7), (8, 15) as written; the last MLP Dropout is mlp_dropout4.
    seq = [L("Reshape", "mixed_embedding", "reshape_embedding", leading_dim=144),
           L("Slice", "reshape_embedding", ["mlp_embedding", "gmf_embedding"], ranges=[(0, 127), (128, 143)]),
           *fc_relu_dropout("mlp_embedding", [256, 256, 128, 64], last_dropout="mlp_dropout4"),
           L("Slice", "gmf_embedding", ["user", "item"], ranges=[(0, 7), (8, 15)]),
           L("ElementwiseMultiply", ["user", "item"], "gmf_multiply"),
           L("Concat", ["gmf_multiply", "mlp_dropout4"], "concat"),
           L("InnerProduct", "concat", "neumf_out", num_output=1),
           L("BinaryCrossEntropyLoss", ["neumf_out", "label"], "loss")]
    assert calls(build(tmp_path, spec_of("neumf"))) == seq


def test_neumf_gmf_part_follows_the_knob(tmp_path):
    job = build(tmp_path, spec_of("neumf", **{"model.gmf_vec_size": 16, "embeddings.0.embedding_vec_size": 48}))
    slices = [c for c in calls(job) if c[0] == "Slice"]
    assert [s[3]["ranges"] for s in slices] == [[[0, 63], [64, 95]], [[0, 15], [16, 31]]]


def _cfg(fuse_wb: bool) -> dict:
    return {"DenseLayerComputeConfig": {"async_wgrad": True, "fuse_wb": fuse_wb}}


@pytest.mark.parametrize("version", ["4.2", "23.06"])
def test_dlrm_mlp_is_samples_dgx_a100_mlp(tmp_path, version):
    # NVIDIA-Merlin/HugeCTR@v23.06.01 samples/dlrm/dgx_a100_mlp.py (also at v4.2, without compute_config, which
    # DenseLayer takes from 23.04).
    cfg = version == "23.06"
    seq = [L("MLP", "dense", "mlp1", act_type="Relu", num_outputs=[512, 256, 128], **({"compute_config": _cfg(False)}
                                                                                       if cfg else {})),
           L("Interaction", ["mlp1", "sparse_embedding1"], ["interaction1", "interaction_grad"]),
           L("MLP", ["interaction1", "interaction_grad"], "mlp2", num_outputs=[1024, 1024, 512, 256, 1],
             activations=["Relu", "Relu", "Relu", "Relu", "Non"], **({"compute_config": _cfg(True)} if cfg else {})),
           L("BinaryCrossEntropyLoss", ["mlp2", "label"], "loss")]
    assert calls(build(tmp_path, spec_of("dlrm_mlp", hugectr_version=version))) == seq


FRC = ["FusedReshapeConcat_item_his_em", "FusedReshapeConcat_item"]


def din_calls(his: list[str], item: list[str], scaled: list[str], h: int = 10, w: int = 36) -> list[tuple]:
    """samples/din/din_parquet.py: h history positions of (item, category) width w; the user is 1 slot x 18."""
    return [
        L("Scale", item[0], "Scale_item", axis=1, factor=float(h)),
        L("Sub", [scaled[0], his[0]], "sub_ih"),
        L("ElementwiseMultiply", [scaled[1], his[1]], "ElementwiseMul_i"),
        L("Concat", [scaled[2], his[2], "sub_ih", "ElementwiseMul_i"], "concat_i_h"),
        L("InnerProduct", "concat_i_h", "fc_att_i2", num_output=40),
        L("InnerProduct", "fc_att_i2", "fc_att_i3", num_output=1),
        L("Reshape", "fc_att_i3", "reshape_score", leading_dim=h),
        L("Softmax", "reshape_score", "softmax_att_i"),
        L("Scale", "softmax_att_i", "Scale_i", axis=0, factor=float(w)),
        L("Reshape", his[3], "reshape_item_his", leading_dim=h * w),
        L("ElementwiseMultiply", ["Scale_i", "reshape_item_his"], "ElementwiseMul_ih"),
        L("ReduceSum", "ElementwiseMul_ih", "reduce_ih", axis=1),
        L("Reshape", his[4], "reshape_his", leading_dim=w, time_step=h),
        L("ReduceMean", "reshape_his", "reduce_item_his", axis=1),
        L("Reshape", "reduce_item_his", "reshape_reduce_item_his", leading_dim=w),
        L("Reshape", "sparse_embedding_user", "reshape_user", leading_dim=18),
        L("Concat", ["reshape_user", "reshape_reduce_item_his", "reduce_ih", item[1]], "concat_din_i"),
        L("InnerProduct", "concat_din_i", "fc_din_i1", num_output=200),
        L("PReLU_Dice", "fc_din_i1", "dice_1", elu_alpha=0.2, eps=1e-8),
        L("InnerProduct", "dice_1", "fc_din_i2", num_output=80),
        L("PReLU_Dice", "fc_din_i2", "dice_2", elu_alpha=0.2, eps=1e-8),
        L("InnerProduct", "dice_2", "fc3", num_output=1),
        L("BinaryCrossEntropyLoss", ["fc3", "label"], "loss")]


def _loose(seq):
    """Float-valued arguments compared as floats (HugeCTR's float32 arguments are rendered as floats)."""
    return [(t, b, o, {k: float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and k in
                       ("factor", "elu_alpha", "eps", "dropout_rate") else v for k, v in p.items()})
            for t, b, o, p in seq]


def test_din_is_samples_din(tmp_path):
    # NVIDIA-Merlin/HugeCTR@v23.06.01 samples/din/din_parquet.py: 11 item and category slots (10 history + the
    # target) of vec 18 -> w = 36; HugeCTR >= 3.3 inserts the Slices of the tensors used several times itself.
    his, item = FRC
    seq = [L("FusedReshapeConcat", ["sparse_embedding_good", "sparse_embedding_cate"], FRC),
           *din_calls([his] * 5, [item] * 2, ["Scale_item"] * 3)]
    assert _loose(calls(build(tmp_path, spec_of("din")))) == _loose(seq)


def test_din_on_3_2_writes_the_slices_of_its_3_2_sample(tmp_path):
    # NVIDIA-Merlin/HugeCTR@v3.2 samples/din/din_parquet.py: item1/item2, item_his1..5, Scale_item1..3 (that sample
    # multiplies with DotProduct; ElementwiseMultiply, in 3.2 too, is what later samples use).
    his, item = FRC
    got = calls(build(tmp_path, spec_of("din", hugectr_version="3.2")))
    his_n, sc_n = [f"item_his{k}" for k in range(1, 6)], [f"Scale_item{k}" for k in range(1, 4)]
    seq = [L("FusedReshapeConcat", ["sparse_embedding_good", "sparse_embedding_cate"], FRC),
           L("Slice", item, ["item1", "item2"], ranges=[(0, 36)] * 2),
           L("Slice", his, his_n, ranges=[(0, 36)] * 5),
           *din_calls(his_n, ["item1", "item2"], sc_n)]
    seq.insert(4, L("Slice", "Scale_item", sc_n, ranges=[(0, 36)] * 3))
    assert _loose(got) == _loose(seq)


def test_din_widths_follow_the_embeddings(tmp_path):
    spec = spec_of("din", **{"embeddings.1.embedding_vec_size": 8, "embeddings.2.embedding_vec_size": 4})
    spec["input"]["sparse"][1]["columns"] = [f"MID{i}" for i in range(6)]
    spec["features"] = {"categorical": ["UID", *(f"MID{i}" for i in range(6)), *(f"CID{i}" for i in range(6))],
                        "continuous": []}
    got = {c[2][0]: c[3] for c in calls(build(tmp_path, spec))}
    assert got["Scale_item"]["factor"] == 5 and got["reshape_score"]["leading_dim"] == 5
    assert got["Scale_i"]["factor"] == 12 and got["reshape_item_his"]["leading_dim"] == 60
    assert got["reshape_his"] == {"leading_dim": 12, "time_step": 5}


def bst_calls(pooling: str) -> list[tuple]:
    # NVIDIA-Merlin/HugeCTR@v23.06.01 samples/bst/bst_avg_pooling.py and bst_concat.py: 10 history slots of
    # (category, item) vec 16 -> d = 32, 4 heads, FFN 128; user 1 x 18, target item and category 1 x 16.
    pool = [L("ReduceMean", "attention_ffn_layer_norm", "reduce_attention_ffn_layer_norm", axis=1),
            L("Reshape", "reduce_attention_ffn_layer_norm", "reshape_attention_out", leading_dim=32)] \
        if pooling == "avg" else [L("Reshape", "attention_ffn_layer_norm", "reshape_attention_out", leading_dim=320)]
    mlp = []
    for k, (w, x) in enumerate(zip([256, 128, 64], ["dnn_input", "dice_1", "dice_2"]), start=1):
        mlp += [L("InnerProduct", x, f"fc_bst_i{k}", num_output=w),
                L("PReLU_Dice", f"fc_bst_i{k}", f"dice_{k}", elu_alpha=0.2, eps=1e-8)]
    return [
        L("SequenceMask", "dense", "sequence_mask", max_sequence_len=10),
        L("Concat", ["sparse_embedding_cate", "sparse_embedding_good"], "hist_emb_list", axis=2),
        L("InnerProduct", "hist_emb_list", "query_emb", num_output=32),
        L("InnerProduct", "hist_emb_list", "key_emb", num_output=32),
        L("InnerProduct", "hist_emb_list", "value_emb", num_output=32),
        L("MultiHeadAttention", ["query_emb", "key_emb", "value_emb"], ["attention_score", "attn_value_4d"],
          num_attention_heads=4, transpose_b=True),
        L("Softmax", ["attention_score", "sequence_mask"], "attention_score_softmax"),
        L("MultiHeadAttention", ["attention_score_softmax", "attn_value_4d"], "attention_out", transpose_b=False),
        L("Add", ["attention_out", "query_emb"], "attention_add_shortcut"),
        L("LayerNorm", "attention_add_shortcut", "attention_layer_norm"),
        L("InnerProduct", "attention_layer_norm", "attention_ffn1", num_output=128),
        L("InnerProduct", "attention_ffn1", "attention_ffn2", num_output=32),
        L("Add", ["attention_ffn2", "attention_layer_norm"], "attention_ffn_shortcut"),
        L("LayerNorm", "attention_ffn_shortcut", "attention_ffn_layer_norm"),
        *pool,
        L("Reshape", "sparse_embedding_user", "reshape_user", leading_dim=18),
        L("Reshape", "sparse_embedding_item_good", "reshape_item_good", leading_dim=16),
        L("Reshape", "sparse_embedding_item_cate", "reshape_item_cate", leading_dim=16),
        L("Concat", ["reshape_attention_out", "reshape_user", "reshape_item_good", "reshape_item_cate"], "dnn_input"),
        *mlp,
        L("InnerProduct", "dice_3", "fc_bst_i4", num_output=1),
        L("BinaryCrossEntropyLoss", ["fc_bst_i4", "label"], "loss")]


@pytest.mark.parametrize("pooling", ["avg", "concat"])
def test_bst_is_samples_bst(tmp_path, pooling):
    got = calls(build(tmp_path, spec_of("bst", **{"model.pooling": pooling})))
    assert _loose(got) == _loose(bst_calls(pooling))


def test_mmoe_is_samples_mmoe(tmp_path):
    # NVIDIA-Merlin/HugeCTR@v23.06.01 samples/mmoe/mmoe_parquet.py: 32 slots x vec 16 -> 512, 3 experts of
    # 256-128, tasks A (50k_label) and B (married_label), towers of 64.
    seq = [L("Reshape", "embedding", "reshape_embedding", leading_dim=512),
           L("Slice", "reshape_embedding", ["expert_emb", "gating_emb"], ranges=[(0, 512)] * 2),
           L("Slice", "expert_emb", ["expert0_in", "expert1_in", "expert2_in"], ranges=[(0, 512)] * 3)]
    for k in range(3):
        seq += fc_relu_dropout(f"expert{k}_in", [256, 128], (f"e{k}_fc{{}}", f"e{k}_relu{{}}", f"e{k}_dropout{{}}"))
        seq.append(L("Slice", f"e{k}_dropout2", [f"e{k}_out_A", f"e{k}_out_B"], ranges=[(0, 128)] * 2))
    seq.append(L("Slice", "gating_emb", ["gateA_in", "gateB_in"], ranges=[(0, 512)] * 2))
    for t in "AB":
        seq += [L("InnerProduct", f"gate{t}_in", f"g{t}_dense", num_output=3),
                L("Softmax", f"g{t}_dense", f"g{t}_softmax"),
                L("Slice", f"g{t}_softmax", [f"g{t}_e0", f"g{t}_e1", f"g{t}_e2"], ranges=[(0, 1), (1, 2), (2, 3)])]
        for k in range(3):
            seq += [L("Scale", f"g{t}_e{k}", f"g{t}_e{k}_scaled", axis=0, factor=128.0),
                    L("ElementwiseMultiply", [f"e{k}_out_{t}", f"g{t}_e{k}_scaled"], f"e{k}_{t}_gated")]
        seq.append(L("Add", [f"e{k}_{t}_gated" for k in range(3)], f"tower_{t}_input"))
    for t in "AB":
        seq += fc_relu_dropout(f"tower_{t}_input", [64], (f"{t}_fc{{}}", f"{t}_relu{{}}", f"{t}_dropout{{}}"))
        seq.append(L("InnerProduct", f"{t}_dropout1", f"{t}_fc2", num_output=1))
    seq += [L("BinaryCrossEntropyLoss", ["A_fc2", "50k_label"], "lossA"),
            L("BinaryCrossEntropyLoss", ["B_fc2", "married_label"], "lossB")]
    job = build(tmp_path, spec_of("mmoe"))
    assert _loose(calls(job)) == _loose(seq)
    assert job.compile_args == (("loss_names", ["50k_label", "married_label"]), ("loss_weights", [0.5, 0.5]))


def test_shared_bottom_is_samples_shared_bottom(tmp_path):
    # NVIDIA-Merlin/HugeCTR@v23.06.01 samples/mmoe/shared_bottom.py: shared 128-256 over 512, towers of 64. The
    # sample feeds A_dropout1 from A_fc1 (A_relu1 is left unused); both towers here are wired like tower B.
    seq = [L("Reshape", "embedding", "reshape_embedding", leading_dim=512),
           *fc_relu_dropout("reshape_embedding", [128, 256], ("shared{}", "relu{}", "dropout{}")),
           L("Slice", "dropout2", ["sliceA", "sliceB"], ranges=[(0, 256)] * 2)]
    for t in "AB":
        seq += fc_relu_dropout(f"slice{t}", [64], (f"{t}_fc{{}}", f"{t}_relu{{}}", f"{t}_dropout{{}}"))
        seq.append(L("InnerProduct", f"{t}_dropout1", f"{t}_out", num_output=1))
    seq += [L("BinaryCrossEntropyLoss", ["A_out", "50k_label"], "lossA"),
            L("BinaryCrossEntropyLoss", ["B_out", "married_label"], "lossB")]
    assert _loose(calls(build(tmp_path, spec_of("shared_bottom")))) == _loose(seq)


# The releases where each family's layers (and arguments) exist; the builder refuses the release before (and after).
SPANS = {
    "ncf": ("3.2", None), "gmf": ("3.2", None), "neumf": ("3.2", None), "din": ("3.2", None),
    "dlrm_mlp": ("4.2", None),           # Layer_t.MLP
    "bst": ("4.3", "23.06"),             # MultiHeadAttention's transpose_b (4.3); SequenceMask's max_sequence_len (< 23.08)
    "mmoe": ("3.5", None), "shared_bottom": ("3.5", None),   # several labels: Input(label_dims=...)
}
REFUSED = {"dlrm_mlp": "layer type 'MLP' is not in HugeCTR 4.1", "bst": "is not in HugeCTR",
           "mmoe": "2 labels, but HugeCTR 3.4 takes a single label",
           "shared_bottom": "2 labels, but HugeCTR 3.4 takes a single label"}


@pytest.mark.parametrize("name", sorted(SPANS))
def test_each_family_builds_on_every_release_that_has_its_layers(tmp_path, name):
    first, last = SPANS[name]
    names = list(V.RELEASES)
    lo, hi = names.index(first), names.index(last) if last else len(names) - 1
    for version in names[lo:hi + 1]:
        build(tmp_path / version, spec_of(name, hugectr_version=version))
    outside = ([names[lo - 1]] if lo else []) + ([names[hi + 1]] if hi + 1 < len(names) else [])
    for version in outside:
        with pytest.raises(UserError) as info:
            build(tmp_path / version, spec_of(name, hugectr_version=version))
        assert REFUSED[name] in info.value.format()


@pytest.mark.parametrize(("name", "changes", "field", "fragment"), [
    ("gmf", {"input.sparse.0.columns": ["userId"]}, "embeddings",
     "the gmf preset reads one embedding over two slots (user, item)"),
    ("neumf", {"model.gmf_vec_size": 72}, "embeddings[0].embedding_vec_size", "neumf needs embedding_vec_size >= 73"),
    ("dlrm_mlp", {"model.bottom_units": [512, 64]}, "model.bottom_units", "the bottom MLP ends at width 64"),
    ("bst", {"features": {"continuous": []}}, "features.continuous", "BST reads the history length as its one dense"),
    ("din", {"model.items": "nope"}, "model.items", "'nope' is not an embedding of this spec"),
    ("mmoe", {"features": {"label": ["50k_label"]}}, "features.label", "mmoe trains one task per label"),
])
def test_a_spec_the_family_cannot_build_is_refused_on_its_field(tmp_path, name, changes, field, fragment):
    spec = spec_of(name, **{k: v for k, v in changes.items() if "." in k})
    spec.update({k: v for k, v in changes.items() if "." not in k})
    with pytest.raises(UserError) as info:
        build(tmp_path, spec)
    assert any(p.field == field and fragment in p.message for p in info.value.problems), info.value.format()
