"""The values of a script read statically: what the evaluator knows, what it cannot know, and what hugectr made.

A known value is a plain Python value (numbers, strings, ``None``, lists, tuples, dicts, sets, ranges) built with
the same operations CPython performs, so it is the value the script computes. :class:`Unknown` stands for a value
that exists only when the script runs (an environment lookup, a file, a call the reader does not model, an object's
``str``); it remembers where it came from and why, and reaches a hugectr argument only as a refusal.
:class:`Call` and :class:`Obj` are what hugectr calls return.
"""

from __future__ import annotations

import math
import posixpath
from dataclasses import dataclass, field, replace

from ..graph.ir import Enum


@dataclass(frozen=True)
class Unknown:
    """A value the static reader cannot know; ``text`` is its source, ``why`` the reason (may be empty)."""

    text: str
    line: int
    col: int | None = None
    why: str = ""

    def __repr__(self) -> str:
        return f"<unknown {self.text!r} at line {self.line}>"


@dataclass(frozen=True, repr=False)
class HomePath(Unknown):
    """``os.path.expanduser("~" + rest)`` where the script runs, kept as that expression: the home folder there
    (``HOME`` without its trailing ``/``) followed by ``rest``, which is ``""`` (``expanduser("~")`` alone: ``"/"``
    when ``HOME`` is ``"/"``) or starts with ``/``. An :class:`Unknown` to everything but the operations whose result
    is again of this form (:meth:`plus`, :meth:`joined`, an f-string that only appends) and the hugectr path arguments
    that keep it (``spec``: ``"~" + rest``, which model.py writes as ``os.path.expanduser(...)`` again)."""

    rest: str = ""

    @property
    def spec(self) -> str:
        return "~" + self.rest

    def plus(self, text: object) -> HomePath | None:
        """``self + text``, or None where that is not of this form: ``text`` not a str, or ``rest`` empty
        (``expanduser("~") + "a"`` is ``"/a"`` when HOME is ``/``; ``"~a"`` in a spec would name user a's home)."""
        if type(text) is not str or not self.rest:
            return None
        return replace(self, rest=self.rest + text)

    def joined(self, parts: list) -> object | None:
        """``os.path.join(self, *parts)``: ``posixpath.join`` of ``rest`` (``"/"`` for the bare home folder, which
        joins the same: ``H + "/" + part``); a part that starts with ``/`` discards the home folder, as it does in
        ``join``, and the result is that literal path."""
        if not all(type(p) is str for p in parts):
            return None
        if not parts:
            return self
        joined = posixpath.join(self.rest or "/", *parts)
        return joined if any(p.startswith("/") for p in parts) else replace(self, rest=joined)

    def __repr__(self) -> str:
        return f"<home path {self.spec!r} at line {self.line}>"


@dataclass(frozen=True, repr=False)
class EnvPath(HomePath):
    """``os.environ.get(name, default)`` where the script runs, kept as that expression: the variable's value there
    (``default`` where it is unset, itself a spec path: ``~/...`` is the home folder) followed by ``rest``, appended
    or (``joined``) through ``os.path.join``. The spec writes it ``${name-default}rest`` or ``${name-default}/rest``
    (codegen.runtime.contract.env_path), which model.py reads with ``os.environ.get`` again. Only the operations whose
    result is exact whatever the value is keep it: appending text (not a "/" right after the bare value, which the
    spec form would read as a join) and ``os.path.join`` with a first part that is relative and not empty."""

    name: str = ""
    default: str = ""
    joined_: bool = False

    @property
    def spec(self) -> str:
        return f"${{{self.name}-{self.default}}}" + ("/" if self.joined_ else "") + self.rest

    def plus(self, text: object) -> HomePath | None:
        if type(text) is not str or (not self.rest and not self.joined_ and text.startswith("/")):
            return None
        return replace(self, rest=self.rest + text)

    def joined(self, parts: list) -> object | None:
        if not all(type(p) is str for p in parts):
            return None
        if not parts:
            return self
        if any(p.startswith("/") for p in parts):
            return posixpath.join("x", *parts)          # an absolute part discards the value, as join does
        if self.rest:                                   # the value's end is known: rest's
            return replace(self, rest=posixpath.join(self.rest, *parts))
        if not parts[0]:
            return None                                 # join(value, "") depends on how the value ends
        return replace(self, rest=posixpath.join(*parts), joined_=True)

    def __repr__(self) -> str:
        return f"<environment path {self.spec!r} at line {self.line}>"


@dataclass(frozen=True)
class Obj:
    """The result of a stateful hugectr call or method (a model, a solver, an LR scheduler, ...)."""

    type: str            # "Model", "CreateSolver", "Model.get_learning_rate_scheduler", ...
    call_id: int         # index of the creating Call in Script.all_calls (-1: unknown)


@dataclass(eq=False)
class Call:
    """One hugectr call; compared by identity, as the object it returns is in Python."""

    func: str                                   # "CreateSolver", "DenseLayer", "Model.add", "inference.X", ...
    args: list                                  # positional values
    kwargs: list[tuple[str, object]]            # keyword values, in source order
    line: int
    nested: bool = False                        # an argument of another hugectr call (a value, not a statement)
    in_loop: bool = False                       # made inside a loop body whose length is not known
    receiver: str | None = None                 # variable name of the object a method was called on

    def arg(self, name: str, position: int | None = None, default: object = None) -> object:
        for k, v in self.kwargs:
            if k == name:
                return v
        if position is not None and position < len(self.args):
            return self.args[position]
        return default

    def has(self, name: str, position: int | None = None) -> bool:
        return any(k == name for k, _ in self.kwargs) or (position is not None and position < len(self.args))


@dataclass
class Script:
    filename: str
    statements: list[Call] = field(default_factory=list)   # top-level hugectr calls, in execution order
    all_calls: list[Call] = field(default_factory=list)
    notes: list[tuple[int, str]] = field(default_factory=list)   # (line, what the reader assumed)
    loops: list[int] = field(default_factory=list)          # lines of loops with hugectr calls it could not unroll
    loop_calls: list[tuple[list[str], str]] = field(default_factory=list)   # each loop's hugectr functions, why
    unread: list[tuple[int, str]] = field(default_factory=list)   # classes that build a model (not followed)
    argv_read: bool = False                                  # the script reads its command line (argparse, sys.argv)
    required_args: list[str] = field(default_factory=list)   # required argparse options no command line gave
    written: dict[str, str | None] = field(default_factory=dict)   # files open(NAME, "w").write(...) writes (.files)
    written_why: dict[str, tuple[int, str]] = field(default_factory=dict)   # why a written file's text is unknown
    written_at: dict[str, int] = field(default_factory=dict)   # the line of each written file's open()
    unfollowed: list[tuple[int, str]] = field(default_factory=list)   # (line, module) imports of no file found

    def count(self, func: str) -> int:
        return sum(1 for c in self.all_calls if c.func == func)


class Namespace(dict):
    """An ``argparse.Namespace`` (attributes), or the known constants of a third-party module (known_modules)."""


class ModuleConstants(Namespace):
    """The known constants of a third-party module (known_modules); its other attributes are unknown."""


# ---- what may be handed to CPython's own operations -------------------------------------------------------------
_SCALARS = (int, float, str, bytes, type(None))   # bool is an int
_VIEWS: tuple[type, ...] = (type({}.keys()), type({}.values()), type({}.items()))


def plain(v: object, depth: int = 0) -> bool:
    """A value made only of numbers, strings, None and the built-in containers: CPython's operations on it (compare,
    hash, add, format, ...) give the script's result. Namespaces, hugectr objects and unknowns are not plain."""
    if depth > 50:
        return False
    t = type(v)
    if t in _SCALARS or t is bool or t is range:
        return True
    if t in (list, tuple, set, frozenset) or t in _VIEWS:
        return all(plain(x, depth + 1) for x in v)  # type: ignore[attr-defined]
    if t is dict:
        return all(plain(k, depth + 1) and plain(x, depth + 1) for k, x in v.items())  # type: ignore[attr-defined]
    if t is slice:
        return plain((v.start, v.stop, v.step), depth + 1)  # type: ignore[attr-defined]
    return False


def comparable(v: object) -> bool:
    """Plain, or a hugectr enum member (pybind enums compare and hash by value)."""
    if isinstance(v, Enum):
        return True
    if type(v) in (list, tuple, frozenset, set):
        return all(comparable(x) for x in v)  # type: ignore[attr-defined]
    return plain(v)


def stable_hash(v: object) -> bool:
    """Hashes that do not depend on PYTHONHASHSEED (numbers, None, tuples of them): a set of such values iterates in
    the same order in every CPython process; a set of strings does not."""
    t = type(v)
    if t in (int, float, bool, type(None)):
        return True
    if t in (tuple, frozenset):
        return all(stable_hash(x) for x in v)  # type: ignore[attr-defined]
    return False


def ordered(v: object) -> bool:
    """Iterating ``v`` gives the same order as in the running script (every container but a set of strings)."""
    if type(v) in (set, frozenset):
        return all(stable_hash(x) for x in v)  # type: ignore[attr-defined]
    return True


def printable(v: object, depth: int = 0) -> bool:
    """``str``/``repr``/``format`` of ``v`` is the text the script would print: plain, and every set in it ordered."""
    if depth > 50 or not plain(v):
        return False
    t = type(v)
    if t in (set, frozenset):
        return ordered(v)
    if t in (list, tuple) or t in _VIEWS:
        return all(printable(x, depth + 1) for x in v)  # type: ignore[attr-defined]
    if t is dict:
        return all(printable(k, depth + 1) and printable(x, depth + 1) for k, x in v.items())  # type: ignore[attr-defined]
    return True


def known(v: object) -> bool:
    """No unknown inside (hugectr objects count as known: they are what the script built)."""
    if isinstance(v, Unknown):
        return False
    if type(v) in (list, tuple, set, frozenset):
        return all(known(x) for x in v)  # type: ignore[attr-defined]
    if type(v) is dict:
        return all(known(x) for x in v.values())  # type: ignore[attr-defined]
    return True


def first_unknown(v: object, home: bool = False) -> Unknown | None:
    """The first unknown in ``v``; with ``home``, a :class:`HomePath` (a path argument that keeps it) is not one."""
    if isinstance(v, Unknown):
        return None if home and isinstance(v, HomePath) else v
    if type(v) in (list, tuple, set, frozenset):
        for x in v:  # type: ignore[attr-defined]
            if (u := first_unknown(x, home)) is not None:
                return u
    if type(v) is dict:
        for x in v.values():  # type: ignore[attr-defined]
            if (u := first_unknown(x, home)) is not None:
                return u
    return None


def value_repr(v: object) -> str:
    """A short, stable description of a value for messages."""
    if isinstance(v, Enum):
        return f"hugectr.{v.type}.{v.member}"
    if isinstance(v, Call):
        return f"hugectr.{v.func}(...)"
    if isinstance(v, Obj):
        return f"<{v.type} object>"
    if isinstance(v, float) and math.isfinite(v):
        return repr(v)
    return repr(v)
