"""The evaluator's scopes and objects: frames, the script's functions, classes and instances, control flow.

Python's scoping rules are followed: a name a function assigns anywhere in its body is local to it (unless declared
``global``/``nonlocal``), other names are looked up in the enclosing functions, then the module, then the builtins.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Callable

MAX_STEPS = 400_000       # statements and loop iterations of one script (a training loop of 10^6 steps is not read)
MAX_DEPTH = 40            # nested calls of the script's own functions


def col_of(node: ast.AST) -> int | None:
    col = getattr(node, "col_offset", None)
    return None if col is None else col + 1


class Unk(Exception):
    """Raised inside an expression that touches an unknown; the expression's value becomes an :class:`Unknown`."""

    def __init__(self, why: str = ""):
        self.why = why


class Raised(Exception):
    """A Python exception the script raises (``exc`` is the real exception object CPython's operation raised)."""

    def __init__(self, exc: BaseException, line: int):
        self.exc, self.line = exc, line


# Exceptions CPython's own operations raise on the values the evaluator hands them: the script raises them too.
_PYTHON_ERRORS = (ArithmeticError, LookupError, TypeError, ValueError, AttributeError, AssertionError)


def expr(node: ast.AST, fn: Callable[[], object]) -> object:
    """CPython's operation; the Python exceptions it raises are the script's (``Raised``)."""
    try:
        return fn()
    except Unk:
        raise
    except _PYTHON_ERRORS as exc:
        raise Raised(exc, getattr(node, "lineno", 0)) from None
    except RecursionError:
        raise Unk("too deep to compute statically") from None


class Break(Exception):
    pass


class Continue(Exception):
    pass


class Return(Exception):
    def __init__(self, value: object):
        self.value = value


@dataclass
class Frame:
    """One scope: module (``local_names`` None) or a function call, with the enclosing function scopes."""

    globals: dict
    locals: dict
    local_names: frozenset | None = None            # names a function assigns (None: module level)
    global_names: frozenset = frozenset()
    nonlocal_names: frozenset = frozenset()
    enclosing: tuple = ()                           # enclosing function frames, innermost first
    depth: int = 0                                  # position in the call stack (uncertain regions compare it)


@dataclass
class Function:
    node: ast.FunctionDef | ast.Lambda
    frame: Frame                                    # where it was defined
    defaults: list                                  # evaluated once, at definition (shared mutable defaults)
    kw_defaults: list
    scope: tuple = ()                               # (local names, global names, nonlocal names)
    name: str = ""


@dataclass
class Class:
    """A class of the script: its namespace (methods, attributes); instances are :class:`Instance`."""

    node: ast.ClassDef
    namespace: dict


class Instance:
    """An object of a script's class; ``self.x = ...`` in its methods binds ``attrs['x']``."""

    def __init__(self, cls: Class):
        self.cls = cls
        self.attrs: dict = {}


@dataclass(frozen=True)
class BoundMethod:
    fn: Function
    instance: Instance


@dataclass
class Region:
    """An uncertain region: code that may run any number of times (or not at all)."""

    depth: int                                      # frames at or below this depth existed before it
    why: str
    effects: int = 0                                # what the world had recorded when it started
    loops: int = 0                                  # loops running when it started (a break in it ends loop #loops)
    escaped: bool = False                           # a break/continue in it ends or skips that loop


class Escape(Exception):
    """A break or continue under a condition that cannot be known: the loop it belongs to has an unknown length."""

    def __init__(self, why: str):
        self.why = why


def scope_of(node: ast.FunctionDef | ast.Lambda) -> tuple[frozenset, frozenset, frozenset]:
    """(local, global, nonlocal) names of a function, by Python's rules (assigned anywhere in its body)."""
    args = node.args
    params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    stored: set[str] = set()
    glob: set[str] = set()
    nonloc: set[str] = set()
    body = node.body if isinstance(node.body, list) else [ast.Expr(node.body)]
    todo: list[ast.AST] = list(body)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Global):
            glob.update(n.names)
        elif isinstance(n, ast.Nonlocal):
            nonloc.update(n.names)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            stored.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stored.add(n.name)
            todo.extend(n.decorator_list)
            if not isinstance(n, ast.ClassDef):
                todo.extend([*n.args.defaults, *(d for d in n.args.kw_defaults if d is not None)])
            continue
        elif isinstance(n, ast.Lambda):
            todo.extend([*n.args.defaults, *(d for d in n.args.kw_defaults if d is not None)])
            continue
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            stored.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            stored.add(n.name)
        elif isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            todo.append(n.generators[0].iter)   # the rest is the comprehension's own scope
            todo.extend(x for x in ast.walk(n) if isinstance(x, ast.NamedExpr))
            continue
        todo.extend(ast.iter_child_nodes(n))
    return frozenset((stored | params) - glob - nonloc), frozenset(glob), frozenset(nonloc)


def stored_names(body: list[ast.stmt]) -> set[str]:
    """Names a block of statements may bind (not inside nested functions or classes)."""
    out: set[str] = set()
    todo: list[ast.AST] = list(body)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
            continue
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
        elif isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)):
            continue
        todo.extend(ast.iter_child_nodes(n))
    return out


@dataclass
class Budget:
    steps: int = 0
    depth: int = 0
    regions: list = field(default_factory=list)


def bind_parameters(fn: Function, args: list, kwargs: dict, out: dict, line: int) -> None:
    """Python's binding of a call's arguments to ``fn``'s parameters; a mismatch is the TypeError Python raises."""
    a = fn.node.args
    positional = [p.arg for p in (*a.posonlyargs, *a.args)]
    if len(args) > len(positional) and a.vararg is None:
        raise Raised(TypeError(f"{fn.name}() takes {len(positional)} positional arguments but {len(args)} were "
                               "given"), line)
    for name, v in zip(positional, args):
        out[name] = v
    if a.vararg is not None:
        out[a.vararg.arg] = tuple(args[len(positional):])
    extra: dict = {}
    posonly = {p.arg for p in a.posonlyargs}
    kwonly = [p.arg for p in a.kwonlyargs]
    for k, v in kwargs.items():
        if (k in positional and k not in posonly) or k in kwonly:
            if k in out:
                raise Raised(TypeError(f"{fn.name}() got multiple values for argument {k!r}"), line)
            out[k] = v
        elif a.kwarg is not None:
            extra[k] = v
        else:
            raise Raised(TypeError(f"{fn.name}() got an unexpected keyword argument {k!r}"), line)
    first_default = len(positional) - len(fn.defaults)
    for i, name in enumerate(positional):
        if name not in out:
            if i >= first_default:
                out[name] = fn.defaults[i - first_default]
            else:
                raise Raised(TypeError(f"{fn.name}() missing required argument {name!r}"), line)
    for name, d in zip(kwonly, fn.kw_defaults):
        if name not in out:
            if d is None and not _has_kw_default(fn, name):
                raise Raised(TypeError(f"{fn.name}() missing required keyword-only argument {name!r}"), line)
            out[name] = d
    if a.kwarg is not None:
        out[a.kwarg.arg] = extra


def _has_kw_default(fn: Function, name: str) -> bool:
    for p, d in zip(fn.node.args.kwonlyargs, fn.node.args.kw_defaults):
        if p.arg == name:
            return d is not None
    return False
