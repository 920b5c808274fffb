"""NCF, GMF and NeuMF (HugeCTR samples/ncf: ncf.py, gmf.py, neumf.py, 3.2 - 23.06+): one embedding over two one-hot
slots, user then item, and the sample's layer names. Graphs: docs/hugectr.md §3."""

from __future__ import annotations

from typing import cast

from ..specfile.graph import NCFPreset, NeuMFPreset
from .ir import Embedding
from .presets import Ctx, preset_error


def _user_item(c: Ctx, preset: str, min_vec: int = 1) -> Embedding:
    if len(c.embeddings) != 1 or c.embeddings[0].slot_num != 2:
        raise preset_error(("embeddings",), f"the {preset} preset reads one embedding over two slots (user, item)",
                          fix="one sparse input of the user and item columns, one embedding over it")
    e = c.embeddings[0]
    if e.vec_size < min_vec:
        raise preset_error(("embeddings", 0, "embedding_vec_size"), f"{preset} needs embedding_vec_size >= {min_vec}",
                          fix=f"e.g. {max(16, min_vec)}")
    return e


def _halves(width: int) -> list[tuple[int, int]]:
    # Slice ranges are end-exclusive; the samples write (0, w-1), (w, 2w-1), which leaves out the last element of
    # each half. Kept as written so the graph (and its weights) are the sample's.
    return [(0, width - 1), (width, 2 * width - 1)]


def _tower(c: Ctx, x: str, units: list[int], dropout: float | None, last: str) -> str:
    """fc{i} -> relu{i} (-> dropout{i}) per width; the last top is named `last` (neumf.py: mlp_dropout4)."""
    for i, width in enumerate(units, start=1):
        c.add("InnerProduct", x, f"fc{i}", num_output=width)
        x = c.add("ReLU", f"fc{i}", f"relu{i}")
        if dropout is not None:
            x = c.add("Dropout", x, last if i == len(units) else f"dropout{i}", dropout_rate=dropout)
    return x


def _ncf(c: Ctx) -> None:
    s, e = cast(NCFPreset, c.spec), _user_item(c, "ncf")
    x = c.add("Reshape", e.name, "reshape_mlp", leading_dim=2 * e.vec_size)
    x = _tower(c, x, s.units, s.dropout, f"dropout{len(s.units)}")
    c.add("InnerProduct", x, "mlp_out", num_output=1)
    c.loss("mlp_out")


def _gmf(c: Ctx) -> None:
    e = _user_item(c, "gmf", min_vec=2)
    c.add("Reshape", e.name, "reshape1", leading_dim=2 * e.vec_size)
    c.add("Slice", "reshape1", ["user", "item"], ranges=_halves(e.vec_size))
    c.add("ElementwiseMultiply", ["user", "item"], "multiply1")
    c.add("InnerProduct", "multiply1", "gmf_out", num_output=1)
    c.loss("gmf_out")


def _neumf(c: Ctx) -> None:
    """One table whose vectors hold the MLP part (vec - gmf_vec_size) and the GMF part; the sample slices the
    reshaped (user, item) row as [2 x MLP part | 2 x GMF part]."""
    s = cast(NeuMFPreset, c.spec)
    e = _user_item(c, "neumf", min_vec=s.gmf_vec_size + 1)
    if s.gmf_vec_size < 2:
        raise preset_error(("model", "gmf_vec_size"), "the GMF part needs at least 2 numbers per vector", fix="e.g. 8")
    mlp_w = 2 * (e.vec_size - s.gmf_vec_size)
    c.add("Reshape", e.name, "reshape_embedding", leading_dim=2 * e.vec_size)
    c.add("Slice", "reshape_embedding", ["mlp_embedding", "gmf_embedding"],
          ranges=[(0, mlp_w - 1), (mlp_w, 2 * e.vec_size - 1)])
    mlp = _tower(c, "mlp_embedding", s.units, s.dropout, f"mlp_dropout{len(s.units)}")
    c.add("Slice", "gmf_embedding", ["user", "item"], ranges=_halves(s.gmf_vec_size))
    c.add("ElementwiseMultiply", ["user", "item"], "gmf_multiply")
    c.add("Concat", ["gmf_multiply", mlp], "concat")
    c.add("InnerProduct", "concat", "neumf_out", num_output=1)
    c.loss("neumf_out")


PRESETS = {"ncf": _ncf, "gmf": _gmf, "neumf": _neumf}
