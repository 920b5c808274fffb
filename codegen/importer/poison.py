"""What code whose effect cannot be known may have changed, as functions over the evaluator (:class:`.world.Context`):
every name it may bind becomes unknown, every container it may change is tainted, except what calls that only read
their arguments (printing, formatting, logging, ``vars``, ``getattr``, the clock) are handed."""

from __future__ import annotations

import ast
from typing import Callable

from . import builtins as B
from .scopes import Frame, Function, Instance, Raised, Region, Unk, stored_names
from .values import Unknown
from .world import Context

# Calls that only read their arguments (see reads_only).
READ_ONLY_BUILTINS = frozenset({"print", "vars", "getattr", "hasattr", "str", "repr", "format", "len", "isinstance",
                                "type", "id", "int", "float", "bool", "sorted", "min", "max", "sum", "any", "all"})
READ_ONLY_METHODS = frozenset({"info", "debug", "warning", "warn", "error", "critical", "exception", "log", "now",
                               "today", "time", "perf_counter", "monotonic", "strftime", "isoformat", "write",
                               "flush", "pprint", "format"})


def poison(ev: Context, body: list[ast.stmt], frame: Frame, why: str) -> None:
    """Every name ``body`` may bind becomes unknown; every container it may change through a name, tainted
    (also through the script's functions it calls, and their arguments)."""
    region = Region(frame.depth, why)
    ev.budget.regions.append(region)
    try:
        for name in stored_names(body):
            ev.bind(frame, name, None)
    finally:
        ev.budget.regions.pop()
    _taint_roots(ev, body, frame, frozenset(), why, set())


def _taint_roots(ev: Context, body: list, frame: Frame, skip: frozenset, why: str, seen: set) -> None:
    def look(name: str) -> object:
        try:
            return ev.lookup(frame, name, ast.Name(name))
        except (Unk, Raised):
            return None

    for n in ast.walk(ast.Module(body=list(body), type_ignores=[])):
        roots: list[ast.expr] = []
        if isinstance(n, ast.Call) and reads_only(n, look):
            ev.world.read_only_skipped(n)
        elif isinstance(n, ast.Call):
            roots = [a.value if isinstance(a, ast.Starred) else a for a in n.args]
            roots += [k.value for k in n.keywords]
            if isinstance(n.func, ast.Attribute):
                roots.append(n.func.value)
            elif isinstance(n.func, ast.Name) and n.func.id not in skip:
                fn = look(n.func.id)
                if isinstance(fn, Function) and id(fn) not in seen:
                    seen.add(id(fn))
                    _poison_function(ev, fn, why, seen)
        elif isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.ctx, (ast.Store, ast.Del)):
            roots = [n.value]
        for root in roots:
            while isinstance(root, (ast.Attribute, ast.Subscript)) or _through(root):
                # vars(args)["x"] = 1 and getattr(args, "d")["x"] = 1 change args
                root = root.args[0] if isinstance(root, ast.Call) else root.value  # type: ignore[attr-defined]
            if isinstance(root, ast.Name) and root.id not in skip:
                taint_deep(ev, look(root.id), set())


def reads_only(call: ast.Call, look: Callable[[str], object]) -> bool:
    """A call that only reads its arguments (printing, formatting, logging, ``vars``, ``getattr``, the clock):
    code whose effect cannot be known that makes it leaves what it reads as it was."""
    f = call.func
    if isinstance(f, ast.Name):
        return f.id in READ_ONLY_BUILTINS and look(f.id) in (None, B.BUILTINS.get(f.id))
    if isinstance(f, ast.Attribute) and f.attr in READ_ONLY_METHODS:
        base = f.value
        while isinstance(base, ast.Attribute):
            base = base.value
        # logging.info(...), logger.info(...), datetime.now(), time.time(), sys.stdout.write(...): the receiver
        # is a module or an object the script did not build (never one of its lists, dicts or objects)
        return isinstance(base, ast.Name) and not isinstance(look(base.id), (list, dict, set, Instance))
    return False


def _poison_function(ev: Context, fn: Function, why: str, seen: set) -> None:
    local, glob, nonloc = fn.scope
    gframe = Frame(fn.frame.globals, fn.frame.globals)
    ev.budget.regions.append(Region(-1, why))
    try:
        for g in glob:
            ev.bind(gframe, g, None)
        for g in nonloc:
            for outer in fn.frame.enclosing:
                if g in outer.locals:
                    outer.locals[g] = Unknown(g, 0, None, why)
                    break
    finally:
        ev.budget.regions.pop()
    body = fn.node.body if isinstance(fn.node.body, list) else [ast.Expr(fn.node.body)]
    _taint_roots(ev, body, fn.frame, local, why, seen)


def taint_deep(ev: Context, v: object, seen: set) -> None:
    if id(v) in seen:
        return
    seen.add(id(v))
    if isinstance(v, (list, dict, set, Instance)):
        ev.taint(v)
    if isinstance(v, (list, tuple, set, frozenset)):
        for x in v:
            taint_deep(ev, x, seen)
    elif isinstance(v, dict):
        for x in v.values():
            taint_deep(ev, x, seen)
    elif isinstance(v, Instance):
        for x in v.attrs.values():
            taint_deep(ev, x, seen)


def _through(node: ast.expr) -> bool:
    """``vars(x)`` / ``getattr(x, ...)``: what is reached through it belongs to ``x``."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("vars", "getattr") \
        and bool(node.args)
