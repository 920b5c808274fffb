"""pybind11-style argument binding against the signature of the target release.

A parameter is (name, default, kind, span). Positional arguments bind in declaration order; unknown keywords,
missing required arguments and wrongly typed values raise TypeError naming the function, the argument and the
release (and, for an argument of another release, the releases that have it).
"""

from __future__ import annotations

from ._enums import ENUMS, Member
from ._release import ALL, NAME, Span

REQUIRED = object()


class P:
    __slots__ = ("name", "default", "kind", "span")

    def __init__(self, name: str, default=REQUIRED, kind: str = "any", span: Span = ALL):
        self.name, self.default, self.kind, self.span = name, default, kind, span


def _kind_ok(kind: str, v) -> bool:
    if kind == "any":
        return True
    if kind == "int":
        return isinstance(v, int) and not isinstance(v, Member)
    if kind == "float":
        return isinstance(v, (int, float)) and not isinstance(v, Member)
    if kind == "bool":
        return isinstance(v, (bool, int)) and not isinstance(v, Member)
    if kind == "str":
        return isinstance(v, str)
    if kind == "list":
        return isinstance(v, (list, tuple))
    if kind.startswith("list["):
        inner = kind[5:-1]
        return isinstance(v, (list, tuple)) and all(_kind_ok(inner, x) for x in v)
    if kind in ENUMS:
        return isinstance(v, Member) and v.enum == kind
    if kind.startswith("obj:"):
        return type(v).__name__ in kind[4:].split("|")
    raise AssertionError(kind)


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
            raise TypeError(f"{qualname}() got an unexpected keyword argument {k!r} in HugeCTR {NAME}; "
                            f"arguments: {', '.join(names)}")
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
    return out
