"""Expressions of the evaluator (:class:`.evaluator.Evaluator` mixes this in): each AST node to CPython's value,
or an :class:`Unknown` that says which expression and why."""

from __future__ import annotations

import ast
from typing import Any, Callable

from ..errors import Located
from . import builtins as B
from .containers import (DICT_METHODS, LIST_METHODS, SET_METHODS, STR_METHODS, constant, folded,
                         set_in_order)
from .scopes import (MAX_DEPTH, BoundMethod, Class, Frame, Function, Instance, Raised, Return, Unk,
                     bind_parameters, col_of, stored_names)
from .values import HomePath, ModuleConstants, Namespace, Unknown, comparable

# Exceptions CPython's own operations raise on the values the evaluator hands them: the script raises them too.
_PYTHON_ERRORS = (ArithmeticError, LookupError, TypeError, ValueError, AttributeError, AssertionError)

class Expressions:
    source: str
    budget: Any
    tainted: dict

    # provided by Evaluator
    def unknown(self, node: ast.AST, why: str = "") -> Unknown:
        raise NotImplementedError
    def text(self, node: ast.AST) -> str:
        raise NotImplementedError
    def lookup(self, frame: Frame, name: str, node: ast.Name) -> object: ...
    def bind(self, frame: Frame, name: str, value: object) -> None: ...
    def untaint(self, v: object) -> object: ...
    def taint(self, v: object) -> None: ...
    def exec_body(self, body: list[ast.stmt], frame: Frame) -> None: ...
    def make_function(self, node: Any, frame: Frame) -> Function:
        raise NotImplementedError
    def call_other(self, node: ast.Call, func: object, frame: Frame) -> object: ...
    def call_method_other(self, node: ast.Call, base: object, frame: Frame) -> object: ...
    def attribute_other(self, base: object, node: ast.Attribute, frame: Frame) -> object: ...
    def resolve_dotted(self, node: ast.expr) -> object: ...
    uncertain: Any

    # ---- entry points ------------------------------------------------------------------------------------------
    def eval(self, node: ast.expr | None, frame: Frame) -> object:
        if node is None:
            return None
        method = getattr(self, "e_" + type(node).__name__, None)
        try:
            if method is None:
                raise Unk(f"{type(node).__name__} expressions are not modelled")
            return method(node, frame)
        except Unk as u:
            return self.unknown(node, u.why)

    def expr(self, node: ast.AST, fn: Callable[[], object]) -> object:
        """CPython's operation; the Python exceptions it raises are the script's (``Raised``)."""
        try:
            return fn()
        except Unk:
            raise
        except _PYTHON_ERRORS as exc:
            raise Raised(exc, getattr(node, "lineno", 0)) from None
        except RecursionError:
            raise Unk("too deep to compute statically") from None

    def truth(self, node: ast.expr, frame: Frame) -> object:
        v = self.eval(node, frame)
        try:
            return B.truth(v)
        except Unk as u:
            return self.unknown(node, u.why)

    def iterate(self, v: object, node: ast.AST, whole: bool = True) -> list | Unknown:
        try:
            return B.items_of(v, whole)
        except Unk as u:
            return self.unknown(node, u.why)

    # ---- assignment --------------------------------------------------------------------------------------------
    def assign(self, target: ast.expr, value: object, frame: Frame, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.bind(frame, target.id, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            stars = [i for i, t in enumerate(target.elts) if isinstance(t, ast.Starred)]
            items = self.iterate(value, target) if not isinstance(value, Unknown) else value
            if isinstance(items, Unknown):
                for t in target.elts:
                    self.assign(t.value if isinstance(t, ast.Starred) else t, items, frame, node)
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
                self.assign(t.value if isinstance(t, ast.Starred) else t, v, frame, node)
        elif isinstance(target, ast.Subscript):
            base = self.eval(target.value, frame)
            key = self.eval(target.slice, frame)
            self.store_item(base, key, value, node)
        elif isinstance(target, ast.Attribute):
            self.store_attr(self.eval(target.value, frame), target.attr, value, node)
        elif isinstance(target, ast.Starred):
            self.assign(target.value, value, frame, node)

    def store_item(self, base: Any, key: Any, value: object, node: ast.AST) -> None:
        if not isinstance(base, (list, dict)):
            return    # an unknown or unmodelled object: nothing the reader knows changes
        if self.uncertain is not None or isinstance(key, Unknown) or not comparable(key) \
                and not isinstance(key, slice):
            self.taint(base)
            return
        self.expr(node, lambda: base.__setitem__(key, value))

    def store_attr(self, base: object, attr: str, value: object, node: ast.AST) -> None:
        if isinstance(base, Instance):
            if self.uncertain is not None:
                self.taint(base)
            else:
                base.attrs[attr] = value
        elif isinstance(base, Namespace):
            if self.uncertain is not None:
                self.taint(base)
            else:
                base[attr] = value

    # ---- expressions -------------------------------------------------------------------------------------------
    def e_Constant(self, node: ast.Constant, frame: Frame) -> object:
        return node.value

    def e_Name(self, node: ast.Name, frame: Frame) -> object:
        return self.untaint(self.lookup(frame, node.id, node))

    def _elements(self, elts: list[ast.expr], frame: Frame) -> list:
        out: list = []
        for e in elts:
            if isinstance(e, ast.Starred):
                v = self.eval(e.value, frame)
                out.extend(B.items_of(v))
            else:
                out.append(self.eval(e, frame))
        return out

    def e_List(self, node: ast.List, frame: Frame) -> object:
        return self._elements(node.elts, frame)

    def e_Tuple(self, node: ast.Tuple, frame: Frame) -> object:
        return tuple(self._elements(node.elts, frame))

    def e_Set(self, node: ast.Set, frame: Frame) -> object:
        elts = self._elements(node.elts, frame)
        B.need_plain(*elts)
        if len(node.elts) > 2 and all(constant(e) for e in node.elts):
            # CPython folds a display of three or more constants into a frozenset constant and copies it.
            out: set = set()
            out.update(folded(elts))
            return out
        return self.expr(node, lambda: set_in_order(elts))

    def e_Dict(self, node: ast.Dict, frame: Frame) -> object:
        out: dict = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                src = self.eval(v, frame)
                if not isinstance(src, dict):
                    raise Unk("** of this object is not modelled")
                out.update(src)
                continue
            key = self.eval(k, frame)
            value = self.eval(v, frame)
            B.need(key)
            if not comparable(key):
                raise Unk("this key is not modelled")
            out[key] = value
        return out

    def e_Attribute(self, node: ast.Attribute, frame: Frame) -> object:
        resolved = self.resolve_dotted(node)
        if resolved is not None:
            return resolved
        return self.attribute_of(self.eval(node.value, frame), node, frame)

    def attribute_of(self, base: object, node: ast.Attribute, frame: Frame) -> object:
        if isinstance(base, Unknown):
            B.need(base)
        if isinstance(base, Namespace):
            if node.attr in base:
                return self.untaint(base[node.attr])
            if isinstance(base, ModuleConstants):
                raise Unk(f"{self.text(node)} is not a known constant of that module")
            raise Raised(AttributeError(f"'Namespace' object has no attribute {node.attr!r}"), node.lineno)
        if isinstance(base, Instance):
            if node.attr in base.attrs:
                return self.untaint(base.attrs[node.attr])
            return self._class_attr(base.cls, node, base)
        if isinstance(base, Class):
            return self._class_attr(base, node, None)
        return self.attribute_other(base, node, frame)

    def _class_attr(self, cls: Class, node: ast.Attribute, instance: Instance | None) -> object:
        if node.attr not in cls.namespace:
            raise Unk(f"attribute {node.attr!r} is not set statically")
        v = cls.namespace[node.attr]
        if isinstance(v, Function) and instance is not None:
            return BoundMethod(v, instance)
        return self.untaint(v)

    def e_UnaryOp(self, node: ast.UnaryOp, frame: Frame) -> object:
        v = self.eval(node.operand, frame)
        if isinstance(node.op, ast.Not):
            return not B.truth(v)
        B.need_plain(v)
        op = {ast.USub: lambda x: -x, ast.UAdd: lambda x: +x, ast.Invert: lambda x: ~x}[type(node.op)]
        return self.expr(node, lambda: op(v))

    def e_BinOp(self, node: ast.BinOp, frame: Frame) -> object:
        left = self.eval(node.left, frame)
        right = self.eval(node.right, frame)
        return self.expr(node, lambda: B.binop(type(node.op), left, right))

    def e_BoolOp(self, node: ast.BoolOp, frame: Frame) -> object:
        out: object = None
        for v in node.values:
            out = self.eval(v, frame)
            t = B.truth(out)
            if isinstance(node.op, ast.And) and not t or isinstance(node.op, ast.Or) and t:
                return out
        return out

    def e_Compare(self, node: ast.Compare, frame: Frame) -> object:
        left = self.eval(node.left, frame)
        for op, comp in zip(node.ops, node.comparators):
            right = self.eval(comp, frame)
            result = self.expr(node, lambda: B.compare(type(op), left, right))  # noqa: B023
            if not B.truth(result):
                return result
            left = right
        return result

    def e_IfExp(self, node: ast.IfExp, frame: Frame) -> object:
        return self.eval(node.body if B.truth(self.eval(node.test, frame)) else node.orelse, frame)

    def e_JoinedStr(self, node: ast.JoinedStr, frame: Frame) -> object:
        parts: list[Any] = []
        home = None        # f"{home}...": text appended to a path under the home folder (kept, as home + "...")
        for i, v in enumerate(node.values):
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
                continue
            assert isinstance(v, ast.FormattedValue)
            x: Any = self.eval(v.value, frame)
            spec: Any = self.eval(v.format_spec, frame) if v.format_spec is not None else ""
            if i == 0 and isinstance(x, HomePath) and v.conversion in (-1, 115) and spec == "":
                home = x
                continue
            B.need_text(x, spec)
            conv: Any = {-1: lambda y: y, 115: str, 114: repr, 97: ascii}[v.conversion]
            parts.append(self.expr(node, lambda: format(conv(x), spec)))  # noqa: B023
        text = "".join(parts)
        return text if home is None else self.expr(node, lambda: B.binop(ast.Add, home, text)) if text else home

    def e_Subscript(self, node: ast.Subscript, frame: Frame) -> object:
        base = self.eval(node.value, frame)
        key = self.eval(node.slice, frame)
        return self.untaint(self.expr(node, lambda: B.subscript(base, key)))

    def e_Slice(self, node: ast.Slice, frame: Frame) -> object:
        parts = [self.eval(x, frame) for x in (node.lower, node.upper, node.step)]
        B.need_plain(*parts)
        return slice(*parts)

    def e_NamedExpr(self, node: ast.NamedExpr, frame: Frame) -> object:
        v = self.eval(node.value, frame)
        if getattr(frame, "comprehension", False):
            raise Unk("an assignment expression inside a comprehension is not modelled")
        self.assign(node.target, v, frame, node)
        return v

    def e_Lambda(self, node: ast.Lambda, frame: Frame) -> object:
        return self.make_function(node, frame)

    # ---- comprehensions ----------------------------------------------------------------------------------------
    def _comprehension(self, node: Any, frame: Frame) -> list:
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
                self.bind(frame, n.target.id, self.unknown(n, "an assignment expression inside a comprehension "
                                                              "is not modelled"))

        def loop(i: int) -> None:
            if i == len(node.generators):
                self.budget.steps += 1
                if isinstance(node, ast.DictComp):
                    key = self.eval(node.key, inner)
                    B.need(key)
                    if not comparable(key):
                        raise Unk("this key is not modelled")
                    results.append((key, self.eval(node.value, inner)))
                else:
                    results.append(self.eval(node.elt, inner))
                if len(results) > B.MAX_ITEMS:
                    raise Unk("too large to build statically")
                return
            g = node.generators[i]
            src = self.iter_source(g.iter, frame if i == 0 else inner)
            for item in B.items_of(src, whole=False):
                self.assign(g.target, item, inner, node)
                if all(B.truth(self.eval(c, inner)) for c in g.ifs):
                    loop(i + 1)

        loop(0)
        return results

    def iter_source(self, node: ast.expr, frame: Frame) -> object:
        """What a ``for`` iterates: CPython folds a set display of constants there into a frozenset constant."""
        if isinstance(node, ast.Set) and all(constant(e) for e in node.elts):
            elts = self._elements(node.elts, frame)
            return self.expr(node, lambda: folded(elts))
        return self.eval(node, frame)

    def e_ListComp(self, node: ast.ListComp, frame: Frame) -> object:
        return self._comprehension(node, frame)

    def e_SetComp(self, node: ast.SetComp, frame: Frame) -> object:
        elts = self._comprehension(node, frame)
        B.need_plain(*elts)
        return self.expr(node, lambda: set_in_order(elts))

    def e_DictComp(self, node: ast.DictComp, frame: Frame) -> object:
        out: dict = {}
        for k, v in self._comprehension(node, frame):
            out[k] = v
        return out

    def e_GeneratorExp(self, node: ast.GeneratorExp, frame: Frame) -> object:
        return B.Gen(self._comprehension(node, frame))

    # ---- calls -------------------------------------------------------------------------------------------------
    def call_args(self, node: ast.Call, frame: Frame) -> tuple[list, dict]:
        args: list = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(B.items_of(self.eval(a.value, frame)))
            else:
                args.append(self.eval(a, frame))
        kwargs: dict = {}
        for k in node.keywords:
            v = self.eval(k.value, frame)
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
        return args, kwargs

    def e_Call(self, node: ast.Call, frame: Frame) -> object:
        if isinstance(node.func, ast.Attribute) and self.resolve_dotted(node.func) is None:
            base = self.eval(node.func.value, frame)
            if type(base) in (list, dict, set, str):
                return self._container_method(node, base, frame)
            if not isinstance(base, (Instance, Class, Namespace)):
                return self.call_method_other(node, base, frame)
            func = self.attribute_of(base, node.func, frame)
        else:
            func = self.eval(node.func, frame)
        if isinstance(func, Function):
            args, kwargs = self.call_args(node, frame)
            return self.call_function(func, args, kwargs, node)
        if isinstance(func, BoundMethod):
            args, kwargs = self.call_args(node, frame)
            return self.call_function(func.fn, [func.instance, *args], kwargs, node)
        if isinstance(func, Class):
            instance = Instance(func)
            init = func.namespace.get("__init__")
            args, kwargs = self.call_args(node, frame)
            if isinstance(init, Function):
                self.call_function(init, [instance, *args], kwargs, node)
            elif init is not None or args or kwargs:
                raise Unk("this constructor is not modelled")
            self.instantiated(func)
            return instance
        if isinstance(func, B.Builtin):
            args, kwargs = self.call_args(node, frame)
            if func.rule == "apply":
                return self.expr(node, lambda: func.fn(lambda f, *a: self.call_value(f, list(a), node), *args,
                                                       **kwargs))
            return self.expr(node, lambda: func.fn(*args, **kwargs))
        if isinstance(func, type) and issubclass(func, BaseException):
            args, kwargs = self.call_args(node, frame)
            B.need_plain(*args)
            return func(*args)
        return self.call_other(node, func, frame)

    def call_value(self, func: object, args: list, node: ast.Call) -> object:
        """``func(*args)`` for a function value handed to map/filter/sorted(key=...): the script's function or
        lambda, a bound method of its object, a modelled builtin; anything else is unknown."""
        if isinstance(func, Function):
            return self.call_function(func, args, {}, node)
        if isinstance(func, BoundMethod):
            return self.call_function(func.fn, [func.instance, *args], {}, node)
        if isinstance(func, B.Builtin):
            if func.rule == "apply":
                return func.fn(lambda f, *a: self.call_value(f, list(a), node), *args)
            return func.fn(*args)
        B.need(func)
        raise Unk("a function value that is not the script's own or a modelled builtin is not modelled")

    def instantiated(self, cls: Class) -> None:
        """Hook: the module created an object of ``cls``."""

    def _container_method(self, node: ast.Call, base: Any, frame: Frame) -> object:
        attr = node.func.attr  # type: ignore[attr-defined]
        args, kwargs = self.call_args(node, frame)
        if isinstance(base, str):
            if attr not in STR_METHODS:
                raise Unk(f"str.{attr} is not modelled")
            if attr == "join":
                parts = B.items_of(args[0]) if len(args) == 1 else args
                B.need_plain(parts)
                return self.expr(node, lambda: base.join(parts))
            if attr == "format":
                B.need_text(*args, *kwargs.values())
            else:
                B.need_plain(*args, *kwargs.values())
            return self.expr(node, lambda: getattr(base, attr)(*args, **kwargs))
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
        if mutates and self.uncertain is not None:
            self.taint(base)
            raise Unk("changed where it cannot be known how often")
        return self.expr(node, lambda: getattr(base, attr)(*args, **kwargs))

    def call_function(self, fn: Function, args: list, kwargs: dict, node: ast.AST) -> object:
        if self.budget.depth >= MAX_DEPTH:
            raise Located(f"calls nest more than {MAX_DEPTH} deep (recursion is not read statically)",
                          getattr(node, "lineno", None), "write the values as literals", col=col_of(node))
        local, glob, nonloc = fn.scope
        frame = Frame(fn.frame.globals, {}, local, glob, nonloc,
                      (fn.frame, *fn.frame.enclosing) if fn.frame.local_names is not None else fn.frame.enclosing,
                      self.budget.depth + 1)
        bind_parameters(fn, args, kwargs, frame.locals, getattr(node, "lineno", 0))
        self.budget.depth += 1
        try:
            if isinstance(fn.node, ast.Lambda):
                return self.eval(fn.node.body, frame)
            self.exec_body(fn.node.body, frame)
        except Return as r:
            return r.value
        finally:
            self.budget.depth -= 1
        return None
