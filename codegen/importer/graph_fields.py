"""Field readers of a graph JSON (hugectr.md §2): the value types graph_to_json writes, and the two ways a
field can fail: not graph_to_json's at all (:func:`Bad`), or not one release's (:class:`Misfit`)."""

from __future__ import annotations

import json
import math

from ..errors import Located
from ..hugectr import versions as V
from ..render.graph_json import f32

EMBEDDING_TYPES = tuple(V.EMBEDDINGS)
HPARAM_BLOCKS = {  # optimizer type -> (JSON block, fields) (hugectr.md §2.5)
    "Adam": ("adam_hparam", ("beta1", "beta2", "epsilon")),
    "AdaGrad": ("adagrad_hparam", ("epsilon", "initial_accu_value")),
    "MomentumSGD": ("momentum_sgd_hparam", ("momentum_factor",)),
    "Nesterov": ("nesterov_hparam", ("momentum_factor",)),
    "SGD": ("sgd_hparam", ("atomic_update",)),
    "Ftrl": ("ftrl_hparam", ("beta", "lambda1", "lambda2")),
}
OPTIMIZER_DEFAULTS = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-7, "initial_accu_value": 0.0,
                      "momentum_factor": 0.0, "atomic_update": True, "beta": 0.0, "lambda1": 0.0, "lambda2": 0.0}
INITS = ("Uniform", "XavierNorm", "XavierUniform", "Zero")
# DenseLayer arguments written into the spec even when they equal HugeCTR's default (the samples write them).
ALWAYS_WRITTEN = {"num_output", "leading_dim", "num_layers", "out_dim", "weight_dims", "ranges", "selected_slots",
                  "indices", "num_outputs", "dropout_rate"}
_MISSING = object()


def Bad(field: str, message: str, fix: str = "") -> Located:  # noqa: N802 - raised like the class it replaced
    """The JSON is not what graph_to_json writes (any release): refused at once."""
    return Located(message, fix=fix, field=field)


class Misfit(Exception):
    """The JSON is not what one release writes; ``stage`` orders the reasons (later = closer to a fit)."""

    def __init__(self, field: str, message: str, stage: int = 0):
        super().__init__(message)
        self.field, self.message, self.stage = field, message, stage


# ---- reading the document (release-independent) ----------------------------------------------------------------

def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int(v: object, where: str, minimum: int = 0) -> int:
    if not _is_int(v) or v < minimum:
        raise Bad(where, f"expected an integer >= {minimum}, got {_show(v)}")
    return v


def _str(v: object, where: str) -> str:
    if not isinstance(v, str) or not v:
        raise Bad(where, f"expected a non-empty string, got {_show(v)}")
    return v


def _bool(v: object, where: str) -> bool:
    if not isinstance(v, bool):
        raise Bad(where, f"expected true or false, got {_show(v)}")
    return v


def _names(v: object, where: str) -> str | list[str]:
    """A layer's bottom / top: a string for one name, an array for several (hugectr.md §2.6)."""
    if isinstance(v, str) and v:
        return v
    if isinstance(v, list) and len(v) > 1 and all(isinstance(x, str) and x for x in v):
        return list(v)
    raise Bad(where, f"expected a tensor name or an array of several, got {_show(v)}")


def _show(v: object, limit: int = 60) -> str:
    if v is _MISSING:
        return "nothing"
    text = json.dumps(v, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def decimal_of_f32(v: object, where: str) -> float:
    """The shortest decimal that a C++ float widens to ``v`` from (0.8999999761581421 -> 0.9; hugectr.md §2.2)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(float(v)):
        raise Bad(where, f"expected a number, got {_show(v)}")
    d = float(v)
    if f32(d) != d:
        raise Bad(where, f"{v!r} is not a float32 value widened to double, which is what graph_to_json writes")
    for digits in range(1, 18):
        candidate = float(f"{d:.{digits}g}")
        if f32(candidate) == d:
            return candidate
    return d  # pragma: no cover - 9 significant digits always identify a float32


def _keys(obj: object, where: str, required: set[str], optional: set[str] = frozenset(), what: str = "") -> dict:
    if not isinstance(obj, dict):
        raise Bad(where, f"expected an object, got {_show(obj)}")
    missing = sorted(required - set(obj))
    if missing:
        raise Bad(where, f"{what or 'object'} without {', '.join(repr(k) for k in missing)}")
    extra = sorted(set(obj) - required - set(optional))
    if extra:
        raise Bad(f"{where}.{extra[0]}" if where else extra[0],
                  f"graph_to_json writes no {extra[0]!r} {('for ' + what) if what else 'here'}")
    return obj
