"""pybind11-style argument binding against the signature of the target release.

A parameter is (name, default, kind, span). Positional arguments bind in declaration order; unknown keywords,
missing required arguments and wrongly typed values raise TypeError naming the function, the argument and the
release (and, for an argument of another release, the releases that have it).
"""

from __future__ import annotations

import operator

from ._enums import ENUMS, Member
from ._release import ALL, NAME, Span

REQUIRED = object()


class P:
    __slots__ = ("name", "default", "kind", "span")

    def __init__(self, name: str, default=REQUIRED, kind: str = "any", span: Span = ALL):
        self.name, self.default, self.kind, self.span = name, default, kind, span


def _is_int(v) -> bool:
    """pybind11's int caster: ints and objects with __index__ (numpy integers), never floats or arrays."""
    return not isinstance(v, (float, str, Member)) and hasattr(type(v), "__index__") and not hasattr(v, "__len__")


def _is_seq(v) -> bool:
    """pybind11's std::vector caster: any sequence except str/bytes (lists, tuples, numpy arrays)."""
    return not isinstance(v, (str, bytes, dict)) and hasattr(v, "__len__") and hasattr(v, "__getitem__")


def _kind_ok(kind: str, v) -> bool:
    if kind == "any":
        return True
    if kind == "int":
        return _is_int(v)
    if kind == "float":
        return _is_int(v) or (not isinstance(v, (str, Member)) and hasattr(type(v), "__float__"))
    if kind == "bool":
        return isinstance(v, bool) or _is_int(v) or type(v).__name__ == "bool_"
    if kind == "str":
        return isinstance(v, str)
    if kind == "list":
        return _is_seq(v)
    if kind.startswith("list["):
        inner = kind[5:-1]
        return _is_seq(v) and all(_kind_ok(inner, x) for x in v)
    if kind in ENUMS:
        return isinstance(v, Member) and v.enum == kind
    if kind.startswith("obj:"):
        return type(v).__name__ in kind[4:].split("|")
    raise AssertionError(kind)


def _convert(kind: str, v):
    """The C++ value pybind11 would hand over: Python ints, floats, bools and lists."""
    if kind == "int":
        return operator.index(v)
    if kind == "float":
        return float(v)
    if kind == "bool":
        return bool(v)
    if kind == "list":
        return list(v)
    if kind.startswith("list["):
        return [_convert(kind[5:-1], x) for x in v]
    return v


def _kind_text(kind: str) -> str:
    if kind in ENUMS:
        return f"a hugectr.{kind} member"
    if kind.startswith("obj:"):
        return " or ".join(f"a hugectr.{k}" for k in kind[4:].split("|"))
    return kind


def bind(qualname: str, params: list[P], args: tuple, kwargs: dict) -> dict:
    live = [p for p in params if p.span.covers()]
    names = {p.name: p for p in live}
    if len(args) > len(live):
        raise TypeError(f"{qualname}() takes at most {len(live)} positional arguments in HugeCTR {NAME} "
                        f"({len(args)} given)")
    out = {p.name: a for p, a in zip(live, args)}
    for k, v in kwargs.items():
        if k not in names:
            other = next((p for p in params if p.name == k), None)
            if other is not None:
                raise TypeError(f"{qualname}() got an unexpected keyword argument {k!r}: HugeCTR {NAME} does not "
                                f"have it (it exists in {other.span.describe()})")
            accepted = f"arguments: {', '.join(names)}" if names else "it takes no arguments"
            raise TypeError(f"{qualname}() got an unexpected keyword argument {k!r} in HugeCTR {NAME}; {accepted}")
        if k in out:
            raise TypeError(f"{qualname}() got multiple values for argument {k!r}")
        out[k] = v
    for p in live:
        if p.name not in out:
            if p.default is REQUIRED:
                raise TypeError(f"{qualname}() missing required argument {p.name!r} (HugeCTR {NAME})")
            d = p.default
            out[p.name] = d() if callable(d) and not isinstance(d, Member) else d
        elif not _kind_ok(p.kind, out[p.name]):
            v = out[p.name]
            raise TypeError(f"{qualname}(): argument {p.name!r} must be {_kind_text(p.kind)}, got "
                            f"{type(v).__name__} {v!r}")
        else:
            out[p.name] = _convert(p.kind, out[p.name])
    return out
