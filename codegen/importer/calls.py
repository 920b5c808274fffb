"""A HugeCTR script read statically: the hugectr calls it makes, in order, with their argument values.

Nothing is imported or executed. A small interpreter walks the module's statements (and the functions it calls,
``if __name__ == "__main__":`` blocks, ``for`` loops over known ranges, ``with``/``try`` bodies) and evaluates the
expressions it can know: literals, names bound to them, arithmetic, ``range``/``len``/comprehensions over known values,
f-strings, ``os.path.join`` and argparse defaults. Anything else becomes an :class:`Unknown` that remembers its line,
so the importer can say what it had to assume.

Every call of a ``hugectr`` function, constructor or object method is recorded as a :class:`Call`. Calls nested as
arguments (``model.add(hugectr.DenseLayer(...))``) are values of their parent; a value-type object built first and
passed by name (``layer = hugectr.DenseLayer(...); model.add(layer)``) is inlined where it is used, so both styles
give the same sequence. Objects with state (the model, solver, reader, optimizer, caches) stay references.
"""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass, field

from ..errors import Located
from ..graph.ir import Enum
from ..hugectr.versions import ENUM_TYPE_NAMES
from .known_modules import module_value

# Constructors whose objects have identity and state: passed by reference, their calls are statements.
STATEFUL = frozenset({
    "Model", "ModelPerfExt", "CreateSolver", "CreateOptimizer", "DataReaderParams", "CreateMOS", "CreateETC", "CreateHMemCache",
    "CreateInferenceSession", "CreateInferenceParams", "InferenceParams", "InferenceModel",
    "EmbeddingCollectionConfig", "EmbeddingPlanner", "DataGenerator", "DataSource",
})
# Known lengths a loop over hugectr calls may be unrolled to (a training loop of 10^5 iterations is not a model).
MAX_UNROLL = 512
MAX_STEPS = 200_000


@dataclass(frozen=True)
class Unknown:
    """A value the static reader cannot know (a runtime expression); ``text`` is its source."""

    text: str
    line: int

    def __repr__(self) -> str:
        return f"<unknown {self.text!r} at line {self.line}>"


@dataclass(frozen=True)
class Obj:
    """The result of a stateful hugectr call or method (a model, a solver, an LR scheduler, ...)."""

    type: str            # "Model", "CreateSolver", "Model.get_learning_rate_scheduler", ...
    call_id: int         # index of the creating Call in Script.all_calls (-1: unknown)


@dataclass
class Call:
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
    unknowns: list[Unknown] = field(default_factory=list)
    notes: list[tuple[int, str]] = field(default_factory=list)   # (line, what the reader skipped or assumed)
    loops: list[int] = field(default_factory=list)          # lines of loops with hugectr calls it could not unroll
    unread: list[tuple[int, str]] = field(default_factory=list)   # classes that build a model (not followed)
    argv_read: bool = False                                  # the script reads its command line (argparse, sys.argv)
    required_args: list[str] = field(default_factory=list)   # required argparse options no command line gave

    def count(self, func: str) -> int:
        return sum(1 for c in self.all_calls if c.func == func)


ScriptError = Located  # old name (codegen.errors.Located: message, line), kept for a transition


class _Namespace(dict):
    """argparse.Namespace of defaults, or the known constants of a third-party module (known_modules)."""


def _module_namespace(consts: dict) -> _Namespace:
    return _Namespace({k: _module_namespace(v) if isinstance(v, dict) else v for k, v in consts.items()})


@dataclass
class _Parser:
    args: dict = field(default_factory=dict)                         # dest -> default
    specs: list[tuple[list, dict]] = field(default_factory=list)    # add_argument(*flags, **kwargs), for a command line
    required: list[str] = field(default_factory=list)               # the option strings of required arguments


@dataclass
class _Function:
    node: ast.FunctionDef
    closure: dict


@dataclass
class _Class:
    """A class of the script: its methods are read when the module instantiates it and calls them."""

    node: ast.ClassDef
    methods: dict


class _Instance:
    """An object of a script's class; ``self.x = ...`` in its methods binds ``attrs['x']``."""

    def __init__(self, cls: _Class):
        self.cls = cls
        self.attrs: dict = {}


@dataclass(frozen=True)
class _BoundMethod:
    fn: _Function
    instance: _Instance


class _Return(Exception):
    def __init__(self, value):
        self.value = value


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
           ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.LShift: operator.lshift,
           ast.RShift: operator.rshift}
_CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
           ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
           ast.NotIn: lambda a, b: a not in b, ast.Is: operator.is_, ast.IsNot: operator.is_not}
_SAFE_BUILTINS = {
    "range": range, "len": len, "int": int, "float": float, "str": str, "bool": bool, "list": list, "tuple": tuple,
    "sum": sum, "min": min, "max": max, "abs": abs, "round": round, "sorted": sorted, "reversed": reversed,
    "enumerate": enumerate, "zip": zip, "dict": dict, "set": set,
}


def _known(v: object) -> bool:
    if isinstance(v, (Unknown, _Parser)):
        return False
    if isinstance(v, (list, tuple)):
        return all(_known(x) for x in v)
    if isinstance(v, dict) and not isinstance(v, _Namespace):
        return all(_known(x) for x in v.values())
    return True


class Interpreter:
    def __init__(self, filename: str, source: str, argv: list[str] | None = None):
        self.script = Script(filename)
        self.argv = argv                            # the command line it runs with (None: argparse defaults)
        self.source = source
        self.hugectr_modules: dict[str, str] = {}   # local name -> "hugectr" / "hugectr.inference" / ...
        self.hugectr_names: dict[str, str] = {}     # local name -> qualified hugectr attribute ("Layer_t")
        self.steps = 0
        self.loop_depth_unknown = 0

    # ---- statements ------------------------------------------------------------------------------------------------
    def run(self, tree: ast.Module) -> Script:
        env: dict = {"__name__": "__main__"}
        self.exec_body(tree.body, env)
        if not any(c.func == "Model" for c in self.script.all_calls):
            # A model built in a function the module never calls statically (a thread target, a CLI callback):
            # read the first such function as if called with its defaults.
            for name, fn in list(env.items()):
                if isinstance(fn, _Function) and "Model(" in (ast.get_source_segment(self.source, fn.node) or ""):
                    self.script.notes.append((fn.node.lineno, f"function {name}() is not called statically; read "
                                                              "as if called with its default arguments"))
                    fake = ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=[], keywords=[],
                                    lineno=fn.node.lineno, col_offset=0)
                    self.call_function(fn, fake, env)
                    break
        return self.script

    def exec_body(self, body: list[ast.stmt], env: dict) -> None:
        for stmt in body:
            self.exec_stmt(stmt, env)

    def exec_stmt(self, node: ast.stmt, env: dict) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise ScriptError("the script is too long to read statically", getattr(node, "lineno", None))
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "hugectr" or a.name.startswith("hugectr."):
                    local = a.asname or a.name.split(".")[0]
                    self.hugectr_modules[local] = a.name if a.asname else "hugectr"
                bound = a.name if a.asname else a.name.split(".")[0]
                known = module_value(bound)
                env[a.asname or bound] = (_module_namespace(known) if known is not None
                                          else Unknown(f"module {a.name}", node.lineno))
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            for a in node.names:
                local = a.asname or a.name
                if mod == "hugectr" or mod.startswith("hugectr."):
                    qual = (mod + "." + a.name)[len("hugectr."):] if mod != "hugectr" else a.name
                    if a.name == "*":
                        self.hugectr_modules["*"] = mod
                        continue
                    self.hugectr_names[local] = qual
                    env.pop(local, None)
                else:
                    known = module_value(f"{mod}.{a.name}")
                    env[local] = (_module_namespace(known) if known is not None
                                  else Unknown(f"{mod}.{a.name}", node.lineno))
        elif isinstance(node, ast.Assign):
            value = self.eval(node.value, env)
            for target in node.targets:
                self.assign(target, value, env, node)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.assign(node.target, self.eval(node.value, env), env, node)
        elif isinstance(node, ast.AugAssign):
            if isinstance(node.target, ast.Name):
                cur = env.get(node.target.id, Unknown(node.target.id, node.lineno))
                val = self.eval(node.value, env)
                env[node.target.id] = self._binop(type(node.op), cur, val, node)
        elif isinstance(node, ast.Expr):
            self.eval(node.value, env)
        elif isinstance(node, ast.FunctionDef):
            env[node.name] = _Function(node, env)
        elif isinstance(node, ast.If):
            cond = self.eval(node.test, env)
            if isinstance(cond, Unknown):
                # Both branches may run: read the first one that makes hugectr calls, note the choice.
                before = len(self.script.all_calls)
                self.exec_body(node.body, env)
                if len(self.script.all_calls) == before and node.orelse:
                    self.exec_body(node.orelse, env)
                elif node.orelse and self._has_hugectr(node.orelse):
                    self.script.notes.append((node.lineno, f"condition {self._text(node.test)!r} cannot be known "
                                                           "statically; read its first branch"))
            elif cond:
                self.exec_body(node.body, env)
            else:
                self.exec_body(node.orelse, env)
        elif isinstance(node, ast.For):
            self.exec_for(node, env)
        elif isinstance(node, ast.While):
            self._unknown_loop(node, env, None)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                v = self.eval(item.context_expr, env)
                if item.optional_vars is not None:
                    self.assign(item.optional_vars, v, env, node)
            self.exec_body(node.body, env)
        elif isinstance(node, ast.Try):
            self.exec_body(node.body, env)
            self.exec_body(node.orelse, env)
            self.exec_body(node.finalbody, env)
        elif isinstance(node, ast.Return):
            raise _Return(self.eval(node.value, env) if node.value is not None else None)
        elif isinstance(node, ast.ClassDef):
            methods = {f.name: _Function(f, env) for f in node.body if isinstance(f, ast.FunctionDef)}
            env[node.name] = _Class(node, methods)
            if "Model(" in (ast.get_source_segment(self.source, node) or ""):
                # Read when instantiated; a model class the module never instantiates statically is refused.
                self.script.unread.append((node.lineno, f"class {node.name}"))
        elif isinstance(node, ast.AsyncFunctionDef):
            env[node.name] = Unknown(node.name, node.lineno)
        # pass, global, assert, raise, delete, break/continue: nothing a model depends on

    def exec_for(self, node: ast.For, env: dict) -> None:
        it = self.eval(node.iter, env)
        has_calls = self._has_hugectr(node.body)
        if _known(it) and not isinstance(it, (_Namespace,)):
            try:
                items = list(it)
            except TypeError:
                items = None
            if items is not None and (len(items) <= MAX_UNROLL or not has_calls):
                if not has_calls:
                    # Nothing recorded inside: bind the target as the last item would leave it and move on quickly.
                    if items:
                        self.assign(node.target, items[-1], env, node)
                    self._bind_unknown_assignments(node.body, env)
                    return
                for item in items:
                    self.assign(node.target, item, env, node)
                    self.exec_body(node.body, env)
                self.exec_body(node.orelse, env)
                return
        if has_calls:
            self._unknown_loop(node, env, node.target)
        else:
            self._bind_unknown_assignments(node.body, env)

    def _unknown_loop(self, node: ast.For | ast.While, env: dict, target: ast.expr | None) -> None:
        """A loop of unknown length: read its body once; if it makes hugectr calls, remember the loop."""
        before = len(self.script.all_calls)
        self.loop_depth_unknown += 1
        try:
            if target is not None:
                self.assign(target, Unknown(self._text(target), node.lineno), env, node)
            self.exec_body(node.body, env)
        finally:
            self.loop_depth_unknown -= 1
        if len(self.script.all_calls) > before:
            self.script.loops.append(node.lineno)

    def _bind_unknown_assignments(self, body: list[ast.stmt], env: dict) -> None:
        for stmt in ast.walk(ast.Module(body=body, type_ignores=[])):
            if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        env[t.id] = Unknown(t.id, stmt.lineno)

    def _has_hugectr(self, body: list[ast.stmt]) -> bool:
        for n in ast.walk(ast.Module(body=body, type_ignores=[])):
            if isinstance(n, ast.Call):
                f = n.func
                while isinstance(f, (ast.Attribute, ast.Subscript)):
                    f = f.value   # matrix[gpu].append(...) mutates matrix: the body must run
                if isinstance(f, ast.Name):
                    return True  # any call may reach hugectr through a variable or a function; be safe
        return False

    def assign(self, target: ast.expr, value: object, env: dict, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
            if isinstance(value, Obj) and 0 <= value.call_id < len(self.script.all_calls):
                call = self.script.all_calls[value.call_id]
                call.receiver = call.receiver or None
                env.setdefault("__varnames__", {})[target.id] = value.call_id
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (list, tuple)) and len(value) == len(target.elts):
                for t, v in zip(target.elts, value):
                    self.assign(t, v, env, node)
            else:
                for t in target.elts:
                    self.assign(t, Unknown(self._text(t), getattr(node, "lineno", 0)), env, node)
        elif isinstance(target, ast.Subscript):
            base = self.eval(target.value, env)
            key = self.eval(target.slice, env)
            if isinstance(base, (dict, list)) and _known(key):
                try:
                    base[key] = value
                except (IndexError, TypeError):
                    pass
        elif isinstance(target, ast.Attribute):
            base = self.eval(target.value, env)
            if isinstance(base, _Namespace):
                base[target.attr] = value
            elif isinstance(base, _Instance):
                base.attrs[target.attr] = value
        elif isinstance(target, ast.Starred):
            self.assign(target.value, Unknown(self._text(target), getattr(node, "lineno", 0)), env, node)

    # ---- expressions ---------------------------------------------------------------------------------------------
    def _text(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.source, node) or ast.dump(node)[:60]

    def unknown(self, node: ast.AST) -> Unknown:
        return Unknown(self._text(node), getattr(node, "lineno", 0))

    def hugectr_path(self, node: ast.expr) -> str | None:
        """'Layer_t.InnerProduct' for hugectr.Layer_t.InnerProduct (any alias), else None."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        parts.reverse()
        if node.id in self.hugectr_modules:
            mod = self.hugectr_modules[node.id]
            prefix = mod[len("hugectr."):].split(".") if mod.startswith("hugectr.") else []
            return ".".join([*prefix, *parts])
        if node.id in self.hugectr_names:
            return ".".join([self.hugectr_names[node.id], *parts])
        return None

    def eval(self, node: ast.expr | None, env: dict) -> object:
        if node is None:
            return None
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out = []
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    v = self.eval(e.value, env)
                    if _known(v) and isinstance(v, (list, tuple, range)):
                        out.extend(v)
                    else:
                        out.append(self.unknown(e))
                else:
                    out.append(self.eval(e, env))
            return tuple(out) if isinstance(node, ast.Tuple) else out
        if isinstance(node, ast.Dict):
            d = {}
            for k, v in zip(node.keys, node.values):
                if k is None:
                    continue
                key = self.eval(k, env)
                if not _known(key):
                    return self.unknown(node)
                d[key] = self.eval(v, env)
            return d
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if node.id in self.hugectr_names:
                return self._hugectr_value(self.hugectr_names[node.id], node)
            if node.id in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[node.id]
            if node.id in _SAFE_BUILTINS:
                return _SAFE_BUILTINS[node.id]
            return self.unknown(node)
        if isinstance(node, ast.Attribute):
            if self.argv is not None and self._dotted(node) == "sys.argv":
                self.script.argv_read = True
                return [self.script.filename.rsplit("/", 1)[-1], *self.argv]
            path = self.hugectr_path(node)
            if path is not None:
                return self._hugectr_value(path, node)
            base = self.eval(node.value, env)
            if isinstance(base, _Namespace):
                return base.get(node.attr, self.unknown(node))
            if isinstance(base, _Instance):
                if node.attr in base.attrs:
                    return base.attrs[node.attr]
                if node.attr in base.cls.methods:
                    return _BoundMethod(base.cls.methods[node.attr], base)
                return self.unknown(node)
            if isinstance(base, Obj):
                return Obj(f"{base.type}.{node.attr}", -1)
            if isinstance(base, Call) and any(k == node.attr for k, _ in base.kwargs):
                return base.arg(node.attr)   # params.format of a value object built with format=...
            if isinstance(base, Call):
                return self._attribute_default(base, node)
            return self.unknown(node)
        if isinstance(node, ast.UnaryOp):
            v = self.eval(node.operand, env)
            if not _known(v):
                return self.unknown(node)
            try:
                return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
                        ast.Invert: operator.invert}[type(node.op)](v)
            except Exception:
                return self.unknown(node)
        if isinstance(node, ast.BinOp):
            return self._binop(type(node.op), self.eval(node.left, env), self.eval(node.right, env), node)
        if isinstance(node, ast.BoolOp):
            vals = [self.eval(v, env) for v in node.values]
            if not all(_known(v) for v in vals):
                return self.unknown(node)
            if isinstance(node.op, ast.And):
                out = True
                for v in vals:
                    out = v
                    if not v:
                        break
                return out
            out = False
            for v in vals:
                out = v
                if v:
                    break
            return out
        if isinstance(node, ast.Compare):
            left = self.eval(node.left, env)
            for op, comp in zip(node.ops, node.comparators):
                right = self.eval(comp, env)
                if not (_known(left) and _known(right)):
                    return self.unknown(node)
                try:
                    if not _CMPOPS[type(op)](left, right):
                        return False
                except Exception:
                    return self.unknown(node)
                left = right
            return True
        if isinstance(node, ast.IfExp):
            cond = self.eval(node.test, env)
            if not _known(cond):
                return self.unknown(node)
            return self.eval(node.body if cond else node.orelse, env)
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    parts.append(str(v.value))
                elif isinstance(v, ast.FormattedValue):
                    x = self.eval(v.value, env)
                    if not _known(x) or v.format_spec is not None:
                        if _known(x) and v.format_spec is not None:
                            spec = self.eval(v.format_spec, env)
                            if isinstance(spec, str):
                                try:
                                    parts.append(format(x, spec))
                                    continue
                                except Exception:
                                    pass
                        return self.unknown(node)
                    parts.append({-1: str, 115: str, 114: repr, 97: ascii}[v.conversion](x))
            return "".join(parts)
        if isinstance(node, ast.Subscript):
            base = self.eval(node.value, env)
            key = self.eval(node.slice, env)
            if isinstance(node.slice, ast.Slice):
                lo, hi, st = (self.eval(x, env) for x in (node.slice.lower, node.slice.upper, node.slice.step))
                if _known(base) and all(_known(x) for x in (lo, hi, st)):
                    try:
                        return base[slice(lo, hi, st)]
                    except Exception:
                        return self.unknown(node)
                return self.unknown(node)
            if _known(base) and _known(key) and not isinstance(base, _Namespace):
                try:
                    return base[key]
                except Exception:
                    return self.unknown(node)
            if isinstance(base, (list, tuple)) and isinstance(key, int) and -len(base) <= key < len(base):
                return base[key]
            if isinstance(base, dict) and _known(key) and key in base:
                return base[key]
            return self.unknown(node)
        if isinstance(node, ast.Slice):
            return slice(self.eval(node.lower, env), self.eval(node.upper, env), self.eval(node.step, env))
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            return self._comprehension(node, env)
        if isinstance(node, ast.Call):
            return self.call(node, env)
        if isinstance(node, ast.NamedExpr):
            v = self.eval(node.value, env)
            self.assign(node.target, v, env, node)
            return v
        return self.unknown(node)

    def _binop(self, op, left, right, node):
        if not (_known(left) and _known(right)) or op not in _BINOPS:
            return self.unknown(node)
        if op is ast.Pow and isinstance(right, int) and abs(right) > 64:
            return self.unknown(node)
        if op is ast.Mult and isinstance(left, (str, list, tuple)) and isinstance(right, int) and right > 100_000:
            return self.unknown(node)
        if op is ast.Mult and isinstance(right, (str, list, tuple)) and isinstance(left, int) and left > 100_000:
            return self.unknown(node)
        if op is ast.LShift and isinstance(right, int) and right > 64:
            return self.unknown(node)
        try:
            return _BINOPS[op](left, right)
        except Exception:
            return self.unknown(node)

    def _comprehension(self, node, env):
        results: list = []
        scope = dict(env)

        def loop(gens, depth=0):
            if len(results) > 100_000:
                raise ScriptError("a comprehension is too large to read statically", node.lineno)
            if not gens:
                if isinstance(node, ast.DictComp):
                    results.append((self.eval(node.key, scope), self.eval(node.value, scope)))
                else:
                    results.append(self.eval(node.elt, scope))
                return True
            g = gens[0]
            it = self.eval(g.iter, scope)
            if not _known(it):
                return False
            try:
                items = list(it)
            except TypeError:
                return False
            for item in items:
                self.assign(g.target, item, scope, node)
                conds = [self.eval(c, scope) for c in g.ifs]
                if not all(_known(c) for c in conds):
                    return False
                if all(conds):
                    if not loop(gens[1:], depth + 1):
                        return False
            return True

        if not loop(node.generators):
            return self.unknown(node)
        if isinstance(node, ast.DictComp):
            return dict(results)
        if isinstance(node, ast.SetComp):
            return set(results)
        return results

    def _attribute_default(self, call: Call, node: ast.Attribute) -> object:
        """``params.check_type`` of a value object built without it: by position, else HugeCTR's default (the newest
        release's; defaults of these parameter objects have not changed), else unknown."""
        from ..hugectr import api

        try:
            params = api.signature(call.func, api.RELEASES[-1]) if api.has(call.func, api.RELEASES[-1]) else ()
        except api.ApiError:
            params = ()
        for i, p in enumerate(params):
            if p.name != node.attr:
                continue
            if i < len(call.args):
                return call.args[i]
            if p.default is api.NO_DEFAULT or isinstance(p.default, api.Unparsed):
                break
            d = p.default
            if isinstance(d, str) and "." in d and d.split(".")[0] in api.enums():
                d = Enum(*d.split(".", 1))
            self.script.notes.append((node.lineno, f"{self._text(node)}: not passed to hugectr.{call.func}; "
                                                   f"HugeCTR's default {value_repr(d)} used"))
            return list(d) if isinstance(d, list) else d
        return self.unknown(node)

    def _hugectr_value(self, path: str, node: ast.AST) -> object:
        parts = path.split(".")
        if len(parts) == 2 and (parts[0].endswith("_t") or parts[0] in ENUM_TYPES):
            return Enum(parts[0], parts[1])
        return _HugeCTRFunc(path)

    def _call_args(self, node: ast.Call, env: dict) -> tuple[list, list[tuple[str, object]]]:
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = self.eval(a.value, env)
                if _known(v) and isinstance(v, (list, tuple)):
                    args.extend(v)
                else:
                    args.append(self.unknown(a))
            else:
                args.append(self.eval(a, env))
        kwargs = []
        for k in node.keywords:
            v = self.eval(k.value, env)
            if k.arg is None:
                if isinstance(v, dict) and _known(v):
                    kwargs.extend((str(kk), vv) for kk, vv in v.items())
                else:
                    raise ScriptError(f"'**{self._text(k.value)}' cannot be read statically", node.lineno)
            else:
                kwargs.append((k.arg, v))
        return args, kwargs

    def call(self, node: ast.Call, env: dict) -> object:
        func = self.eval(node.func, env)
        # hugectr functions and constructors
        if isinstance(func, _HugeCTRFunc):
            args, kwargs = self._call_args(node, env)
            return self.record(func.path, args, kwargs, node, receiver=None)
        # the script's own classes: instantiation runs __init__, a method call its body, with self bound
        if isinstance(func, _BoundMethod):
            return self.call_function(func.fn, node, env, bound=func.instance)
        if isinstance(func, _Class):
            instance = _Instance(func)
            self.script.unread = [u for u in self.script.unread if u[1] != f"class {func.node.name}"]
            if "__init__" in func.methods:
                self.call_function(func.methods["__init__"], node, env, bound=instance)
            return instance
        # methods of hugectr objects
        if isinstance(node.func, ast.Attribute):
            base = self.eval(node.func.value, env)
            if isinstance(base, Obj):
                args, kwargs = self._call_args(node, env)
                owner = base.type.split(".")[0] if base.type in STATEFUL else base.type
                recv = node.func.value.id if isinstance(node.func.value, ast.Name) else None
                return self.record(f"{owner}.{node.func.attr}", args, kwargs, node, receiver=recv)
            if isinstance(base, _Parser):
                return self._argparse_method(base, node, env)
            if isinstance(base, list) and node.func.attr in ("append", "extend", "insert"):
                args, _ = self._call_args(node, env)
                if node.func.attr == "append" and len(args) == 1:
                    base.append(args[0])
                elif node.func.attr == "extend" and len(args) == 1 and isinstance(args[0], (list, tuple)):
                    base.extend(args[0])
                elif node.func.attr == "insert" and len(args) == 2 and isinstance(args[0], int):
                    base.insert(args[0], args[1])
                return None
            if isinstance(base, str) and _known(base) and node.func.attr in _STR_METHODS:
                args, kwargs = self._call_args(node, env)
                if all(_known(a) for a in args) and not kwargs:
                    try:
                        return getattr(base, node.func.attr)(*args)
                    except Exception:
                        return self.unknown(node)
                return self.unknown(node)
            if isinstance(base, dict) and not isinstance(base, _Namespace) and node.func.attr in ("get", "keys",
                                                                                                   "values", "items"):
                args, _ = self._call_args(node, env)
                if all(_known(a) for a in args):
                    return list(getattr(base, node.func.attr)(*args)) if node.func.attr != "get" else base.get(*args)
            dotted = self._dotted(node.func)
            if dotted in ("os.path.join", "path.join"):
                args, _ = self._call_args(node, env)
                if all(isinstance(a, str) for a in args):
                    import posixpath
                    return posixpath.join(*args)
                return self.unknown(node)
            if dotted in ("os.path.expanduser", "path.expanduser", "os.path.abspath", "os.path.realpath"):
                args, _ = self._call_args(node, env)
                if len(args) == 1 and isinstance(args[0], str):
                    self.script.notes.append((node.lineno, f"{dotted}({args[0]!r}) kept as written"))
                    return args[0]
                return self.unknown(node)
            if dotted in ("os.environ.get", "os.getenv"):
                args, _ = self._call_args(node, env)
                if len(args) == 2 and _known(args[1]):
                    self.script.notes.append((node.lineno, f"environment variable {args[0]!r} is not known "
                                                           f"statically; used its default {args[1]!r}"))
                    return args[1]
                return self.unknown(node)
            if node.func.attr in ("Get_size", "Get_rank") and not node.args:
                value = 1 if node.func.attr == "Get_size" else 0
                self.script.notes.append((node.lineno, f"{self._text(node)}: MPI world assumed "
                                                       "one process (rank 0 of 1)"))
                return value
            if dotted == "argparse.ArgumentParser":
                return _Parser()
            if dotted in _MATH:
                args, kwargs = self._call_args(node, env)
                if args and not kwargs and all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args):
                    try:
                        return _MATH[dotted](*args)
                    except (ValueError, TypeError, OverflowError):
                        pass
                return self.unknown(node)
        if isinstance(func, _Function):
            return self.call_function(func, node, env)
        if callable(func) and func in _SAFE_BUILTINS.values():
            args, kwargs = self._call_args(node, env)
            if all(_known(a) for a in args) and all(_known(v) for _, v in kwargs):
                if func is range and any(isinstance(a, int) and abs(a) > 10**7 for a in args):
                    return self.unknown(node)
                try:
                    out = func(*args, **dict(kwargs))
                except Exception:
                    return self.unknown(node)
                if isinstance(out, (enumerate, zip, reversed)):
                    out = list(out)
                return out
            return self.unknown(node)
        if isinstance(node.func, ast.Name) and node.func.id == "ArgumentParser":
            return _Parser()
        # Any other call: evaluate its arguments (hugectr calls inside them still count), value unknown.
        self._call_args(node, env)
        return self.unknown(node)

    def _dotted(self, node: ast.expr) -> str:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            parts.append(node.id)
        return ".".join(reversed(parts))

    def call_function(self, func: _Function, node: ast.Call, env: dict, bound: _Instance | None = None) -> object:
        if getattr(self, "_depth", 0) > 20:
            return self.unknown(node)
        args, kwargs = self._call_args(node, env)
        if bound is not None:
            args = [bound, *args]
        fn = func.node
        local = dict(func.closure)
        local.update({k: v for k, v in env.items() if k not in local})
        params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
        defaults = fn.args.defaults
        for i, p in enumerate(params):
            j = i - (len(params) - len(defaults))
            local[p] = self.eval(defaults[j], env) if j >= 0 else Unknown(p, fn.lineno)
        for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults):
            local[a.arg] = self.eval(d, env) if d is not None else Unknown(a.arg, fn.lineno)
        for p, v in zip(params, args):
            local[p] = v
        for k, v in kwargs:
            local[k] = v
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            self.exec_body(fn.body, local)
        except _Return as r:
            return r.value
        finally:
            self._depth -= 1
            # module-level names a function binds with 'global' are rare in these scripts; keep hugectr objects
            for k, v in local.items():
                if isinstance(v, Obj) and k not in env:
                    env.setdefault("__fn_objects__", {})[k] = v
        return None

    def _argparse_method(self, parser: _Parser, node: ast.Call, env: dict) -> object:
        attr = node.func.attr
        args, kwargs = self._call_args(node, env)
        kw = dict(kwargs)
        if attr == "add_argument":
            flags = [a for a in args if isinstance(a, str)]
            dest = kw.get("dest")
            if dest is None:
                longs = [f for f in flags if f.startswith("--")]
                name = (longs[0] if longs else flags[0] if flags else "")
                dest = name.lstrip("-").replace("-", "_")
            default = kw.get("default")
            if "default" not in kw and kw.get("action") == "store_true":
                default = False
            if "default" not in kw and kw.get("action") == "store_false":
                default = True
            typ = kw.get("type")
            if isinstance(default, str) and typ in (int, float) and _known(default):
                try:
                    default = typ(default)
                except ValueError:
                    pass
            parser.args[dest] = default if _known(default) else Unknown(f"--{dest}", node.lineno)
            if kw.get("required") is True and "default" not in kw:
                parser.args[dest] = Unknown(f"--{dest}", node.lineno)     # argparse stops without it
                parser.required.append(flags[0] if flags else dest)
            from . import argv as cmdline
            spec = {k: (v if _known(v) or k == "type" else cmdline.UNKNOWN) for k, v in kw.items()
                    if k != "choices" or _known(v)}
            parser.specs.append((flags, spec))
            return None
        if attr in ("parse_args", "parse_known_args"):
            given = args[0] if args else kw.get("args")
            argv = list(given) if isinstance(given, (list, tuple)) and _known(given) else self.argv
            self.script.argv_read = self.script.argv_read or argv is self.argv
            if argv is None:
                self.script.required_args += parser.required
                ns = _Namespace(parser.args)
                self.script.notes.append((node.lineno, "command-line arguments read as their argparse defaults"))
                return ns if attr == "parse_args" else (ns, [])
            from . import argv as cmdline
            try:
                values, extra = cmdline.parse(parser.specs, argv, known_only=attr == "parse_known_args")
            except ScriptError as exc:
                raise ScriptError(exc.message, node.lineno, exc.fix) from None
            ns = _Namespace({k: Unknown(f"--{k}", node.lineno) if v is cmdline.UNKNOWN else v
                             for k, v in values.items()})
            self.script.notes.append((node.lineno, f"command line: {cmdline.describe(argv)}"))
            return ns if attr == "parse_args" else (ns, extra)
        return None

    def record(self, func: str, args: list, kwargs: list, node: ast.Call, receiver: str | None) -> Obj | Call:
        if self.loop_depth_unknown and len(self.script.all_calls) > 50_000:
            raise ScriptError("too many hugectr calls to read statically", node.lineno)
        call = Call(func=func, args=args, kwargs=kwargs, line=node.lineno, in_loop=self.loop_depth_unknown > 0,
                    receiver=receiver)
        # Arguments that are calls made just now (nested) are values of this call, not statements.
        for v in [*args, *(v for _, v in kwargs)]:
            for nested in _calls_in(v):
                nested.nested = True
        self.script.all_calls.append(call)
        # A method of an object (receiver set, or reached through one) or a stateful constructor gives an object;
        # module functions such as hugectr.data.DataSourceParams are value objects like DenseLayer.
        is_method = receiver is not None or func.split(".")[0] in STATEFUL | _METHOD_OWNERS
        if is_method and func.split(".")[-1] in DATA_METHODS:
            # Arrays and numbers (predictions, metrics, losses): what the script does with them is not hugectr.
            self.script.statements.append(call)
            return Unknown(f"{func}(...)", node.lineno)
        if func.split(".")[-1] in STATEFUL or (is_method and "." in func):
            obj = Obj(func, len(self.script.all_calls) - 1)
            self.script.statements.append(call)
            return obj
        # A value-type object (DenseLayer, Input, ...): returned as the call itself, so it is inlined where used.
        self.script.statements.append(call)
        return call


# Methods that return data, not hugectr objects.
DATA_METHODS = frozenset({"predict", "evaluate", "get_eval_metrics", "get_current_loss", "get_incremental_model",
                          "check_out_tensor", "lookup", "lookup_fromdlpack", "is_eof", "get_next"})
# Owners of methods whose object was not bound to a name (model.get_learning_rate_scheduler().get_next()).
_METHOD_OWNERS = frozenset({"Model"})


def _calls_in(v: object):
    if isinstance(v, Call):
        yield v
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _calls_in(x)
    elif isinstance(v, dict) and not isinstance(v, _Namespace):
        for x in v.values():
            yield from _calls_in(x)


@dataclass(frozen=True)
class _HugeCTRFunc:
    path: str


# math functions of known numbers (iteration counts computed from sample counts: math.ceil(N / batch)).
_MATH = {"math.ceil": math.ceil, "math.floor": math.floor, "math.sqrt": math.sqrt, "math.log2": math.log2}
_STR_METHODS = frozenset({"format", "join", "replace", "strip", "lower", "upper", "split", "rstrip", "lstrip"})
ENUM_TYPES = ENUM_TYPE_NAMES


def extract(text: str, filename: str = "<script>", argv: list[str] | None = None) -> Script:
    """Read a script's hugectr calls. Raises :class:`Located` (with a line) on text that is not Python."""
    try:
        tree = ast.parse(text, filename=filename)
    except SyntaxError as exc:
        raise ScriptError(f"not valid Python: {exc.msg}", exc.lineno) from None
    except ValueError as exc:  # NUL bytes
        raise ScriptError(f"not valid Python: {exc}") from None
    try:
        script = Interpreter(filename, text, argv).run(tree)
    except RecursionError:
        raise ScriptError("the script nests too deeply to read statically") from None
    # Statements: every call that is not an argument of another hugectr call.
    script.statements = [c for c in script.statements if not c.nested]
    return script


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
