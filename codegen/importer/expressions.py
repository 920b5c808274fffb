"""Expressions, functions over the evaluator (:class:`.world.Context`): each AST node to CPython's value, or an
:class:`Unknown` that says which expression and why. What is not Python's own (a module's function, an object the
script did not build) is the world's (:class:`.world.World`)."""

from __future__ import annotations

import ast
from typing import Any, Callable

from ..errors import Located
from . import builtins as B
from . import containers as C
from .containers import constant, folded, set_in_order
from .scopes import (MAX_DEPTH, BoundMethod, Class, Frame, Function, Instance, Raised, Return, Unk,
                     bind_parameters, col_of, expr, scope_of, stored_names)
from .values import HomePath, ModuleConstants, Namespace, Unknown, comparable
from .world import Context



# ---- entry points ------------------------------------------------------------------------------------------
def evaluate(ev: Context, node: ast.expr | None, frame: Frame) -> object:
    if node is None:
        return None
    method = _EXPRESSIONS.get(type(node).__name__)
    try:
        if method is None:
            raise Unk(f"{type(node).__name__} expressions are not modelled")
        return method(ev, node, frame)
    except Unk as u:
        return ev.unknown(node, u.why)


def truth(ev: Context, node: ast.expr, frame: Frame) -> object:
    v = evaluate(ev, node, frame)
    try:
        return B.truth(v)
    except Unk as u:
        return ev.unknown(node, u.why)


def iterate(ev: Context, v: object, node: ast.AST, whole: bool = True) -> list | Unknown:
    try:
        return B.items_of(v, whole)
    except Unk as u:
        return ev.unknown(node, u.why)


# ---- assignment --------------------------------------------------------------------------------------------
def assign(ev: Context, target: ast.expr, value: object, frame: Frame, node: ast.AST) -> None:
    if isinstance(target, ast.Name):
        ev.bind(frame, target.id, value)
    elif isinstance(target, (ast.Tuple, ast.List)):
        stars = [i for i, t in enumerate(target.elts) if isinstance(t, ast.Starred)]
        items = iterate(ev, value, target) if not isinstance(value, Unknown) else value
        if isinstance(items, Unknown):
            for t in target.elts:
                assign(ev, t.value if isinstance(t, ast.Starred) else t, items, frame, node)
            return
        n = len(target.elts)
        if (not stars and len(items) != n) or (stars and len(items) < n - 1):
            raise Raised(ValueError(f"cannot unpack {len(items)} values into {n} targets"),
                         getattr(node, "lineno", 0))
        if stars:
            s = stars[0]
            after = n - s - 1
            parts = [*items[:s], list(items[s:len(items) - after]), *items[len(items) - after:]]
        else:
            parts = list(items)
        for t, v in zip(target.elts, parts):
            assign(ev, t.value if isinstance(t, ast.Starred) else t, v, frame, node)
    elif isinstance(target, ast.Subscript):
        base = evaluate(ev, target.value, frame)
        key = evaluate(ev, target.slice, frame)
        store_item(ev, base, key, value, node)
    elif isinstance(target, ast.Attribute):
        store_attr(ev, evaluate(ev, target.value, frame), target.attr, value, node)
    elif isinstance(target, ast.Starred):
        assign(ev, target.value, value, frame, node)


def store_item(ev: Context, base: Any, key: Any, value: object, node: ast.AST) -> None:
    if not isinstance(base, (list, dict)):
        return    # an unknown or unmodelled object: nothing the reader knows changes
    if ev.uncertain is not None or isinstance(key, Unknown) or not comparable(key) \
            and not isinstance(key, slice):
        ev.taint(base)
        return
    expr(node, lambda: base.__setitem__(key, value))


def store_attr(ev: Context, base: object, attr: str, value: object, node: ast.AST) -> None:
    if isinstance(base, Instance):
        if ev.uncertain is not None:
            ev.taint(base)
        else:
            base.attrs[attr] = value
    elif isinstance(base, Namespace):
        if ev.uncertain is not None:
            ev.taint(base)
        else:
            base[attr] = value


# ---- expressions -------------------------------------------------------------------------------------------
def e_Constant(ev: Context, node: ast.Constant, frame: Frame) -> object:
    return node.value


def e_Name(ev: Context, node: ast.Name, frame: Frame) -> object:
    return ev.untaint(ev.lookup(frame, node.id, node))


def _elements(ev: Context, elts: list[ast.expr], frame: Frame) -> list:
    out: list = []
    for e in elts:
        if isinstance(e, ast.Starred):
            v = evaluate(ev, e.value, frame)
            out.extend(B.items_of(v))
        else:
            out.append(evaluate(ev, e, frame))
    return out


def e_List(ev: Context, node: ast.List, frame: Frame) -> object:
    return _elements(ev, node.elts, frame)


def e_Tuple(ev: Context, node: ast.Tuple, frame: Frame) -> object:
    return tuple(_elements(ev, node.elts, frame))


def e_Set(ev: Context, node: ast.Set, frame: Frame) -> object:
    elts = _elements(ev, node.elts, frame)
    B.need_plain(*elts)
    if len(node.elts) > 2 and all(constant(e) for e in node.elts):
        # CPython folds a display of three or more constants into a frozenset constant and copies it.
        out: set = set()
        out.update(folded(elts))
        return out
    return expr(node, lambda: set_in_order(elts))


def e_Dict(ev: Context, node: ast.Dict, frame: Frame) -> object:
    out: dict = {}
    for k, v in zip(node.keys, node.values):
        if k is None:
            src = evaluate(ev, v, frame)
            if not isinstance(src, dict):
                raise Unk("** of this object is not modelled")
            out.update(src)
            continue
        key = evaluate(ev, k, frame)
        value = evaluate(ev, v, frame)
        B.need(key)
        if not comparable(key):
            raise Unk("this key is not modelled")
        out[key] = value
    return out


def e_Attribute(ev: Context, node: ast.Attribute, frame: Frame) -> object:
    resolved = ev.world.resolve_dotted(node)
    if resolved is not None:
        return resolved
    return attribute_of(ev, evaluate(ev, node.value, frame), node, frame)


def attribute_of(ev: Context, base: object, node: ast.Attribute, frame: Frame) -> object:
    if isinstance(base, Unknown):
        B.need(base)
    if isinstance(base, Namespace):
        if node.attr in base:
            return ev.untaint(base[node.attr])
        if isinstance(base, ModuleConstants):
            raise Unk(f"{ev.text(node)} is not a known constant of that module")
        raise Raised(AttributeError(f"'Namespace' object has no attribute {node.attr!r}"), node.lineno)
    if isinstance(base, Instance):
        if node.attr in base.attrs:
            return ev.untaint(base.attrs[node.attr])
        return _class_attr(ev, base.cls, node, base)
    if isinstance(base, Class):
        return _class_attr(ev, base, node, None)
    return ev.world.attribute_other(base, node, frame)


def _class_attr(ev: Context, cls: Class, node: ast.Attribute, instance: Instance | None) -> object:
    if node.attr not in cls.namespace:
        raise Unk(f"attribute {node.attr!r} is not set statically")
    v = cls.namespace[node.attr]
    if isinstance(v, Function) and instance is not None:
        return BoundMethod(v, instance)
    return ev.untaint(v)


def e_UnaryOp(ev: Context, node: ast.UnaryOp, frame: Frame) -> object:
    v = evaluate(ev, node.operand, frame)
    if isinstance(node.op, ast.Not):
        return not B.truth(v)
    B.need_plain(v)
    op = {ast.USub: lambda x: -x, ast.UAdd: lambda x: +x, ast.Invert: lambda x: ~x}[type(node.op)]
    return expr(node, lambda: op(v))


def e_BinOp(ev: Context, node: ast.BinOp, frame: Frame) -> object:
    left = evaluate(ev, node.left, frame)
    right = evaluate(ev, node.right, frame)
    return expr(node, lambda: B.binop(type(node.op), left, right))


def e_BoolOp(ev: Context, node: ast.BoolOp, frame: Frame) -> object:
    out: object = None
    for v in node.values:
        out = evaluate(ev, v, frame)
        t = B.truth(out)
        if isinstance(node.op, ast.And) and not t or isinstance(node.op, ast.Or) and t:
            return out
    return out


def e_Compare(ev: Context, node: ast.Compare, frame: Frame) -> object:
    left = evaluate(ev, node.left, frame)
    for op, comp in zip(node.ops, node.comparators):
        right = evaluate(ev, comp, frame)
        result = expr(node, lambda: B.compare(type(op), left, right))  # noqa: B023
        if not B.truth(result):
            return result
        left = right
    return result


def e_IfExp(ev: Context, node: ast.IfExp, frame: Frame) -> object:
    return evaluate(ev, node.body if B.truth(evaluate(ev, node.test, frame)) else node.orelse, frame)


def e_JoinedStr(ev: Context, node: ast.JoinedStr, frame: Frame) -> object:
    parts: list[Any] = []
    home = None        # f"{home}...": text appended to a path under the home folder (kept, as home + "...")
    for i, v in enumerate(node.values):
        if isinstance(v, ast.Constant):
            parts.append(str(v.value))
            continue
        assert isinstance(v, ast.FormattedValue)
        x: Any = evaluate(ev, v.value, frame)
        spec: Any = evaluate(ev, v.format_spec, frame) if v.format_spec is not None else ""
        if i == 0 and isinstance(x, HomePath) and v.conversion in (-1, 115) and spec == "":
            home = x
            continue
        B.need_text(x, spec)
        conv: Any = {-1: lambda y: y, 115: str, 114: repr, 97: ascii}[v.conversion]
        parts.append(expr(node, lambda: format(conv(x), spec)))  # noqa: B023
    text = "".join(parts)
    return text if home is None else expr(node, lambda: B.binop(ast.Add, home, text)) if text else home


def e_Subscript(ev: Context, node: ast.Subscript, frame: Frame) -> object:
    base = evaluate(ev, node.value, frame)
    key = evaluate(ev, node.slice, frame)
    return ev.untaint(expr(node, lambda: B.subscript(base, key)))


def e_Slice(ev: Context, node: ast.Slice, frame: Frame) -> object:
    parts = [evaluate(ev, x, frame) for x in (node.lower, node.upper, node.step)]
    B.need_plain(*parts)
    return slice(*parts)


def e_NamedExpr(ev: Context, node: ast.NamedExpr, frame: Frame) -> object:
    v = evaluate(ev, node.value, frame)
    if getattr(frame, "comprehension", False):
        raise Unk("an assignment expression inside a comprehension is not modelled")
    assign(ev, node.target, v, frame, node)
    return v


def e_Lambda(ev: Context, node: ast.Lambda, frame: Frame) -> object:
    return make_function(ev, node, frame)


def make_function(ev: Context, node: ast.FunctionDef | ast.Lambda, frame: Frame) -> Function:
    defaults = [evaluate(ev, d, frame) for d in node.args.defaults]
    kw_defaults = [None if d is None else evaluate(ev, d, frame) for d in node.args.kw_defaults]
    name = node.name if isinstance(node, ast.FunctionDef) else "<lambda>"
    return Function(node, frame, defaults, kw_defaults, scope_of(node), name)


# ---- comprehensions ----------------------------------------------------------------------------------------
def _comprehension(ev: Context, node: Any, frame: Frame) -> list:
    targets: set[str] = set()
    for g in node.generators:
        targets |= stored_names([ast.Assign(targets=[g.target], value=ast.Constant(0))])
    inner = Frame(frame.globals, {}, frozenset(targets), frozenset(), frozenset(),
                  (frame, *frame.enclosing) if frame.local_names is not None else frame.enclosing,
                  frame.depth + 1)
    inner.comprehension = True  # type: ignore[attr-defined]
    results: list = []
    for n in ast.walk(node):
        if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
            ev.bind(frame, n.target.id, ev.unknown(n, "an assignment expression inside a comprehension "
                                                          "is not modelled"))

    def loop(i: int) -> None:
        if i == len(node.generators):
            ev.budget.steps += 1
            if isinstance(node, ast.DictComp):
                key = evaluate(ev, node.key, inner)
                B.need(key)
                if not comparable(key):
                    raise Unk("this key is not modelled")
                results.append((key, evaluate(ev, node.value, inner)))
            else:
                results.append(evaluate(ev, node.elt, inner))
            if len(results) > B.MAX_ITEMS:
                raise Unk("too large to build statically")
            return
        g = node.generators[i]
        src = iter_source(ev, g.iter, frame if i == 0 else inner)
        for item in B.items_of(src, whole=False):
            assign(ev, g.target, item, inner, node)
            if all(B.truth(evaluate(ev, c, inner)) for c in g.ifs):
                loop(i + 1)

    loop(0)
    return results


def iter_source(ev: Context, node: ast.expr, frame: Frame) -> object:
    """What a ``for`` iterates: CPython folds a set display of constants there into a frozenset constant."""
    if isinstance(node, ast.Set) and all(constant(e) for e in node.elts):
        elts = _elements(ev, node.elts, frame)
        return expr(node, lambda: folded(elts))
    return evaluate(ev, node, frame)


def e_ListComp(ev: Context, node: ast.ListComp, frame: Frame) -> object:
    return _comprehension(ev, node, frame)


def e_SetComp(ev: Context, node: ast.SetComp, frame: Frame) -> object:
    elts = _comprehension(ev, node, frame)
    B.need_plain(*elts)
    return expr(node, lambda: set_in_order(elts))


def e_DictComp(ev: Context, node: ast.DictComp, frame: Frame) -> object:
    out: dict = {}
    for k, v in _comprehension(ev, node, frame):
        out[k] = v
    return out


def e_GeneratorExp(ev: Context, node: ast.GeneratorExp, frame: Frame) -> object:
    return B.Gen(_comprehension(ev, node, frame))


# ---- calls -------------------------------------------------------------------------------------------------
def call_args(ev: Context, node: ast.Call, frame: Frame) -> tuple[list, dict]:
    args: list = []
    for a in node.args:
        if isinstance(a, ast.Starred):
            args.extend(B.items_of(evaluate(ev, a.value, frame)))
        else:
            args.append(evaluate(ev, a, frame))
    kwargs: dict = {}
    for k in node.keywords:
        v = evaluate(ev, k.value, frame)
        if k.arg is None:
            if not isinstance(v, dict) or not all(isinstance(x, str) for x in v):
                raise Unk("** of this object is not modelled")
            pairs = list(v.items())
        else:
            pairs = [(k.arg, v)]
        for name, x in pairs:
            if name in kwargs:
                raise Raised(TypeError(f"got multiple values for keyword argument {name!r}"), node.lineno)
            kwargs[name] = x
    ev.world.passed(node, [*args, *kwargs.values()])
    return args, kwargs


def e_Call(ev: Context, node: ast.Call, frame: Frame) -> object:
    if isinstance(node.func, ast.Attribute) and ev.world.resolve_dotted(node.func) is None:
        base = evaluate(ev, node.func.value, frame)
        if type(base) in (list, dict, set, str):
            return C.call_method(ev, node, base, *call_args(ev, node, frame))
        if not isinstance(base, (Instance, Class, Namespace)):
            return ev.world.call_method_other(node, base, frame)
        func = attribute_of(ev, base, node.func, frame)
    else:
        func = evaluate(ev, node.func, frame)
    if isinstance(func, Function):
        args, kwargs = call_args(ev, node, frame)
        return call_function(ev, func, args, kwargs, node)
    if isinstance(func, BoundMethod):
        args, kwargs = call_args(ev, node, frame)
        return call_function(ev, func.fn, [func.instance, *args], kwargs, node)
    if isinstance(func, Class):
        instance = Instance(func)
        init = func.namespace.get("__init__")
        args, kwargs = call_args(ev, node, frame)
        if isinstance(init, Function):
            call_function(ev, init, [instance, *args], kwargs, node)
        elif init is not None or args or kwargs:
            raise Unk("this constructor is not modelled")
        ev.world.instantiated(func)
        return instance
    if isinstance(func, B.Builtin):
        args, kwargs = call_args(ev, node, frame)
        if func.rule == "apply":
            return expr(node, lambda: func.fn(lambda f, *a: call_value(ev, f, list(a), node), *args,
                                                   **kwargs))
        return expr(node, lambda: func.fn(*args, **kwargs))
    if isinstance(func, type) and issubclass(func, BaseException):
        args, kwargs = call_args(ev, node, frame)
        B.need_plain(*args)
        return func(*args)
    return ev.world.call_other(node, func, frame)


def call_value(ev: Context, func: object, args: list, node: ast.Call) -> object:
    """``func(*args)`` for a function value handed to map/filter/sorted(key=...): the script's function or
    lambda, a bound method of its object, a modelled builtin; anything else is the world's."""
    if isinstance(func, Function):
        return call_function(ev, func, args, {}, node)
    if isinstance(func, BoundMethod):
        return call_function(ev, func.fn, [func.instance, *args], {}, node)
    if isinstance(func, B.Builtin):
        if func.rule == "apply":
            return func.fn(lambda f, *a: call_value(ev, f, list(a), node), *args)
        return func.fn(*args)
    return ev.world.call_value_other(func, args, node)


def call_function(ev: Context, fn: Function, args: list, kwargs: dict, node: ast.AST) -> object:
    with ev.world.function_context(fn):
        return _run_function(ev, fn, args, kwargs, node)


def _run_function(ev: Context, fn: Function, args: list, kwargs: dict, node: ast.AST) -> object:
    if ev.budget.depth >= MAX_DEPTH:
        raise Located(f"calls nest more than {MAX_DEPTH} deep (recursion is not read statically)",
                      getattr(node, "lineno", None), "write the values as literals", col=col_of(node))
    local, glob, nonloc = fn.scope
    frame = Frame(fn.frame.globals, {}, local, glob, nonloc,
                  (fn.frame, *fn.frame.enclosing) if fn.frame.local_names is not None else fn.frame.enclosing,
                  ev.budget.depth + 1)
    bind_parameters(fn, args, kwargs, frame.locals, getattr(node, "lineno", 0))
    ev.budget.depth += 1
    try:
        if isinstance(fn.node, ast.Lambda):
            return evaluate(ev, fn.node.body, frame)
        ev.exec_body(fn.node.body, frame)
    except Return as r:
        return r.value
    finally:
        ev.budget.depth -= 1
    return None


# The expression functions by node type: e_Constant evaluates ast.Constant, and so on.
_EXPRESSIONS: dict[str, Callable[[Context, Any, Frame], object]] = {
    name[2:]: fn for name, fn in list(globals().items()) if name.startswith("e_")}
