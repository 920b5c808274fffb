"""The behaviour-sequence models of HugeCTR's samples: DIN (samples/din/din_parquet.py, 3.2 - 23.06+) and BST
(samples/bst/bst_avg_pooling.py, bst_concat.py). The history and the target item are slots of the item (and
category) embeddings; every width, history length and Scale factor is derived from those embeddings. Layer and tensor
names are the samples'."""

from __future__ import annotations

from typing import cast

from ..specfile.graph import BSTPreset, DINPreset
from .ir import Embedding
from .presets import Ctx, preset_error

DICE = {"elu_alpha": 0.2, "eps": 1e-8}  # PReLU_Dice as both samples configure it


def _dice_mlp(c: Ctx, x: str, units: list[int], stem: str, last: str) -> None:
    """fc -> PReLU_Dice per width, then an FC of 1 named `last` and the loss (fc_din_i1, dice_1, ...)."""
    for k, width in enumerate(units, start=1):
        c.add("InnerProduct", x, f"{stem}{k}", num_output=width)
        x = c.add("PReLU_Dice", f"{stem}{k}", f"dice_{k}", **DICE)
    c.add("InnerProduct", x, last, num_output=1)
    c.loss(last)


def _same_slots(c: Ctx, items: Embedding, cats: Embedding, loc: tuple, least: int) -> int:
    if items.slot_num != cats.slot_num or items.slot_num < least:
        raise preset_error(loc, f"{items.name!r} has {items.slot_num} slots and {cats.name!r} {cats.slot_num}: "
                          f"the item and category histories need the same number of slots (at least {least})",
                          fix="one slot per history position in both sparse inputs")
    return items.slot_num


def _din(c: Ctx) -> None:
    """Attention of the target item over the history: FusedReshapeConcat splits the last slot (the target) from the
    history of (item, category) vectors; a small FC scores each position against the target."""
    s = cast(DINPreset, c.spec)
    user, items, cats = (c.embedding(getattr(s, k), ("model", k)) for k in ("user", "items", "categories"))
    h = _same_slots(c, items, cats, ("model", "items"), 2) - 1  # history positions (the last slot is the target)
    w = items.vec_size + cats.vec_size                          # one (item, category) vector
    his, item = "FusedReshapeConcat_item_his_em", "FusedReshapeConcat_item"
    c.add("FusedReshapeConcat", [items.name, cats.name], [his, item])
    # tensors used several times: Slices on 3.2 with the 3.2 sample's names (item1, item_his1, ...), none later
    item1, item2 = c.branches(item, 2, w, "item")
    his1, his2, his3, his4, his5 = c.branches(his, 5, w, "item_his")
    c.add("Scale", item1, "Scale_item", axis=1, factor=h)      # the target once per history row
    sc1, sc2, sc3 = c.branches("Scale_item", 3, w, "Scale_item")
    c.add("Sub", [sc1, his1], "sub_ih")
    c.add("ElementwiseMultiply", [sc2, his2], "ElementwiseMul_i")
    c.add("Concat", [sc3, his3, "sub_ih", "ElementwiseMul_i"], "concat_i_h")
    c.add("InnerProduct", "concat_i_h", "fc_att_i2", num_output=s.attention_units)
    c.add("InnerProduct", "fc_att_i2", "fc_att_i3", num_output=1)
    c.add("Reshape", "fc_att_i3", "reshape_score", leading_dim=h)
    c.add("Softmax", "reshape_score", "softmax_att_i")
    c.add("Scale", "softmax_att_i", "Scale_i", axis=0, factor=w)  # each weight across its vector's width
    c.add("Reshape", his4, "reshape_item_his", leading_dim=h * w)
    c.add("ElementwiseMultiply", ["Scale_i", "reshape_item_his"], "ElementwiseMul_ih")
    c.add("ReduceSum", "ElementwiseMul_ih", "reduce_ih", axis=1)
    c.add("Reshape", his5, "reshape_his", leading_dim=w, time_step=h)
    c.add("ReduceMean", "reshape_his", "reduce_item_his", axis=1)
    c.add("Reshape", "reduce_item_his", "reshape_reduce_item_his", leading_dim=w)
    c.reshape_flat(user, "reshape_user")
    c.add("Concat", ["reshape_user", "reshape_reduce_item_his", "reduce_ih", item2], "concat_din_i")
    _dice_mlp(c, "concat_din_i", s.units, "fc_din_i", f"fc{len(s.units) + 1}")


def _bst(c: Ctx) -> None:
    """One transformer block over the (category, item) history, masked by the history length (the one dense
    column), pooled by mean (bst_avg_pooling.py) or flattened (bst_concat.py), then an MLP with the user and the
    target item."""
    s = cast(BSTPreset, c.spec)
    user, items, target, cats, target_cat = (c.embedding(getattr(s, k), ("model", k)) for k in
                                             ("user", "items", "target_item", "categories", "target_category"))
    if c.dense_dim != 1:
        raise preset_error(("features", "continuous"), f"BST reads the history length as its one dense column, "
                          f"got {c.dense_dim} continuous columns", fix="one continuous column: the history length")
    h = _same_slots(c, items, cats, ("model", "items"), 1)
    d = items.vec_size + cats.vec_size
    c.add("SequenceMask", c.dense_name, "sequence_mask", max_sequence_len=h)
    c.add("Concat", [cats.name, items.name], "hist_emb_list", axis=2)
    for name in ("query_emb", "key_emb", "value_emb"):
        c.add("InnerProduct", "hist_emb_list", name, num_output=d)
    c.add("MultiHeadAttention", ["query_emb", "key_emb", "value_emb"], ["attention_score", "attn_value_4d"],
          num_attention_heads=s.heads, transpose_b=True)
    c.add("Softmax", ["attention_score", "sequence_mask"], "attention_score_softmax")
    c.add("MultiHeadAttention", ["attention_score_softmax", "attn_value_4d"], "attention_out", transpose_b=False)
    c.add("Add", ["attention_out", "query_emb"], "attention_add_shortcut")
    c.add("LayerNorm", "attention_add_shortcut", "attention_layer_norm")
    c.add("InnerProduct", "attention_layer_norm", "attention_ffn1", num_output=s.ffn_units)
    c.add("InnerProduct", "attention_ffn1", "attention_ffn2", num_output=d)
    c.add("Add", ["attention_ffn2", "attention_layer_norm"], "attention_ffn_shortcut")
    c.add("LayerNorm", "attention_ffn_shortcut", "attention_ffn_layer_norm")
    if s.pooling == "avg":
        c.add("ReduceMean", "attention_ffn_layer_norm", "reduce_attention_ffn_layer_norm", axis=1)
        c.add("Reshape", "reduce_attention_ffn_layer_norm", "reshape_attention_out", leading_dim=d)
    else:
        c.add("Reshape", "attention_ffn_layer_norm", "reshape_attention_out", leading_dim=h * d)
    c.reshape_flat(user, "reshape_user")
    c.reshape_flat(target, "reshape_item_good")
    c.reshape_flat(target_cat, "reshape_item_cate")
    c.add("Concat", ["reshape_attention_out", "reshape_user", "reshape_item_good", "reshape_item_cate"], "dnn_input")
    _dice_mlp(c, "dnn_input", s.units, "fc_bst_i", f"fc_bst_i{len(s.units) + 1}")


PRESETS = {"din": _din, "bst": _bst}
