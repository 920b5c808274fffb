"""Every preset by name: the core families (presets.py), NCF (presets_ncf.py), the behaviour-sequence models
(presets_seq.py) and the multi-task ones (presets_multitask.py). Kept apart from presets.py so the family modules
can build on its Ctx without an import circle."""

from __future__ import annotations

from ..hugectr.versions import Profile
from . import presets, presets_multitask, presets_ncf, presets_seq
from .ir import Embedding
from .presets import Ctx, RawLayer

PRESETS = {**presets.PRESETS, **presets_ncf.PRESETS, **presets_seq.PRESETS, **presets_multitask.PRESETS}


def expand_preset(spec, embeddings: list[Embedding], dense_dim: int, labels: tuple[str, ...], dense_name: str,
                  profile: Profile) -> list[RawLayer]:
    ctx = Ctx(spec=spec, embeddings=embeddings, dense_dim=dense_dim, label=labels[0], dense_name=dense_name,
              profile=profile, labels=labels)
    PRESETS[spec.preset](ctx)
    return ctx.layers
