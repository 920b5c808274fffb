"""Values of ``args:`` maps against the C++ type of the HugeCTR parameter they become (api_table.json's ``type``
facts, read from each release's pybind sources): ``num_samples: 2**63`` is no ``long long``, ``-1`` no ``size_t``,
``1.5`` or ``true`` no ``int``, ``1e39`` no ``float``, ``'yes'`` no ``bool``. An enum parameter takes
``"Type.Member"`` with a member the release has (``data_reader_type: Parquet`` would reach HugeCTR as a string).
Where the table gives no type (strings, objects, maps) the value keeps the spec's generic check (JSON-like, 64-bit
integers)."""

from __future__ import annotations

import re
from functools import lru_cache

from ..inputs import DBL_MAX, FLT_MAX, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, UINT32_MAX, UINT64_MAX
from . import api as A

# Inclusive integer ranges and the C++ spelling a message names.
INT_RANGES = {"int32": (INT32_MIN, INT32_MAX, "int"), "uint32": (0, UINT32_MAX, "unsigned int"),
              "int64": (INT64_MIN, INT64_MAX, "long long"), "uint64": (0, UINT64_MAX, "size_t / uint64")}
FLOAT_MAX = {"float32": (FLT_MAX, "float"), "float64": (DBL_MAX, "double")}
_POWERS = {INT32_MAX: "2**31-1", INT32_MIN: "-2**31", UINT32_MAX: "2**32-1", INT64_MAX: "2**63-1",
           INT64_MIN: "-2**63", UINT64_MAX: "2**64-1"}


# Enum parameters the bindings declare without a default, so the table's defaults cannot name their type: the C++
# parameter type of the pybind signatures (``hugectr::DataReaderType_t data_reader_type``, ...).
REQUIRED_ENUM_PARAMS = {"data_reader_type": "DataReaderType_t", "layer_type": "Layer_t",
                        "group_layer_type": "GroupLayer_t", "embedding_type": "Embedding_t",
                        "tensor_type": "Tensor_t", "hybrid_embedding_type": "HybridEmbeddingType",
                        "communication_type": "CommunicationType"}
_ENUM_DEFAULT = re.compile(r"^(?:inference\.)?([A-Za-z_][A-Za-z0-9_]*)\.[A-Za-z_][A-Za-z0-9_]*$")


@lru_cache(maxsize=None)
def enum_type(func: str, arg: str) -> str | None:
    """The enum type ``func``'s parameter ``arg`` takes (from its "Type.Member" default in any release, else from
    REQUIRED_ENUM_PARAMS); None for a parameter of another type."""
    enums = A.enums()
    for release in reversed(A.RELEASES):
        if not A.has(func, release):
            continue
        for p in A.signature(func, release):
            if p.name == arg and isinstance(p.default, str):
                m = _ENUM_DEFAULT.match(p.default)
                if m and (m[1] in enums or f"inference.{m[1]}" in enums):
                    return m[1] if m[1] in enums else f"inference.{m[1]}"
    return REQUIRED_ENUM_PARAMS.get(arg)


def enum_problem(enum: str, release: str, value: object) -> str:
    """Why ``value`` is no member of ``enum`` in ``release`` ('' when it is one)."""
    short = enum.rpartition(".")[2]
    members = A.enum_members(enum, release) if A.has(enum, release) else ()
    example = f"{short}.{members[0]}" if members else f"{short}.Member"
    if not isinstance(value, str) or "." not in value:
        return f"takes a {short} member written {short}.Member (e.g. {example}), not {_shown(value)}"
    head, _, member = value.rpartition(".")
    if head.rpartition(".")[2] != short:
        return f"takes a {short} member, not a {head} one"
    if member not in members:
        try:
            why = A.missing(f"{enum}.{member}", release) or ""
        except A.ApiError as exc:
            why = str(exc)
        return f"{why} (HugeCTR {release} has {', '.join(f'{short}.{m}' for m in members)})"
    return ""


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
    if kind == "bool" and not isinstance(value, bool):
        return f"must be true or false (bool), not {_shown(value)}"
    return ""    # anything else: HugeCTR's own conversion decides


def arg_problem(func: str, release: str, arg: str, value: object) -> str:
    """Why ``value`` cannot be ``func``'s argument ``arg`` in ``release`` ('' when it can or the type is unknown)."""
    try:
        kind = A.cpp_type(func, release, arg)
        enum = None if kind else enum_type(func, arg)
    except A.ApiError:
        return ""
    if enum is not None:
        return enum_problem(enum, release, value)
    return value_problem(kind, value) if kind else ""


# ---- DenseLayer's arguments ----------------------------------------------------------------------------------------
# The same table, with DenseLayer's own messages: every integer (a width, a count, an axis, an index) is also bounded
# by 2**31-1 like the spec's own integers, so 10**12 is refused as no sane width even where the type is size_t.
_DENSE_INTS = {"uint64": (0, "size_t"), "int32": (INT32_MIN, "int"), "int64": (INT32_MIN, "int64_t")}


def _got(value: object) -> str:
    for t, kind in ((bool, "a boolean"), (str, "a string"), (float, "a float"), (int, "an integer")):
        if isinstance(value, t):
            return f"{kind} {value!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _dense_value_problem(kind: str, value: object) -> str:
    if kind in _DENSE_INTS:
        low, cpp = _DENSE_INTS[kind]
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be an integer ({cpp}), not {_got(value)}"
        if not low <= value <= INT32_MAX:
            return f"{value} is out of range ({cpp}: from {_POWERS.get(low, low)} to 2**31-1)"
        return ""
    if kind == "bool":
        return "" if isinstance(value, bool) else f"must be true or false, not {_got(value)}"
    if kind in FLOAT_MAX:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return f"must be a number, not {_got(value)}"
        return value_problem(kind, value)
    return ""


def dense_layer_type(release: str, name: str) -> str | None:
    """The table's C++ type of DenseLayer argument ``name`` in ``release`` (None: not a number, bool or list)."""
    try:
        return A.cpp_type("DenseLayer", release, name)
    except A.ApiError:
        return None


def dense_layer_problem(release: str, name: str, value: object) -> str:
    """Why ``value`` cannot be DenseLayer argument ``name`` of ``release`` ('' when it can), by the C++ type the
    table gives it; ``ranges`` (pairs of int, which the table does not type) is checked here too."""
    kind = dense_layer_type(release, name)
    if name == "ranges":
        if not isinstance(value, (list, tuple)) or not all(isinstance(r, (list, tuple)) and len(r) == 2
                                                             for r in value):
            return "must be a list of [start, end] pairs"
        for i, r in enumerate(value):
            for v in r:
                why = _dense_value_problem("int32", v)
                if why:
                    return f"[{i}] {why}"
        return ""
    if kind is None:
        return ""
    if kind.startswith("list[") and kind.endswith("]"):
        if not isinstance(value, (list, tuple)):
            return f"must be a list, not {_got(value)}"
        for i, v in enumerate(value):
            why = _dense_value_problem(kind[5:-1], v)
            if why:
                return f"[{i}] {why}"
        return ""
    return _dense_value_problem(kind, value)
