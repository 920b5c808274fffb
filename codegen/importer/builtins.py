"""Python's builtins and operators as the evaluator applies them: CPython's own function on values it can hand over.

Each builtin says what it needs of its arguments: ``plain`` values (numbers, strings, built-in containers of them),
containers of anything (``len``, ``list``, ``enumerate``: elements are not touched), or printable values (``str``,
``repr``, ``format``: a set of strings prints in an order that changes from run to run, an object's text has its
address in it). Anything else raises :class:`.scopes.Unk` and the expression is unknown.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass
from typing import Any, Callable

from ..graph.ir import Enum
from .scopes import Unk
from .values import EnvPath, HomePath, Namespace, Unknown, comparable, known, ordered, plain, printable

MAX_ITEMS = 1_000_000       # longest sequence the evaluator builds or walks


@dataclass(frozen=True)
class Builtin:
    name: str
    fn: Callable
    rule: str                   # "call": fn(*args); "apply": fn(apply, *args), apply calls a function value


class Gen:
    """An iterator's values (a generator expression, ``map``, ``zip`` ...): iterated once, then empty (as the iterator
    object is). ``thunk`` computes them when first iterated, as CPython's lazy ``map``/``filter`` do (a list changed
    between ``map(f, xs)`` and its use is read as changed); ``interleaves``: each value calls the script's own function,
    whose calls CPython interleaves with what the consumer does between values."""

    def __init__(self, items: list | None = None, thunk: Callable[[], list] | None = None,
                 interleaves: bool = False):
        self.items = items if items is not None else []
        self.thunk = thunk
        self.interleaves = interleaves
        self.used = False

    def take(self, whole: bool = True) -> list:
        """The values; ``whole``: the consumer reads every value before anything else runs (``list``, ``sorted``,
        ``sum``); otherwise (a loop, ``zip``, ``any``) a lazy iterator is followed only where that is the same."""
        if self.used:
            return []
        if self.thunk is not None:
            if not whole and self.interleaves:
                raise Unk("map()/filter() of the script's own function, read value by value: its calls "
                          "interleave with the consumer's, which is not modelled")
            try:
                self.items = self.thunk()
            except Unk:
                raise
            except Exception as exc:
                if whole:
                    raise        # list(map(int, ["x"])) raises where the script does
                # any()/zip() may stop before the value that raises
                raise Unk(f"map()/filter() raises {type(exc).__name__} on a value a partial consumer may "
                          "never read") from None
        self.used = True
        return self.items


def need(*values: object) -> None:
    """Raise Unk if any value is (or holds) an unknown, naming the first one's reason."""
    for v in values:
        if isinstance(v, Unknown):
            raise Unk(v.why or f"{v.text!r} cannot be known statically")
        if not known(v):
            raise Unk("it holds a value that cannot be known statically")


def need_plain(*values: object) -> None:
    need(*values)
    for v in values:
        if not plain(v):
            raise Unk("an object that is not a number, string or container is used as one")


def need_text(*values: object) -> None:
    need_plain(*values)
    for v in values:
        if not printable(v):
            raise Unk("its text depends on the run (a set of strings prints in hash order)")


def items_of(v: object, whole: bool = True) -> list:
    """The values ``for x in v`` visits, in CPython's order; Unk where that order or length cannot be known.
    ``whole``: see :meth:`Gen.take`."""
    if isinstance(v, Unknown):
        need(v)
    if isinstance(v, Gen):
        return v.take(whole)
    if isinstance(v, Namespace):
        raise Unk("iterating this object is not modelled")
    if isinstance(v, (list, tuple, str, range, dict, set, frozenset, bytes)) or type(v) in _VIEW_TYPES:
        if not ordered(v):
            raise Unk("a set of strings iterates in an order that changes from run to run")
        if len(v) > MAX_ITEMS:  # type: ignore[arg-type]
            raise Unk("too long to follow statically")
        return list(v)  # type: ignore[call-overload]
    raise Unk("iterating this object is not modelled")


_VIEW_TYPES: tuple[type, ...] = (type({}.keys()), type({}.values()), type({}.items()))


def truth(v: object) -> bool:
    """``bool(v)`` as CPython computes it, or Unk."""
    from .scopes import Instance

    if isinstance(v, Unknown):
        need(v)
    if isinstance(v, (list, tuple, dict, set, frozenset, str, bytes, range)) or type(v) in _VIEW_TYPES:
        return len(v) > 0  # type: ignore[arg-type]
    if isinstance(v, (int, float, type(None))):
        return bool(v)
    if isinstance(v, Instance):
        if "__bool__" in v.cls.namespace or "__len__" in v.cls.namespace:
            raise Unk("a class's __bool__ is not modelled")
        return True
    if isinstance(v, (Enum, Gen)):
        raise Unk("the truth of this object is not modelled")
    return True   # functions, classes, hugectr objects, namespaces: objects without __bool__


def _checked(result: object) -> object:
    if isinstance(result, (str, bytes, list, tuple)) and len(result) > MAX_ITEMS:
        raise Unk("too large to build statically")
    return result


_BIN: dict[type, Callable[[Any, Any], Any]] = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
        ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
        ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.MatMult: operator.matmul}
_INPLACE: dict[type, Callable[[Any, Any], Any]] = {ast.Add: operator.iadd, ast.Sub: operator.isub, ast.Mult: operator.imul, ast.Div: operator.itruediv,
            ast.FloorDiv: operator.ifloordiv, ast.Mod: operator.imod, ast.Pow: operator.ipow,
            ast.BitAnd: operator.iand, ast.BitOr: operator.ior, ast.BitXor: operator.ixor,
            ast.LShift: operator.ilshift, ast.RShift: operator.irshift, ast.MatMult: operator.imatmul}


def binop(op: type, left: object, right: object, inplace: bool = False) -> object:
    if isinstance(left, HomePath) and op is ast.Add:
        out = left.plus(right)
        if out is None and isinstance(left, EnvPath):
            raise Unk(f"{left.why}: {'a text starting with / right after it' if isinstance(right, str) else 'a value'}"
                      " appended to it is not kept")
        if out is None:
            raise Unk("os.path.expanduser('~') + text is only known where the script runs and is not kept: it is "
                      "'/' + text where HOME is '/' (os.path.join is kept)" if isinstance(right, str) and not left.rest
                      else left.why)
        return out
    need(left, right)
    structural = (op is ast.Add and type(left) is type(right) and type(left) in (list, tuple)) or \
        (op is ast.Mult and type(left) in (list, tuple) and type(right) is int) or \
        (op is ast.Mult and type(right) in (list, tuple) and type(left) is int) or \
        (inplace and op is ast.Add and type(left) is list and type(right) in (list, tuple))
    if not structural:
        need_plain(left, right)
    if op is ast.Mod and isinstance(left, (str, bytes)):
        need_text(right)            # "%s" % value prints the value: as str() would
    _size_guard(op, left, right)
    fn = (_INPLACE if inplace else _BIN)[op]
    return _checked(fn(left, right))


def _size_guard(op: type, left: object, right: object) -> None:
    big = False
    if op is ast.Pow and isinstance(right, int) and isinstance(left, int) and abs(left) > 1:
        big = right > 4096
    elif op is ast.LShift and isinstance(right, int):
        big = right > 4096
    elif op is ast.Mult:
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, (str, bytes, list, tuple)) and isinstance(n, int):
                big = big or len(seq) * n > MAX_ITEMS
    # Any operation on integers this large (squaring one 40 times grows it past memory) is left to the script's run.
    if isinstance(left, int) and isinstance(right, int) and max(abs(left), abs(right)).bit_length() > 100_000:
        big = True
    if big:
        raise Unk("too large to compute statically")


_CMP: dict[type, Callable[[Any, Any], Any]] = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
        ast.Gt: operator.gt, ast.GtE: operator.ge}
_SINGLETONS = (None, True, False, Ellipsis)


def _no_namespace(v: object) -> bool:
    if isinstance(v, Namespace):
        return False
    if type(v) in (list, tuple, set, frozenset):
        return all(_no_namespace(x) for x in v)  # type: ignore[attr-defined]
    if type(v) is dict:
        return all(_no_namespace(k) and _no_namespace(x) for k, x in v.items())  # type: ignore[attr-defined]
    return True


def compare(op: type, left: Any, right: Any) -> object:
    need(left, right)
    if op in (ast.Is, ast.IsNot):
        if not (any(left is s or right is s for s in _SINGLETONS)
                or not isinstance(left, (int, float, str, bytes, tuple, frozenset, Enum))
                and not isinstance(right, (int, float, str, bytes, tuple, frozenset, Enum))):
            raise Unk("'is' between numbers or strings depends on CPython's caching")
        return (left is right) if op is ast.Is else (left is not right)
    if op in (ast.In, ast.NotIn):
        if isinstance(right, Gen):
            raise Unk("membership in an iterator consumes it up to the value found, which is not modelled")
        if not (_no_namespace(left) and _no_namespace(right)):
            raise Unk("membership in this object is not modelled")
        if not isinstance(right, (list, tuple, dict, set, frozenset, str, bytes, range)) and \
                type(right) not in _VIEW_TYPES:
            raise Unk("membership in this object is not modelled")
        found = left in right  # type: ignore[operator]
        return found if op is ast.In else not found
    if op in (ast.Eq, ast.NotEq):
        if not (_no_namespace(left) and _no_namespace(right)) or isinstance(left, Gen) or isinstance(right, Gen):
            raise Unk("comparing this object is not modelled")
        return _CMP[op](left, right)
    if not (comparable(left) and comparable(right)) or isinstance(left, Enum) or isinstance(right, Enum):
        need_plain(left, right)
    return _CMP[op](left, right)


def subscript(base: object, key: object) -> object:
    need(key)
    if isinstance(base, Unknown):
        need(base)
    if not (isinstance(base, (list, tuple, str, bytes, range, dict)) or type(base) in _VIEW_TYPES):
        raise Unk("indexing this object is not modelled")
    if isinstance(base, dict):
        if not comparable(key):
            raise Unk("this key is not modelled")
    elif not (isinstance(key, int) or isinstance(key, slice) and plain(key)):
        need_plain(key)
    return base[key]  # type: ignore[index]


# ---- the builtins ---------------------------------------------------------------------------------------------
def _range(*args: Any) -> range:
    return range(*args)


def _print(*args: object, **kwargs: object) -> None:
    return None


def _list(*args: object) -> list:
    return list(items_of(args[0])) if args else []


def _tuple(*args: object) -> tuple:
    return tuple(items_of(args[0])) if args else ()


def _enumerate(it: object, start: Any = 0) -> Gen:
    need_plain(start)
    return Gen(list(enumerate(items_of(it, whole=False), start)))


def _zip(*its: object, **kwargs: object) -> Gen:
    need_plain(*kwargs.values())
    lists = [items_of(i, whole=False) for i in its]
    if any(isinstance(i, Gen) for i in its) and len({len(x) for x in lists}) > 1:
        # zip stops at the shortest: how much of a longer iterator it consumed matters if the script reads on
        raise Unk("zip() of iterators of different lengths is not modelled")
    return Gen(list(zip(*lists, **kwargs)))  # type: ignore[call-overload]


def _reversed(v: object) -> Gen:
    if not isinstance(v, (list, tuple, str, range)):
        raise Unk("reversed() of this object is not modelled")
    return Gen(list(reversed(v)))


def _len(v: object) -> int:
    if isinstance(v, Unknown):
        need(v)
    if isinstance(v, (list, tuple, dict, set, frozenset, str, bytes, range)) or type(v) in _VIEW_TYPES:
        return len(v)  # type: ignore[arg-type]
    raise Unk("len() of this object is not modelled")


def _bool(*args: object) -> bool:
    return truth(args[0]) if args else False


def _dict(*args: object, **kwargs: object) -> dict:
    if args and isinstance(args[0], dict):
        src: list = list(args[0].items())
    elif args:
        src = [tuple(items_of(p)) for p in items_of(args[0])]
    else:
        src = []
    for pair in src:
        if len(pair) == 2 and not comparable(pair[0]):
            raise Unk("this key is not modelled")
    return dict(src, **kwargs)


def _plain_iterables(fn: Callable) -> Callable:
    """A builtin over one iterable of plain values (sum, sorted, min, max, any, all, set, frozenset)."""
    partial = fn in (any, all)         # they stop at the first value that decides

    def run(*args: object, **kwargs: object) -> object:
        if "key" in kwargs:
            raise Unk("key= functions are not modelled")
        need_plain(*kwargs.values())
        if len(args) == 1 and not isinstance(args[0], (int, float, str)):
            # Over a set, only sum's result depends on the iteration order (float rounding).
            order_free = isinstance(args[0], (set, frozenset)) and fn is not sum
            values = args[0] if order_free else items_of(args[0], whole=not partial)
            need_plain(values)
            return _checked(fn(values, **kwargs))
        need_plain(*args)
        return fn(*args, **kwargs)

    return run


# ---- builtins that call a function (``apply(f, *args)``: the evaluator calls the script's function or a builtin) --
def _map(apply: Callable, f: object, *its: object) -> Gen:
    if not its:
        raise TypeError("map() must have at least two arguments.")
    from .scopes import BoundMethod, Function

    def values() -> list:
        return [apply(f, *xs) for xs in zip(*(items_of(i, whole=False) for i in its))]

    if len(its) > 1 and any(isinstance(i, Gen) for i in its):
        raise Unk("map() of several iterators is not modelled")
    return Gen(thunk=values, interleaves=isinstance(f, (Function, BoundMethod)))


def _filter(apply: Callable, f: object, it: object) -> Gen:
    from .scopes import BoundMethod, Function

    def values() -> list:
        return [x for x in items_of(it, whole=False) if truth(x if f is None else apply(f, x))]

    return Gen(thunk=values, interleaves=isinstance(f, (Function, BoundMethod)))


def _keyed(fn: Callable) -> Callable:
    """sorted/min/max: with ``key=`` each value's key is computed once, in order (as CPython does), and the values are
    ordered by CPython's own function over the keys (stable: equal keys keep their order)."""
    plain_fn = _plain_iterables(fn)

    def run(apply: Callable, *args: object, **kwargs: object) -> object:
        key = kwargs.pop("key", None)
        if key is None:
            return plain_fn(*args, **kwargs)
        values = items_of(args[0]) if len(args) == 1 else list(args)
        keys = [apply(key, v) for v in values]
        need_plain(keys, *kwargs.values())
        if fn is sorted:
            return [values[i] for i in sorted(range(len(values)), key=keys.__getitem__, **kwargs)]  # type: ignore[call-overload]
        if not values and "default" in kwargs:
            return kwargs["default"]
        kwargs.pop("default", None)
        return values[fn(range(len(values)), key=keys.__getitem__, **kwargs)]

    return run


def _text(fn: Callable) -> Callable:
    def run(*args: object, **kwargs: object) -> object:
        need_text(*args, *kwargs.values())
        return fn(*args, **kwargs)

    return run


def _plain(fn: Callable) -> Callable:
    def run(*args: object, **kwargs: object) -> object:
        need_plain(*args, *kwargs.values())
        return _checked(fn(*args, **kwargs))

    return run


_EXCEPTIONS = (BaseException, Exception, ArithmeticError, LookupError, ValueError, TypeError, KeyError,
               IndexError, ZeroDivisionError, OverflowError, AssertionError, RuntimeError, NameError,
               AttributeError, StopIteration, UnboundLocalError, NotImplementedError, ImportError,
               ModuleNotFoundError, KeyboardInterrupt, SystemExit, FileNotFoundError, OSError)

BUILTINS: dict[str, Any] = {
    "range": Builtin("range", _plain(_range), "call"),
    "len": Builtin("len", _len, "call"),
    "int": Builtin("int", _plain(int), "call"),
    "float": Builtin("float", _plain(float), "call"),
    "str": Builtin("str", _text(str), "call"),
    "repr": Builtin("repr", _text(repr), "call"),
    "ascii": Builtin("ascii", _text(ascii), "call"),
    "format": Builtin("format", _text(format), "call"),
    "bool": Builtin("bool", _bool, "call"),
    "list": Builtin("list", _list, "call"),
    "tuple": Builtin("tuple", _tuple, "call"),
    "dict": Builtin("dict", _dict, "call"),
    "set": Builtin("set", _plain_iterables(set), "call"),
    "frozenset": Builtin("frozenset", _plain_iterables(frozenset), "call"),
    "sum": Builtin("sum", _plain_iterables(sum), "call"),
    "min": Builtin("min", _keyed(min), "apply"),
    "max": Builtin("max", _keyed(max), "apply"),
    "sorted": Builtin("sorted", _keyed(sorted), "apply"),
    "map": Builtin("map", _map, "apply"),
    "filter": Builtin("filter", _filter, "apply"),
    "any": Builtin("any", _plain_iterables(any), "call"),
    "all": Builtin("all", _plain_iterables(all), "call"),
    "abs": Builtin("abs", _plain(abs), "call"),
    "round": Builtin("round", _plain(round), "call"),
    "divmod": Builtin("divmod", _plain(divmod), "call"),
    "pow": Builtin("pow", _plain(lambda a, b: binop(ast.Pow, a, b)), "call"),
    "chr": Builtin("chr", _plain(chr), "call"),
    "ord": Builtin("ord", _plain(ord), "call"),
    "enumerate": Builtin("enumerate", _enumerate, "call"),
    "zip": Builtin("zip", _zip, "call"),
    "reversed": Builtin("reversed", _reversed, "call"),
    "print": Builtin("print", _print, "call"),
    **{e.__name__: e for e in _EXCEPTIONS},
}
