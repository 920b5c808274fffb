"""HugeCTR's Python API by release: which functions, parameters, defaults and enum members each release has.

The facts live in ``api_table.json`` beside this module, extracted from each release's own pybind sources by
``tools/hugectr_api.py`` (never edited by hand). Names:

* functions: ``"CreateSolver"``, ``"DataReaderParams"`` (a class: its constructor), ``"Model.fit"`` (a method),
  ``"inference.InferenceParams"`` / ``"data.DataSourceParams"`` (submodules);
* enum types: ``"Layer_t"``; enum members: ``"Layer_t.MultiHeadAttention"``;
* a parameter: ``has("CreateSolver", "3.3", arg="model_name")``.

Defaults are JSON values; enum defaults are ``"Type.Member"`` strings; a C++ default that is no plain value is an
:class:`Unparsed` string (its source text). Parameters of overloaded functions are merged (see
``tools/hugectr_api.py``); ``required`` means no overload lets the argument be left out.
"""

from __future__ import annotations

import json
from functools import lru_cache
import os
from typing import Any, NamedTuple

__all__ = ["RELEASES", "ApiError", "NO_DEFAULT", "Param", "Unparsed", "cpp_type", "default", "defaults", "describe",
           "enum_members", "enums", "first_release", "functions", "functions_ever", "has", "members_ever", "missing", "params_ever",
           "release_key", "require", "signature", "spans"]


class Unparsed(str):
    """A default that is a C++ expression ctrgen cannot turn into a value (kept as its source text)."""

    def __repr__(self) -> str:
        return f"Unparsed({str.__repr__(self)})"


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __bool__(self) -> bool:
        return False


NO_DEFAULT: Any = _NoDefault()  # the default of a required parameter (or of one only some overloads have)


class Param(NamedTuple):
    name: str
    default: Any
    required: bool


class ApiError(KeyError):
    """A name or release the table does not have; str() is the message."""

    def __str__(self) -> str:
        return str(self.args[0])


Span = tuple[int, int]  # indexes into RELEASES: since, until (exclusive)


class _Table:
    def __init__(self, raw: dict):
        self.releases: tuple[str, ...] = tuple(raw["releases"])
        self.tags: dict[str, str] = dict(raw["tags"])
        self.index = {r: k for k, r in enumerate(self.releases)}
        end = len(self.releases)
        self.funcs: dict[str, list[Span]] = {}
        self.enums: dict[str, list[Span]] = {}
        self.members: dict[tuple[str, str], list[Span]] = {}
        self.params: dict[str, list[tuple[Span, dict]]] = {}
        self.param_spans: dict[tuple[str, str], list[Span]] = {}
        self.types: dict[tuple[str, str], list[tuple[Span, str]]] = {}   # (func, param) -> C++ type by span
        for f in raw["facts"]:
            span = (self.index[f["since"]], self.index[f["until"]] if f["until"] is not None else end)
            kind = f["kind"]
            if kind == "function":
                self.funcs.setdefault(f["name"], []).append(span)
            elif kind == "enum":
                self.enums.setdefault(f["name"], []).append(span)
            elif kind == "member":
                self.members.setdefault((f["enum"], f["name"]), []).append(span)
            elif kind == "param":
                self.params.setdefault(f["func"], []).append((span, f))
                self.param_spans.setdefault((f["func"], f["name"]), []).append(span)
            elif kind == "type":
                self.types.setdefault((f["func"], f["name"]), []).append((span, f["type"]))
        for table in (self.funcs, self.enums, self.members, self.param_spans):
            for key, value in table.items():
                table[key] = _merge(value)


def _merge(spans: list[Span]) -> list[Span]:
    out: list[Span] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


@lru_cache(maxsize=1)
def _table() -> _Table:
    with open(os.path.join(os.path.dirname(__file__), "api_table.json"), encoding="utf-8") as f:
        return _Table(json.load(f))


RELEASES: tuple[str, ...] = _table().releases  # oldest first
# The tag each release's facts were read at (its newest patch tag, except 3.2 = v3.2: tools/hugectr_api.py says why).
TAGS: dict[str, str] = _table().tags


def release_key(name: str) -> tuple[int, int]:
    """Sort key of a release name: "3.2" -> (3, 2), "23.04" -> (23, 4)."""
    try:
        major, minor = name.split(".")
        return int(major), int(minor)
    except (ValueError, AttributeError):
        raise ApiError(f"not a HugeCTR release name: {name!r} (use e.g. '3.3' or '23.06')") from None


def _rel(release: str) -> int:
    t = _table()
    if release not in t.index:
        raise ApiError(f"HugeCTR {release} is not a known release; known: {', '.join(t.releases)}")
    return t.index[release]


def _lookup(name: str, arg: str | None) -> tuple[str, list[Span]]:
    """(what it is, its spans); raises ApiError for a name no release has."""
    t = _table()
    if arg is not None:
        if name not in t.funcs:
            raise ApiError(f"{name} is not a HugeCTR function in any release")
        spans = t.param_spans.get((name, arg))
        if spans is None:
            raise ApiError(f"{name}({arg}=...) is not an argument of {name} in any HugeCTR release")
        return f"{name} argument {arg!r}", spans
    if name in t.funcs:
        return name, t.funcs[name]
    if name in t.enums:
        return f"enum {name}", t.enums[name]
    enum, _, member = name.rpartition(".")
    if enum in t.enums:
        spans = t.members.get((enum, member))
        if spans is None:
            raise ApiError(f"{name} is not a member of {enum} in any HugeCTR release")
        return name, spans
    raise ApiError(f"{name} is not a HugeCTR function, class or enum in any release")


def spans(name: str, arg: str | None = None) -> tuple[tuple[str, str | None], ...]:
    """The (since, until) release names where ``name`` (or its argument ``arg``) exists; until None = still there."""
    t = _table()
    _, sp = _lookup(name, arg)
    return tuple((t.releases[a], t.releases[b] if b < len(t.releases) else None) for a, b in sp)


def has(name: str, release: str, arg: str | None = None) -> bool:
    """Whether ``release`` has the function/class/method, enum type or ``Enum.Member`` ``name`` (or, with ``arg``,
    that argument of function ``name``). A name no release has is False."""
    k = _rel(release)
    try:
        _, sp = _lookup(name, arg)
    except ApiError:
        return False
    return any(a <= k < b for a, b in sp)


def first_release(name: str, arg: str | None = None) -> str:
    """The first release that has it (ApiError if none does)."""
    _, sp = _lookup(name, arg)
    return _table().releases[sp[0][0]]


def describe(name: str, arg: str | None = None) -> str:
    """'HugeCTR 3.7 up to (not including) 23.12', 'HugeCTR 4.3 and later' (spans joined with 'and')."""
    parts = []
    for since, until in spans(name, arg):
        parts.append(f"{since} and later" if until is None else f"{since} up to (not including) {until}")
    return "HugeCTR " + " and ".join(parts)


def missing(name: str, release: str, arg: str | None = None) -> str | None:
    """None if ``release`` has it, else the message naming the releases that do."""
    if has(name, release, arg):
        return None
    what, _ = _lookup(name, arg)
    return f"{what} is not in HugeCTR {release}; it exists in {describe(name, arg)}"


def require(name: str, release: str, arg: str | None = None) -> None:
    msg = missing(name, release, arg)
    if msg:
        raise ApiError(msg)


def functions_ever() -> tuple[str, ...]:
    """Every function, class and method of any release, sorted."""
    return tuple(sorted(_table().funcs))


def enums() -> frozenset[str]:
    """Every enum type of any release."""
    return frozenset(_table().enums)


def members_ever(enum: str) -> tuple[str, ...]:
    """Every member ``enum`` has in any release, sorted."""
    return tuple(sorted(m for e, m in _table().members if e == enum))


@lru_cache(maxsize=None)
def params_ever(func: str) -> tuple[str, ...]:
    """Every parameter ``func`` has in any release: the newest release's order, then older names."""
    out: dict[str, None] = {}
    for release in reversed(RELEASES):
        if has(func, release):
            out.update((p.name, None) for p in signature(func, release))
    return tuple(out)


@lru_cache(maxsize=None)
def signature(func: str, release: str) -> tuple[Param, ...]:
    """The parameters of ``func`` in ``release``, in order."""
    require(func, release)
    k = _rel(release)
    facts = {f["name"]: f for (a, b), f in _table().params.get(func, ()) if a <= k < b}
    after = {f["after"]: f for f in facts.values()}
    out = []
    prev = None
    while prev in after:
        f = after[prev]
        default = NO_DEFAULT
        if "default" in f:
            default = Unparsed(f["default"]) if f.get("unparsed") else f["default"]
        out.append(Param(f["name"], default, bool(f.get("required"))))
        prev = f["name"]
    if len(out) != len(facts):
        raise AssertionError(f"api_table.json: broken parameter order of {func} in {release}")
    return tuple(out)


def default(func: str, arg: str, release: str) -> Any:
    """HugeCTR's default of argument ``arg`` of ``func`` in ``release``: the one place a generator reads one (no
    literal copy beside the table). An argument the release lacks, one without a default or one whose C++ default
    is no plain value is an ApiError, never a guess."""
    for p in signature(func, release):
        if p.name == arg:
            if p.default is NO_DEFAULT or isinstance(p.default, Unparsed):
                raise ApiError(f"{func}({arg}=...) has no plain default in HugeCTR {release}")
            return p.default
    raise ApiError(f"{func} has no argument {arg!r} in HugeCTR {release}")


def defaults(func: str, release: str) -> dict[str, Any]:
    """Every argument of ``func`` in ``release`` that has a plain default -> that default, in order (required ones
    and C++ expressions left out)."""
    return {p.name: p.default for p in signature(func, release)
            if p.default is not NO_DEFAULT and not isinstance(p.default, Unparsed)}


def given_or_default(given: Any, func: str, arg: str, release: str) -> Any:
    """``given[arg]`` where ``given`` (a dict or (name, value) pairs, as the model keeps call arguments) has it,
    else :func:`default` (the table's, refused where it has none)."""
    args = dict(given)
    return args[arg] if arg in args else default(func, arg, release)


def cpp_type(func: str, release: str, arg: str) -> str | None:
    """The C++ type argument ``arg`` of ``func`` has in ``release``, as the table names it (``int32``, ``int64``,
    ``uint64`` for size_t, ``float32``, ``bool``, ``list[int64]``, ...); None where it is no number, bool or list of
    them, or the bindings do not say."""
    k = _rel(release)
    return next((t for (a, b), t in _table().types.get((func, arg), ()) if a <= k < b), None)


def enum_members(enum: str, release: str) -> tuple[str, ...]:
    """The members of enum ``enum`` in ``release``, sorted."""
    require(enum, release)
    k = _rel(release)
    return tuple(sorted(m for (e, m), sp in _table().members.items()
                        if e == enum and any(a <= k < b for a, b in sp)))


def functions(release: str) -> tuple[str, ...]:
    """Every function, class and method ``release`` has, sorted."""
    k = _rel(release)
    return tuple(sorted(n for n, sp in _table().funcs.items() if any(a <= k < b for a, b in sp)))
