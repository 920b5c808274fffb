"""The spec's field types: identifiers, integers bounded by the C++ type they become, floats, ``args:`` maps, and
the strict base model every section derives from."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ..inputs import FLT_MAX, INT32_MAX, INT64_MAX, UINT64_MAX

# Names that become Python identifiers, HugeCTR tensor names, Triton model names or file names.
IDENT = r"^[A-Za-z_][A-Za-z0-9_]*$"
Ident = Annotated[str, Field(pattern=IDENT, max_length=64)]
# Integers are strict (no "2048", true or 1.0) and bounded by the C++ type they become: HugeCTR's counts, sizes,
# iterations and widths are int (CreateSolver, fit, DenseLayer) or size_t used as one, so int32; seed is uint64.
PosInt = Annotated[int, Field(gt=0, le=INT32_MAX, strict=True)]
NonNegInt = Annotated[int, Field(ge=0, le=INT32_MAX, strict=True)]
Uint64 = Annotated[int, Field(ge=0, le=UINT64_MAX, strict=True)]
# Floats take integers (1 is 1.0) but no strings or booleans.
Prob = Annotated[float, Field(ge=0.0, lt=1.0, allow_inf_nan=False, strict=True)]
Float = Annotated[float, Field(allow_inf_nan=False, strict=True)]
# Floats that become a C++ float (CreateSolver, CreateOptimizer, the serving backend): beyond FLT_MAX they would be inf.
Float32 = Annotated[float, Field(ge=-FLT_MAX, le=FLT_MAX, allow_inf_nan=False, strict=True)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, protected_namespaces=(), strict=True)


def _json_like(value: Any, depth: int = 0) -> Any:
    """Argument values of ``args:`` maps: YAML scalars, lists and string-keyed maps (no NaN, not too deep)."""
    if depth > 8:
        raise ValueError("nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if not -INT64_MAX - 1 <= value <= UINT64_MAX:
            raise ValueError(f"{value} does not fit a 64-bit integer")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value
    if isinstance(value, list):
        return [_json_like(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ValueError("map keys must be strings")
        return {k: _json_like(v, depth + 1) for k, v in value.items()}
    raise ValueError(f"unsupported value of type {type(value).__name__}")


def _arg_names(args: dict) -> dict:
    for k in args:
        if not isinstance(k, str) or not k.isidentifier():
            raise ValueError(f"{k!r} is not an argument name")
    return args


# Further arguments of one HugeCTR call, by HugeCTR's own names; checked against the target release's API table.
# Enum members are written "Type.Member" (e.g. "AllReduceAlgo.NCCL"); a map with enum keys as {"AUC": 1.0}. Each
# value is checked on its own, so that a problem names its argument (and its line). The C++ type of the parameter
# it becomes is checked by the build (codegen/hugectr/arg_types.py).
ExtraArgs = Annotated[dict[str, Annotated[Any, AfterValidator(lambda v: _json_like(v))]], AfterValidator(_arg_names)]
# Tensor and column names as HugeCTR accepts them (strings in the graph JSON; emitted as string literals).
TensorName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$", max_length=128)]
