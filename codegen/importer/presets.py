"""Import emits ``preset:`` when the source's layers are exactly what a preset expands to.

Each preset's knobs are guessed from the explicit layers (widths of the InnerProduct layers, the Dropout rate, the
MultiCross depth, which embedding is the wide one), then the preset is expanded with the same builder ``generate``
uses and compared layer for layer (type, bottoms, tops, arguments). Only an exact match replaces the layers, so a
wrong guess costs nothing but the compact form.
"""

from __future__ import annotations

from ..features import Features
from ..graph.build import Builder
from ..spec.load import LoadedSpec
from ..spec.model import Spec


def _layers(job) -> list[tuple]:
    return [(l.type, l.bottoms, l.tops, l.params) for l in job.graph.layers]


def _widths(layers: list[dict], start: int = 0, stop: int | None = None) -> list[int]:
    return [int(l.get("num_output", 1)) for l in layers[start:stop] if l["type"] == "InnerProduct"]


def _dropout(layers: list[dict]) -> dict:
    rates = {l.get("dropout_rate", 0.5) for l in layers if l["type"] == "Dropout"}
    return {"dropout": rates.pop()} if len(rates) == 1 else {}


def candidates(spec: dict) -> list[dict]:
    layers = spec["model"]["layers"]
    types = [l["type"] for l in layers]
    embs = spec.get("embeddings", [])
    out: list[dict] = []
    hidden = _widths(layers)[:-1]
    if hidden:
        out.append({"preset": "mlp", "units": hidden, **_dropout(layers)})
        out.append({"preset": "deepfm", "units": hidden, **_dropout(layers)})
    if "MultiCross" in types:
        cross = next(l for l in layers if l["type"] == "MultiCross")
        extra = {"projection_dim": cross["projection_dim"]} if "projection_dim" in cross else {}
        out.append({"preset": "dcn", "cross_layers": cross.get("num_layers", 1), "units": hidden, **extra,
                    **_dropout(layers)})
    if "Interaction" in types:
        k = types.index("Interaction")
        out.append({"preset": "dlrm", "bottom_units": _widths(layers, 0, k), "top_units": _widths(layers, k)[:-1]})
    wide = [e.get("name", "sparse_embedding1") for e in embs if e.get("embedding_vec_size") == 1]
    deep = [e.get("name", "sparse_embedding1") for e in embs if e.get("embedding_vec_size") != 1]
    if len(wide) == 1 and len(deep) == 1:
        out.append({"preset": "wdl", "wide": wide[0], "deep": deep[0], "units": hidden, **_dropout(layers)})
    return out


def _job(spec: dict, features: Features):
    model = Spec.model_validate(spec)
    return Builder(LoadedSpec(spec=model, path=__import__("pathlib").Path("<import>"), text="", tree=None),
                   features, "<lock>").build()


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
