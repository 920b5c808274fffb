"""Field readers of a graph JSON (hugectr.md §2): the value types graph_to_json writes, and the two ways a
field can fail: not graph_to_json's at all (:func:`Bad`, the shared reader's GraphError), or not one release's
(:class:`Misfit`). The value readers (read_int, read_str, read_bool, show) are codegen/hugectr/graph_reader.py's, the
one reader of a graph JSON that ``ctrgen validate`` uses too; what is here is graph_to_json's exact shape."""

from __future__ import annotations

import math

from ..hugectr import api as A
from ..hugectr import versions as V
from ..hugectr.graph_reader import GraphError as Bad
from ..hugectr.graph_reader import show as _show
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
# CreateOptimizer's defaults, read before the release is chosen: the newest release's (every release that has one of
# these fields gives it the same default).
OPTIMIZER_DEFAULTS = A.defaults("CreateOptimizer", A.RELEASES[-1])
INITS = ("Uniform", "XavierNorm", "XavierUniform", "Zero")
# DenseLayer arguments written into the spec even when they equal HugeCTR's default (the samples write them).
ALWAYS_WRITTEN = {"num_output", "leading_dim", "num_layers", "out_dim", "weight_dims", "ranges", "selected_slots",
                  "indices", "num_outputs", "dropout_rate"}


class Misfit(Exception):
    """The JSON is not what one release writes; ``stage`` orders the reasons (later = closer to a fit)."""

    def __init__(self, field: str, message: str, stage: int = 0):
        super().__init__(message)
        self.field, self.message, self.stage = field, message, stage


# ---- exact shapes (what graph_to_json writes, beyond what the shared reader takes) -----------------------------

def _names(v: object, where: str) -> str | list[str]:
    """A layer's bottom / top: a string for one name, an array for several (hugectr.md §2.6)."""
    if isinstance(v, str) and v:
        return v
    if isinstance(v, list) and len(v) > 1 and all(isinstance(x, str) and x for x in v):
        return list(v)
    raise Bad(where, f"expected a tensor name or an array of several, got {_show(v)}")


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
