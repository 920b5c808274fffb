"""Model presets: short spec sections that expand to the dense layers of a known architecture.

A preset returns :class:`RawLayer` entries, the same thing an explicit ``layers:`` list produces, so shape
inference, HugeCTR's checks and every renderer treat both alike. Names follow the notebooks (reshape1, fc1, relu1,
..., loss) so generated scripts read like the hand-written ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ir import Embedding


@dataclass
class RawLayer:
    """A dense layer before shape inference: what a preset or an explicit `layers:` entry asks for."""

    type: str
    bottoms: tuple[str, ...]
    tops: tuple[str, ...]
    params: dict
    origin: tuple  # spec location of the entry that produced it


def _mlp(spec, embeddings: list[Embedding], dense_dim: int, labels: tuple[str, ...], dense_name: str) -> list[RawLayer]:
    origin = ("model",)
    out: list[RawLayer] = []
    feeds = []
    for i, e in enumerate(embeddings, start=1):
        # leading_dim = slots x vec: derived, so a changed vec size or feature count stays consistent.
        out.append(RawLayer("Reshape", (e.name,), (f"reshape{i}",), {"leading_dim": e.slot_num * e.vec_size}, origin))
        feeds.append(f"reshape{i}")
    if dense_dim:
        feeds.append(dense_name)
    x = feeds[0]
    if len(feeds) > 1:
        out.append(RawLayer("Concat", tuple(feeds), ("concat1",), {}, origin))
        x = "concat1"
    for i, units in enumerate(spec.units, start=1):
        out.append(RawLayer("InnerProduct", (x,), (f"fc{i}",), {"num_output": units}, origin))
        out.append(RawLayer("ReLU", (f"fc{i}",), (f"relu{i}",), {}, origin))
        x = f"relu{i}"
        if spec.dropout is not None:
            out.append(RawLayer("Dropout", (x,), (f"dropout{i}",), {"dropout_rate": spec.dropout}, origin))
            x = f"dropout{i}"
    last = f"fc{len(spec.units) + 1}"
    out.append(RawLayer("InnerProduct", (x,), (last,), {"num_output": 1}, origin))
    out.append(RawLayer("BinaryCrossEntropyLoss", (last, labels[0]), ("loss",), {}, origin))
    return out


PRESETS = {"mlp": _mlp}


def expand_preset(spec, embeddings: list[Embedding], dense_dim: int, labels: tuple[str, ...],
                  dense_name: str) -> list[RawLayer]:
    return PRESETS[spec.preset](spec, embeddings, dense_dim, labels, dense_name)
