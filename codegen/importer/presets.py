"""Import emits ``preset:`` when the source's layers are exactly what a preset expands to.

Each preset's knobs are guessed from the explicit layers (widths of the InnerProduct layers, the Dropout rate, the
MultiCross depth, which embedding is the wide one), then the preset is expanded with the same builder ``generate``
uses and compared layer for layer (type, bottoms, tops, arguments). Only an exact match replaces the layers, so a
wrong guess costs nothing but the compact form.
"""

from __future__ import annotations

from typing import Any

from ..features import Features
from ..graph.build import build_job
from ..hugectr import api as A
from ..specfile.load import LoadedSpec
from ..specfile.model import Spec


def _layers(job) -> list[tuple]:
    return [(l.type, l.bottoms, l.tops, l.params) for l in job.graph.layers]


def _arg(layer: dict, name: str) -> Any:
    """A spec layer's DenseLayer argument, else HugeCTR's default (the newest release's: these are the same in all)."""
    return A.given_or_default(layer, "DenseLayer", name, A.RELEASES[-1])


def _widths(layers: list[dict], start: int = 0, stop: int | None = None) -> list[int]:
    return [int(_arg(l, "num_output")) for l in layers[start:stop] if l["type"] == "InnerProduct"]


def _dropout(layers: list[dict]) -> dict:
    rates = {_arg(l, "dropout_rate") for l in layers if l["type"] == "Dropout"}
    return {"dropout": rates.pop()} if len(rates) == 1 else {}


def candidates(spec: dict) -> list[dict]:
    layers = spec["model"]["layers"]
    types = [l["type"] for l in layers]
    embs = spec.get("embeddings", [])
    out: list[dict] = []
    hidden = _widths(layers)[:-1]
    if hidden:
        norm = {"batch_norm": True} if "BatchNorm" in types else {}
        out.append({"preset": "mlp", "units": hidden, **_dropout(layers), **norm})
        out.append({"preset": "deepfm", "units": hidden, **_dropout(layers)})
    if "MultiCross" in types:
        cross = next(l for l in layers if l["type"] == "MultiCross")
        extra = {"projection_dim": cross["projection_dim"]} if "projection_dim" in cross else {}
        out.append({"preset": "dcn", "cross_layers": _arg(cross, "num_layers"), "units": hidden, **extra,
                    **_dropout(layers)})
    if "Interaction" in types:
        k = types.index("Interaction")
        out.append({"preset": "dlrm", "bottom_units": _widths(layers, 0, k), "top_units": _widths(layers, k)[:-1]})
    wide = [e.get("name", "sparse_embedding1") for e in embs if e.get("embedding_vec_size") == 1]
    deep = [e.get("name", "sparse_embedding1") for e in embs if e.get("embedding_vec_size") != 1]
    if len(wide) == 1 and len(deep) == 1:
        out.append({"preset": "wdl", "wide": wide[0], "deep": deep[0], "units": hidden, **_dropout(layers)})
    return out + _family_candidates(layers, types, hidden)


def _tops(layer: dict) -> list[str]:
    return [layer["top"]] if isinstance(layer["top"], str) else list(layer["top"])


def _named(layers: list[dict], prefix: str, type_: str = "InnerProduct") -> list[dict]:
    return [l for l in layers if l["type"] == type_ and _tops(l)[0].startswith(prefix)]


def _family_candidates(layers: list[dict], types: list[str], hidden: list[int]) -> list[dict]:
    """The sample families' presets (graph/presets_ncf.py, presets_seq.py, presets_multitask.py), found by the
    samples' tensor names."""
    out: list[dict] = []
    first = {t: l for l in reversed(layers) for t in _tops(l)}   # the layer that makes each tensor
    mlps = [l for l in layers if l["type"] == "MLP"]
    if len(mlps) == 2 and "Interaction" in types:
        out.append({"preset": "dlrm_mlp", "bottom_units": list(_arg(mlps[0], "num_outputs")),
                    "top_units": list(_arg(mlps[1], "num_outputs"))[:-1]})
    if "mlp_out" in first:
        out.append({"preset": "ncf", "units": hidden, **_dropout(layers)})
    if "gmf_out" in first:
        out.append({"preset": "gmf"})
    if "neumf_out" in first and "mlp_embedding" in first:
        _, (lo, hi) = first["mlp_embedding"]["ranges"]
        out.append({"preset": "neumf", "gmf_vec_size": (hi - lo + 1) // 2, "units": hidden, **_dropout(layers)})
    if "FusedReshapeConcat_item" in first and "reshape_user" in first:
        items, cats = first["FusedReshapeConcat_item"]["bottom"]
        out.append({"preset": "din", "user": first["reshape_user"]["bottom"], "items": items, "categories": cats,
                    "attention_units": _arg(first["fc_att_i2"], "num_output") if "fc_att_i2" in first else 1,
                    "units": _widths(_named(layers, "fc_din_i"))})
    if "hist_emb_list" in first and {"reshape_user", "reshape_item_good", "reshape_item_cate"} <= set(first):
        cats, items = first["hist_emb_list"]["bottom"]
        mha = _named(layers, "attention_score", "MultiHeadAttention")
        out.append({"preset": "bst", "user": first["reshape_user"]["bottom"], "items": items, "categories": cats,
                    "target_item": first["reshape_item_good"]["bottom"],
                    "target_category": first["reshape_item_cate"]["bottom"],
                    "heads": _arg(mha[0], "num_attention_heads") if mha else 1,
                    "ffn_units": _arg(first["attention_ffn1"], "num_output") if "attention_ffn1" in first else 1,
                    "pooling": "avg" if "reduce_attention_ffn_layer_norm" in first else "concat",
                    "units": _widths(_named(layers, "fc_bst_i"))[:-1]})
    towers = {"tower_units": _widths(_named(layers, "A_fc"))[:len(_named(layers, "A_relu", "ReLU"))],
              **_dropout(layers)}
    if "expert_emb" in first and "expert0_in" in first:
        experts = next(len(_tops(l)) for l in layers if "expert0_in" in _tops(l))
        out.append({"preset": "mmoe", "experts": experts, "expert_units": _widths(_named(layers, "e0_fc")), **towers})
    if "sliceA" in first:
        out.append({"preset": "shared_bottom", "units": _widths(_named(layers, "shared")), **towers})
    return out


def _job(spec: dict, features: Features):
    model = Spec.model_validate(spec)
    return build_job(LoadedSpec(spec=model, path=__import__("pathlib").Path("<import>"), text="", tree=None),
                     features, "<lock>")


def compact(spec: dict, features: Features) -> dict:
    """``spec`` with ``model`` replaced by the first preset that expands to exactly its layers."""
    try:
        want = _layers(_job(spec, features))
    except Exception:
        return spec
    for candidate in candidates(spec):
        trial = {**spec, "model": candidate}
        try:
            got = _layers(_job(trial, features))
        except Exception:
            continue
        if got == want:
            return trial
    return spec
