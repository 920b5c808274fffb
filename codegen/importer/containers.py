"""What the evaluator knows of Python's containers and strings: the methods it models on each (and what each
needs), calling them, and how CPython's compiler folds a set display of constants."""

from __future__ import annotations

import ast
from typing import Any

from . import builtins as B
from .scopes import Unk, expr
from .values import Unknown, comparable
from .world import Context

# Methods of the built-in containers and strings, by what they need: (mutates, needs plain arguments).
LIST_METHODS = {"append": (True, False), "extend": (True, False), "insert": (True, False), "pop": (True, False),
                 "reverse": (True, False), "clear": (True, False), "copy": (False, False),
                 "index": (False, True), "count": (False, True), "remove": (True, True), "sort": (True, True)}
DICT_METHODS = {"get": (False, False), "keys": (False, False), "values": (False, False), "items": (False, False),
                 "setdefault": (True, False), "update": (True, False), "pop": (True, False), "copy": (False, False),
                 "clear": (True, False), "popitem": (True, False)}
SET_METHODS = {"add": (True, True), "update": (True, True), "discard": (True, True), "remove": (True, True),
                "union": (False, True), "intersection": (False, True), "difference": (False, True), "clear": (True, False),
                "issubset": (False, True), "issuperset": (False, True), "copy": (False, False)}
STR_METHODS = frozenset({"join", "replace", "strip", "lower", "upper", "split", "rstrip", "lstrip", "startswith",
                          "endswith", "capitalize", "title", "zfill", "rsplit", "find", "count", "isdigit",
                          "splitlines", "partition", "rpartition", "center", "ljust", "rjust", "format",
                          "index", "rfind", "rindex", "isalpha", "isalnum", "isdecimal", "isnumeric", "isspace",
                          "islower", "isupper", "isidentifier", "istitle", "casefold", "swapcase", "removeprefix",
                          "removesuffix", "expandtabs"})


def constant(e: ast.expr) -> bool:
    """A set element CPython's compiler folds to a constant (a literal, a negated number, a tuple of them)."""
    if isinstance(e, ast.Constant):
        return True
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd, ast.Invert)):
        return isinstance(e.operand, ast.Constant)
    if isinstance(e, ast.Tuple):
        return all(constant(x) for x in e.elts)
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub, ast.Mult)):
        return constant(e.left) and constant(e.right) and not isinstance(e.left, ast.Tuple)
    return False


def folded(elts: list) -> frozenset:
    """The frozenset constant CPython's compiler makes of constant set elements: built from them, then rebuilt from
    its own iteration when constants are merged (so its order is that of the second build)."""
    return frozenset(list(frozenset(elts)))


def set_in_order(elts: list) -> set:
    out: set = set()
    for e in elts:
        out.add(e)
    return out


def call_method(ev: Context, node: ast.Call, base: Any, args: list, kwargs: dict) -> object:
    """``base.attr(*args, **kwargs)`` on a list, dict, set or string: CPython's result, or unknown where it
    cannot be exact (an unknown argument, a change under an uncertain region)."""
    attr = node.func.attr  # type: ignore[attr-defined]
    if isinstance(base, str):
        if attr not in STR_METHODS:
            raise Unk(f"str.{attr} is not modelled")
        if attr == "join":
            parts = B.items_of(args[0]) if len(args) == 1 else args
            B.need_plain(parts)
            return expr(node, lambda: base.join(parts))
        if attr == "format":
            B.need_text(*args, *kwargs.values())
        else:
            B.need_plain(*args, *kwargs.values())
        return expr(node, lambda: getattr(base, attr)(*args, **kwargs))
    table = LIST_METHODS if isinstance(base, list) else DICT_METHODS if isinstance(base, dict) else SET_METHODS
    if attr not in table:
        raise Unk(f"{type(base).__name__}.{attr} is not modelled")
    mutates, needs_plain = table[attr]
    if needs_plain or isinstance(base, set):
        B.need_plain(*args, *kwargs.values())
    else:
        B.need(*(a for a in args if isinstance(a, Unknown)))
    if attr in ("extend", "update") and args and not isinstance(args[0], (dict, set, frozenset)):
        args = [B.items_of(args[0]), *args[1:]]
    if isinstance(base, dict) and attr in ("get", "pop", "setdefault") and args and not comparable(args[0]):
        raise Unk("this key is not modelled")
    if mutates and ev.uncertain is not None:
        ev.taint(base)
        raise Unk("changed where it cannot be known how often")
    return expr(node, lambda: getattr(base, attr)(*args, **kwargs))
