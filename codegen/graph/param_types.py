"""The C++ types of DenseLayer's numeric arguments (HugeCTR's pybind DenseLayer constructor), so that a value is
refused when it is not of that type or does not fit it: ``num_output: "10"``, ``true`` or ``10.0`` is no size_t,
``10**12`` no sane width. size_t arguments are bounded by 2**31-1 like the spec's own integers."""

from __future__ import annotations

from ..inputs import INT32_MAX, INT32_MIN

SIZE_T = {"num_output", "num_layers", "leading_dim", "time_step", "batchsize", "SeqLength", "vector_size",
          "projection_dim", "out_dim"}
INT = {"axis", "max_sequence_len", "num_attention_heads", "max_sequence_len_from", "max_sequence_len_to", "dim"}
BOOL = {"selected", "transpose_b", "use_regularizer", "use_bias"}
SIZE_T_LISTS = {"weight_dims", "num_outputs"}
INT_LISTS = {"selected_slots", "indices", "shape", "index"}
FLOAT_LISTS = {"target_weight_vec"}
BOOL_LISTS = {"biases"}


def _got(value: object) -> str:
    for t, kind in ((bool, "a boolean"), (str, "a string"), (float, "a float"), (int, "an integer")):
        if isinstance(value, t):
            return f"{kind} {value!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _number_problem(value: object) -> str:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return "" if ok else f"must be a number, not {_got(value)}"


def _int_problem(value: object, low: int, what: str) -> str:
    if not isinstance(value, int) or isinstance(value, bool):
        return f"must be an integer ({what}), not {_got(value)}"
    if not low <= value <= INT32_MAX:
        return f"{value} is out of range ({what}: from {low} to 2**31-1)"
    return ""


def param_problem(name: str, value: object, floats: set[str] | frozenset[str]) -> str:
    """Why ``value`` cannot be DenseLayer argument ``name`` ('' when it can)."""
    if name in SIZE_T:
        return _int_problem(value, 0, "size_t")
    if name in INT:
        return _int_problem(value, INT32_MIN, "int")
    if name in BOOL:
        return "" if isinstance(value, bool) else f"must be true or false, not {_got(value)}"
    if name in floats:
        return _number_problem(value)
    lists = {**dict.fromkeys(SIZE_T_LISTS, "size"), **dict.fromkeys(INT_LISTS, "int"),
             **dict.fromkeys(FLOAT_LISTS, "float"), **dict.fromkeys(BOOL_LISTS, "bool")}
    if name in lists:
        if not isinstance(value, (list, tuple)):
            return f"must be a list, not {_got(value)}"
        for i, v in enumerate(value):
            kind = lists[name]
            if kind == "size":
                why = _int_problem(v, 0, "size_t")
            elif kind == "int":
                why = _int_problem(v, INT32_MIN, "int")
            elif kind == "float":
                why = _number_problem(v)
            else:
                why = "" if isinstance(v, bool) else f"must be true or false, not {_got(v)}"
            if why:
                return f"[{i}] {why}"
    if name == "ranges":
        if not isinstance(value, (list, tuple)) or not all(isinstance(r, (list, tuple)) and len(r) == 2
                                                             for r in value):
            return "must be a list of [start, end] pairs"
        for i, r in enumerate(value):
            for v in r:
                why = _int_problem(v, INT32_MIN, "int")
                if why:
                    return f"[{i}] {why}"
    return ""
