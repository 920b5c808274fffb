"""A Python evaluator that never runs the script: CPython's value for what it models, an Unknown for the rest.

The rule: every construct it accepts gives exactly the value CPython gives, using CPython's own operations on plain
values (:func:`.values.plain`) with the script's scoping (locals, closures, ``global``/``nonlocal``, defaults
evaluated once), control flow (``for``/``while`` with ``break``/``continue``/``else``, ``try``/``except`` over the
exceptions its operations raise, ``return``) and object identity (lists, dicts and sets are shared, never copied).
Whatever it cannot follow exactly becomes an :class:`Unknown`, and a region whose effect depends on one (a loop of
unknown length, a branch on an unknown condition) leaves every name it assigns unknown and every container it
mutates *tainted* (read back as unknown).

One class, :class:`Evaluator`: the state and the statements. Expressions (:mod:`.expressions`) and what uncertain
code may have changed (:mod:`.poison`) are functions over it. It knows Python only: what a script imports and the
objects those modules make come from the :class:`.world.World` it is given (:class:`Nothing` models none;
:class:`.calls.Reader` holds an evaluator and is the world of a training script).
"""

from __future__ import annotations

import ast
from contextlib import nullcontext
from typing import ContextManager

from ..errors import Located
from . import builtins as B
from . import expressions as X
from . import poison as P
from .scopes import (MAX_STEPS, Break, Budget, Class, Continue, Escape, Frame, Function, Instance, Raised, Region,
                     Return, Unk, col_of, expr, stored_names)
from .values import Unknown
from .world import World


class Evaluator:
    """Reads a module: statements in order, expressions to values (see the module docstring)."""

    def __init__(self, filename: str, source: str, world: World | None = None):
        self.filename = filename
        self.source = source
        self.world: World = world if world is not None else Nothing(self)
        self.budget = Budget()
        self.tainted: dict[int, object] = {}       # id -> container an uncertain region may have changed
        self.unknowns = 0                           # unknowns made so far (a try body that made one may raise)
        self.try_marks: list[list[int | None]] = []  # per open try body: the world's effects at its first unknown
        self.loop_depth = 0                         # loops whose body is running

    def run_module(self, tree: ast.Module) -> Frame:
        frame = Frame({"__name__": "__main__"}, {})
        frame.locals = frame.globals
        try:
            self.exec_body(tree.body, frame)
        except Raised as r:
            raise Located(f"the script stops here with {type(r.exc).__name__}: {r.exc} when it runs", r.line,
                          "read a script that runs to its end") from None
        return frame

    # ---- helpers -----------------------------------------------------------------------------------------------
    def text(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.source, node) or ast.dump(node)[:60]

    def unknown(self, node: ast.AST, why: str = "") -> Unknown:
        self.unknowns += 1
        for mark in reversed(self.try_marks):   # an inner try's first unknown is its outer ones' too, if first
            if mark[0] is not None:
                break
            mark[0] = self.world.effects_made()
        col = getattr(node, "col_offset", None)
        return Unknown(self.text(node), getattr(node, "lineno", 0), None if col is None else col + 1, why)

    def step(self, node: ast.AST) -> None:
        self.budget.steps += 1
        if self.budget.steps > MAX_STEPS:
            raise Located(f"the script takes more than {MAX_STEPS} steps to read statically (a loop this long "
                          "is not a model definition)", getattr(node, "lineno", None),
                          "import the graph JSON the script writes instead", col=col_of(node))

    def untaint(self, v: object) -> object:
        if id(v) in self.tainted and self.tainted[id(v)] is v:
            raise Unk("a loop or branch whose effect cannot be known statically changes it")
        return v

    def taint(self, v: object) -> None:
        if isinstance(v, (list, dict, set, Instance)):
            self.tainted[id(v)] = v

    @property
    def uncertain(self) -> Region | None:
        return self.budget.regions[-1] if self.budget.regions else None

    # ---- names -------------------------------------------------------------------------------------------------
    def lookup(self, frame: Frame, name: str, node: ast.Name) -> object:
        if frame.local_names is not None:
            if name in frame.global_names:
                return self._global(frame, name, node)
            if name in frame.local_names:
                if name in frame.locals:
                    return frame.locals[name]
                raise Raised(UnboundLocalError(f"local variable {name!r} referenced before assignment"),
                             node.lineno)
            for outer in frame.enclosing:
                if name in outer.locals:
                    return outer.locals[name]
        return self._global(frame, name, node)

    def _global(self, frame: Frame, name: str, node: ast.Name) -> object:
        if name in frame.globals:
            return frame.globals[name]
        if name in B.BUILTINS:
            return B.BUILTINS[name]
        return self.world.name_other(name, node)

    def bind(self, frame: Frame, name: str, value: object) -> None:
        target = frame.locals
        if frame.local_names is not None:
            if name in frame.global_names:
                target = frame.globals
            elif name in frame.nonlocal_names:
                target = next((f.locals for f in frame.enclosing if name in f.locals), frame.locals)
        region = self.uncertain
        if region is not None and (target is frame.globals or frame.depth <= region.depth
                                   or target is not frame.locals):
            value = Unknown(name, 0, None, region.why)
        target[name] = value

    # ---- statements --------------------------------------------------------------------------------------------
    def exec_body(self, body: list[ast.stmt], frame: Frame) -> None:
        for stmt in body:
            self.exec_stmt(stmt, frame)

    def exec_stmt(self, node: ast.stmt, frame: Frame) -> None:
        self.step(node)
        method = getattr(self, "s_" + type(node).__name__, None)
        if method is None:
            P.poison(self, [node], frame, f"{type(node).__name__} statements are not modelled")
            return
        try:
            method(node, frame)
        except Unk as u:
            # A statement whose effect cannot be followed (an unknown subscript target, ...): what it may change
            # is unknown from here on.
            P.poison(self, [node], frame, u.why or "this statement cannot be followed statically")

    def s_Expr(self, node: ast.Expr, frame: Frame) -> None:
        X.evaluate(self, node.value, frame)

    def s_Pass(self, node: ast.Pass, frame: Frame) -> None:
        pass

    def s_Global(self, node: ast.Global, frame: Frame) -> None:
        pass   # scope_of() read it when the function was defined

    s_Nonlocal = s_Global

    def s_Break(self, node: ast.Break, frame: Frame) -> None:
        raise Break()

    def s_Continue(self, node: ast.Continue, frame: Frame) -> None:
        raise Continue()

    def s_Return(self, node: ast.Return, frame: Frame) -> None:
        raise Return(X.evaluate(self, node.value, frame) if node.value is not None else None)

    def s_Import(self, node: ast.Import, frame: Frame) -> None:
        self.world.import_module(node, frame)

    s_ImportFrom = s_Import

    def s_Assign(self, node: ast.Assign, frame: Frame) -> None:
        value = X.evaluate(self, node.value, frame)
        for target in node.targets:
            X.assign(self, target, value, frame, node)

    def s_AnnAssign(self, node: ast.AnnAssign, frame: Frame) -> None:
        if node.value is not None:
            X.assign(self, node.target, X.evaluate(self, node.value, frame), frame, node)

    def s_AugAssign(self, node: ast.AugAssign, frame: Frame) -> None:
        t = node.target
        if isinstance(t, ast.Name):
            cur = X.evaluate(self, ast.copy_location(ast.Name(t.id, ast.Load()), t), frame)
            X.assign(self, t, self.augmented(node, cur, frame), frame, node)
        elif isinstance(t, ast.Subscript):
            base = X.evaluate(self, t.value, frame)
            key = X.evaluate(self, t.slice, frame)
            cur = expr(node, lambda: B.subscript(base, key))
            X.store_item(self, base, key, self.augmented(node, cur, frame), node)
        elif isinstance(t, ast.Attribute):
            base = X.evaluate(self, t.value, frame)
            cur = X.evaluate(self, ast.copy_location(ast.Attribute(t.value, t.attr, ast.Load()), t), frame)
            X.store_attr(self, base, t.attr, self.augmented(node, cur, frame), node)

    def augmented(self, node: ast.AugAssign, cur: object, frame: Frame) -> object:
        right = X.evaluate(self, node.value, frame)
        if isinstance(cur, (list, dict, set)) and self.uncertain is not None:
            self.taint(cur)                                   # += on a list changes it in place
            return cur
        return expr(node, lambda: B.binop(type(node.op), cur, right, inplace=True))

    def s_Delete(self, node: ast.Delete, frame: Frame) -> None:
        P.poison(self, [node], frame, "del is not modelled")

    def s_FunctionDef(self, node: ast.FunctionDef, frame: Frame) -> None:
        if node.decorator_list:
            self.bind(frame, node.name, self.unknown(node, "a decorated function is not modelled"))
            return
        self.bind(frame, node.name, X.make_function(self, node, frame))

    def s_AsyncFunctionDef(self, node: ast.AsyncFunctionDef, frame: Frame) -> None:
        self.bind(frame, node.name, self.unknown(node, "async functions are not modelled"))

    def s_ClassDef(self, node: ast.ClassDef, frame: Frame) -> None:
        self._class(node, frame)
        self.world.class_defined(node)

    def _class(self, node: ast.ClassDef, frame: Frame) -> None:
        if node.bases or node.keywords or node.decorator_list:
            # Inheritance (an nn.Module, a dataclass): attribute lookup through bases is not modelled.
            self.bind(frame, node.name, self.unknown(node, "a class with bases or decorators is not modelled"))
            return
        ns: dict = {}
        body_frame = Frame(frame.globals, ns, None if frame.local_names is None else frozenset(), frozenset(),
                           frozenset(), frame.enclosing, frame.depth)
        if frame.local_names is None:
            body_frame = Frame(frame.globals, ns, frozenset(stored_names(node.body)), frozenset(), frozenset(),
                               (), frame.depth)
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef) and not stmt.decorator_list:
                ns[stmt.name] = X.make_function(self, stmt, frame)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Pass, ast.Expr)):
                self.exec_stmt(stmt, body_frame)
            else:
                ns[getattr(stmt, "name", "?")] = self.unknown(stmt, "this class statement is not modelled")
        self.bind(frame, node.name, Class(node, ns))

    def s_If(self, node: ast.If, frame: Frame) -> None:
        cond = X.truth(self, node.test, frame)
        if isinstance(cond, Unknown):
            self.uncertain_run([node.body, node.orelse], frame, node, f"the condition {self.text(node.test)!r} "
                               "cannot be known statically")
        elif cond:
            self.exec_body(node.body, frame)
        else:
            self.exec_body(node.orelse, frame)

    def s_While(self, node: ast.While, frame: Frame) -> None:
        made = self.world.effects_made()
        while True:
            cond = X.truth(self, node.test, frame)
            if isinstance(cond, Unknown):
                self.uncertain_run([node.body, node.orelse], frame, node, f"the loop condition "
                                   f"{self.text(node.test)!r} cannot be known statically", loop=True)
                return
            if not cond:
                self.exec_body(node.orelse, frame)
                return
            self.step(node)
            if self._iteration(node, frame, made):
                return

    def _iteration(self, node: ast.For | ast.While, frame: Frame, made: int) -> bool:
        """Run the loop body once; True when the loop ends here (a break, or a break/continue on an unknown)."""
        self.loop_depth += 1
        try:
            self.exec_body(node.body, frame)
        except Break:
            return True
        except Continue:
            pass
        except Escape as e:
            self.loop_depth -= 1
            why = f"{e.why}, and it may end or skip an iteration of the loop at line {node.lineno}"
            target = node.target if isinstance(node, ast.For) else None
            try:
                self.uncertain_run([node.body, node.orelse], frame, node, why, loop=True, target=target)
            except Escape:
                pass
            if self.world.effects_made() > made:
                self.world.uncertain_effects(node, why, True)
            self.loop_depth += 1
            return True
        finally:
            self.loop_depth -= 1
        return False

    def s_For(self, node: ast.For, frame: Frame) -> None:
        it = X.iter_source(self, node.iter, frame)
        items = X.iterate(self, it, node.iter, whole=False)
        limit = self.world.unroll_limit(node)
        if not isinstance(items, Unknown) and limit is not None and len(items) > limit:
            items = self.unknown(node.iter, f"a loop of {len(items)} iterations is not unrolled")
        if isinstance(items, Unknown):
            self.uncertain_run([node.body, node.orelse], frame, node, f"the loop over {self.text(node.iter)!r} "
                               "has an unknown length", loop=True, target=node.target)
            return
        made = self.world.effects_made()
        for item in items:
            self.step(node)
            X.assign(self, node.target, item, frame, node)
            if self._iteration(node, frame, made):
                return
        self.exec_body(node.orelse, frame)

    def s_With(self, node: ast.With, frame: Frame) -> None:
        for item in node.items:
            v = X.evaluate(self, item.context_expr, frame)
            if item.optional_vars is not None:
                value = v if not isinstance(v, Unknown) else self.unknown(item.context_expr, v.why)
                X.assign(self, item.optional_vars, value, frame, node)
        self.exec_body(node.body, frame)

    def s_Try(self, node: ast.Try, frame: Frame) -> None:
        made, calls = self.unknowns, self.world.effects_made()
        mark: list[int | None] = [None]
        self.try_marks.append(mark)
        try:
            try:
                try:
                    self.exec_body(node.body, frame)
                finally:
                    self.try_marks.remove(mark)
            except Raised as r:
                handler = self.handler_for(r, node, frame)
                if handler is None:
                    raise
                if handler.name:
                    self.bind(frame, handler.name, r.exc)
                self.exec_body(handler.body, frame)
            else:
                if node.handlers and self.unknowns > made:
                    self._try_may_raise(node, frame, calls, mark[0])
                else:
                    self.exec_body(node.orelse, frame)
        finally:
            self.exec_body(node.finalbody, frame)

    def _try_may_raise(self, node: ast.Try, frame: Frame, calls: int, first: int | None) -> None:
        """An operation on an unknown in the body may raise when the script runs: which handler runs, how much of
        the body, and whether the else block runs, are not known."""
        why = "an operation in the try block may raise when the script runs"
        if first is not None and calls < first == self.world.effects_made():
            # Every effect of the body came before the first operation that may raise (try: model.fit(...); then
            # code the evaluator does not model): the effects happen either way; the rest is an uncertain region.
            self.world.try_rest_skipped(node, first)
            P.poison(self, node.body, frame, why)
            self.uncertain_run([*(h.body for h in node.handlers), node.orelse], frame, node, why)
            return
        self.uncertain_run([node.body, *(h.body for h in node.handlers), node.orelse], frame, node, why)

    def handler_for(self, r: Raised, node: ast.Try, frame: Frame) -> ast.ExceptHandler | None:
        for h in node.handlers:
            if h.type is None:
                return h
            t = X.evaluate(self, h.type, frame)
            types = t if isinstance(t, tuple) else (t,)
            if not all(isinstance(x, type) and issubclass(x, BaseException) for x in types):
                raise Located("the exception an except clause catches cannot be known statically",
                              h.lineno, "catch built-in exception types", col=col_of(h))
            if isinstance(r.exc, types):
                return h
        return None

    def s_Raise(self, node: ast.Raise, frame: Frame) -> None:
        exc = X.evaluate(self, node.exc, frame) if node.exc is not None else None
        if isinstance(exc, type) and issubclass(exc, BaseException):
            exc = expr(node, lambda: exc())  # type: ignore[misc,operator]
        if not isinstance(exc, BaseException) and isinstance(node.exc, ast.Call):
            # RuntimeError(f"... {value}"): the type is known, the message only when the script runs.
            cls = X.evaluate(self, node.exc.func, frame)
            if isinstance(cls, type) and issubclass(cls, BaseException):
                exc = cls("(its message is known only when the script runs)")
        if isinstance(exc, BaseException):
            raise Raised(exc, node.lineno)
        if self.uncertain is not None:
            raise Raised(Exception("an exception known only when the script runs"), node.lineno)
        raise Located(f"the script raises {self.text(node.exc or node)} here when it runs", node.lineno,
                      "read a script that runs to its end", col=col_of(node))

    def s_Assert(self, node: ast.Assert, frame: Frame) -> None:
        cond = X.truth(self, node.test, frame)
        if cond is False:
            raise Raised(AssertionError(), node.lineno)

    # ---- uncertain regions ---------------------------------------------------------------------------------------
    def uncertain_run(self, bodies: list[list[ast.stmt]], frame: Frame, node: ast.stmt, why: str,
                      loop: bool = False, target: ast.expr | None = None) -> None:
        """Code that may run any number of times, or not at all: run once with every assignment to an existing
        scope unknown and every mutation a taint; then do the same for what the run did not reach."""
        region = Region(frame.depth, why, self.world.effects_made(), self.loop_depth)
        self.budget.regions.append(region)
        self.loop_depth += loop
        try:
            if target is not None:
                X.assign(self, target, self.unknown(target, why), frame, node)
            for body in bodies:
                try:
                    self.exec_body(body, frame)
                except (Break, Continue):
                    # A break/continue of a loop outside the region (loop number loop_depth): every region that
                    # started inside that loop's body may have been cut short.
                    if not loop:
                        for r in self.budget.regions:
                            r.escaped = r.escaped or r.loops == self.loop_depth
                except (Escape, Raised, Unk):
                    pass
                except Return:
                    raise Located(f"a return whose running depends on what cannot be known statically ({why})",
                                  node.lineno, "pass the values with --args or literals", col=col_of(node)) from None
        finally:
            self.loop_depth -= loop
            self.budget.regions.pop()
        P.poison(self, bodies[0] + [s for b in bodies[1:] for s in b], frame, why)
        if self.world.effects_made() > region.effects:
            self.world.uncertain_effects(node, why, loop)
        if region.escaped and not any(r.loops == region.loops for r in self.budget.regions):
            raise Escape(why)       # the outermost such region: the loop itself must hear of it


class Nothing:
    """The world of a script that imports nothing: every module, and whatever is not Python's own, is unknown."""

    def __init__(self, ev: Evaluator):
        self.ev = ev

    def name_other(self, name: str, node: ast.Name) -> object:
        raise Unk(f"name {name!r} is not defined statically")

    def import_module(self, node: ast.Import | ast.ImportFrom, frame: Frame) -> None:
        for a in node.names:
            self.ev.bind(frame, (a.asname or a.name).split(".")[0], Unknown(f"module {a.name}", node.lineno))

    def resolve_dotted(self, node: ast.expr) -> object:
        return None

    def attribute_other(self, base: object, node: ast.Attribute, frame: Frame) -> object:
        raise Unk(f"attribute {node.attr!r} is not modelled")

    def call_other(self, node: ast.Call, func: object, frame: Frame) -> object:
        X.call_args(self.ev, node, frame)
        raise Unk(f"{self.ev.text(node.func)}(...) is not modelled")

    def call_method_other(self, node: ast.Call, base: object, frame: Frame) -> object:
        X.call_args(self.ev, node, frame)
        B.need(base)
        raise Unk(f"{self.ev.text(node.func)}(...) is not modelled")

    def call_value_other(self, func: object, args: list, node: ast.Call) -> object:
        B.need(func)
        raise Unk("a function value that is not the script's own or a modelled builtin is not modelled")

    def passed(self, node: ast.Call, values: list) -> None:
        pass

    def function_context(self, fn: Function) -> ContextManager[object]:
        return nullcontext()

    def class_defined(self, node: ast.ClassDef) -> None:
        pass

    def instantiated(self, cls: Class) -> None:
        pass

    def unroll_limit(self, node: ast.For) -> int | None:
        return None

    def effects_made(self) -> int:
        return 0        # so neither uncertain_effects nor try_rest_skipped is ever asked

    def uncertain_effects(self, node: ast.stmt, why: str, loop: bool) -> None:
        pass

    def try_rest_skipped(self, node: ast.Try, effects: int) -> None:
        pass

    def read_only_skipped(self, call: ast.Call) -> None:
        pass
