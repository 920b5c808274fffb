"""Values of ``args:`` maps against the C++ type of the HugeCTR parameter they become (api_table.json's ``type``
facts, read from each release's pybind sources): ``num_samples: 2**63`` is no ``long long``, ``-1`` no ``size_t``,
``1.5`` or ``true`` no ``int``, ``1e39`` no ``float``. Where the table gives no type (enums, strings, objects, maps)
the value keeps the spec's generic check (JSON-like, 64-bit integers)."""

from __future__ import annotations

from ..inputs import DBL_MAX, FLT_MAX, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, UINT32_MAX, UINT64_MAX
from . import api as A

# Inclusive integer ranges and the C++ spelling a message names.
INT_RANGES = {"int32": (INT32_MIN, INT32_MAX, "int"), "uint32": (0, UINT32_MAX, "unsigned int"),
              "int64": (INT64_MIN, INT64_MAX, "long long"), "uint64": (0, UINT64_MAX, "size_t / uint64")}
FLOAT_MAX = {"float32": (FLT_MAX, "float"), "float64": (DBL_MAX, "double")}
_POWERS = {INT32_MAX: "2**31-1", INT32_MIN: "-2**31", UINT32_MAX: "2**32-1", INT64_MAX: "2**63-1",
           INT64_MIN: "-2**63", UINT64_MAX: "2**64-1"}


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return f"a string {value!r}"
    if isinstance(value, (list, dict)):
        return "a list" if isinstance(value, list) else "a mapping"
    return repr(value)


def value_problem(kind: str, value: object) -> str:
    """Why ``value`` cannot be a C++ ``kind`` ('' when it can)."""
    if kind.startswith("list[") and kind.endswith("]"):
        if not isinstance(value, list):
            return f"must be a list ({kind}), not {_shown(value)}"
        for i, v in enumerate(value):
            why = value_problem(kind[5:-1], v)
            if why:
                return f"[{i}] {why}"
        return ""
    if kind in INT_RANGES:
        low, high, cpp = INT_RANGES[kind]
        if not isinstance(value, int) or isinstance(value, bool):
            return f"must be an integer ({cpp}), not {_shown(value)}"
        if not low <= value <= high:
            return (f"{value} does not fit the C++ {cpp} it becomes "
                    f"({_POWERS.get(low, low)} to {_POWERS.get(high, high)})")
        return ""
    if kind in FLOAT_MAX:
        limit, cpp = FLOAT_MAX[kind]
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return f"must be a number ({cpp}), not {_shown(value)}"
        if abs(value) > limit:
            return f"{value!r} does not fit the C++ {cpp} it becomes (at most {limit:.7g} in magnitude)"
        return ""
    return ""    # bool and anything else: HugeCTR's own conversion decides


def arg_problem(func: str, release: str, arg: str, value: object) -> str:
    """Why ``value`` cannot be ``func``'s argument ``arg`` in ``release`` ('' when it can or the type is unknown)."""
    try:
        kind = A.cpp_type(func, release, arg)
    except A.ApiError:
        return ""
    return value_problem(kind, value) if kind else ""
