"""A HugeCTR script read statically: the hugectr calls it makes, in order, with their argument values.

Nothing is imported or executed: :class:`Reader` holds an evaluator (:mod:`.evaluator`, Python's own value or an
unknown) and is its world (:class:`.world.World`), the outside a training script touches — the ``hugectr`` module
(every call recorded as a :class:`Call`), the standard library (:mod:`.stdlib`) and the constants of a few
third-party modules (:mod:`.known_modules`).

Calls nested as arguments (``model.add(hugectr.DenseLayer(...))``) are values of their parent; a value-type object
built first and passed by name (``layer = hugectr.DenseLayer(...); model.add(layer)``) is inlined where it is used,
so both styles give the same sequence. Objects with state (the model, solver, reader, optimizer, caches) stay
references (:class:`Obj`).
"""

from __future__ import annotations

import ast
import sys
from contextlib import contextmanager, nullcontext
from typing import ContextManager

from ..errors import Located
from ..graph.ir import Enum
from ..hugectr.versions import ENUM_TYPE_NAMES
from . import builtins as B
from . import expressions as X
from . import files, stdlib
from .evaluator import Evaluator
from .known_modules import module_value
from .modules import THIRD_PARTY, ModuleContext, Modules
from .scopes import Class, Frame, Function, Unk, col_of, expr
from .values import Call, ModuleConstants, Namespace, Obj, Script, Unknown, value_repr

__all__ = ["Call", "Obj", "Script", "Unknown", "extract", "value_repr", "STATEFUL", "DATA_METHODS"]

# Constructors whose objects have identity and state: passed by reference, their calls are statements.
STATEFUL = frozenset({
    "Model", "ModelPerfExt", "CreateSolver", "CreateOptimizer", "DataReaderParams", "CreateMOS", "CreateETC",
    "CreateHMemCache", "CreateInferenceSession", "CreateInferenceParams", "InferenceParams", "InferenceModel",
    "EmbeddingCollectionConfig", "EmbeddingPlanner", "DataGenerator", "DataSource",
})
# Methods that return data, not hugectr objects.
DATA_METHODS = frozenset({"predict", "evaluate", "get_eval_metrics", "get_current_loss", "get_incremental_model",
                          "check_out_tensor", "lookup", "lookup_fromdlpack", "is_eof", "get_next"})
# Owners of methods whose object was not bound to a name (model.get_learning_rate_scheduler().get_next()).
_METHOD_OWNERS = frozenset({"Model"})
# Known lengths a loop over hugectr calls may be unrolled to (a training loop of 10^5 iterations is not a model).
MAX_UNROLL = 512
ENUM_TYPES = ENUM_TYPE_NAMES
ScriptError = Located  # old name (codegen.errors.Located: message, line), kept for a transition


class HugeCTRFunc:
    """A hugectr function or constructor (``hugectr.DenseLayer``), named by its path below the module."""

    def __init__(self, path: str):
        self.path = path


def _module_namespace(consts: dict) -> Namespace:
    return ModuleConstants({k: _module_namespace(v) if isinstance(v, dict) else v for k, v in consts.items()})


class Reader:
    """The world of a training script (:class:`.world.World`) around its evaluator ``ev``: what it imports, the
    hugectr calls it makes (recorded in ``script``)."""

    def __init__(self, filename: str, source: str, argv: list[str] | None = None, modules: Modules | None = None):
        self.ev = Evaluator(filename, source, self)
        self.modules = modules or Modules()          # the script's own modules (beside it, or the notebook writes)
        self.loaded: dict[str, dict | None] = {}     # module name -> its globals (None: being read)
        self.contexts: dict[int, ModuleContext] = {}  # id of a module's globals -> what names mean there
        self.script = Script(filename)
        self.argv = argv                            # the command line it runs with (None: argparse defaults)
        self.hugectr_modules: dict[str, str] = {}   # local name -> "hugectr" / "hugectr.inference" / ...
        self.hugectr_names: dict[str, str] = {}     # local name -> qualified hugectr attribute ("Layer_t")

    # ---- the module ------------------------------------------------------------------------------------------
    def run(self, tree: ast.Module) -> Script:
        frame = self.ev.run_module(tree)
        if not any(c.func == "Model" for c in self.script.all_calls):
            # A model built in a function the module never calls statically (a thread target, a CLI callback):
            # read the first such function as if called with its defaults.
            for name, fn in list(frame.globals.items()):
                if isinstance(fn, Function) and isinstance(fn.node, ast.FunctionDef) \
                        and "Model(" in (ast.get_source_segment(self.ev.source, fn.node) or ""):
                    self.script.notes.append((fn.node.lineno, f"function {name}() is not called statically; read "
                                                              "as if called with its default arguments"))
                    X.call_function(self.ev, fn, [], self._unknown_arguments(fn), fn.node)
                    break
        return self.script

    def _unknown_arguments(self, fn: Function) -> dict:
        """The parameters without a default of a function read although never called: unknown values."""
        a = fn.node.args
        params = [*a.args[:len(a.args) - len(a.defaults)],
                  *(p for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is None)]
        return {p.arg: Unknown(p.arg, fn.node.lineno, None, f"parameter {p.arg!r} of {fn.name}(), which the module "
                                                             "never calls statically") for p in params}

    def import_module(self, node: ast.Import | ast.ImportFrom, frame: Frame) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "hugectr" or a.name.startswith("hugectr."):
                    local = a.asname or a.name.split(".")[0]
                    self.hugectr_modules[local] = a.name if a.asname else "hugectr"
                    continue
                bound = a.name if a.asname else a.name.split(".")[0]
                own = self._own_module(a.name, node)
                if own is not None and (a.asname or "." not in a.name):
                    self.ev.bind(frame, a.asname or bound, Namespace(own))
                    continue
                self.ev.bind(frame, a.asname or bound, self._module(bound, node))
            return
        mod = node.module or ""
        for a in node.names:
            local = a.asname or a.name
            if mod == "hugectr" or mod.startswith("hugectr."):
                if a.name == "*":
                    self.hugectr_modules["*"] = mod
                    continue
                self.hugectr_names[local] = (mod + "." + a.name)[len("hugectr."):] if mod != "hugectr" else a.name
                frame.globals.pop(local, None)
            elif (own := self._own_module(mod, node) if node.level == 0 else None) is not None:
                names = [k for k in own if not k.startswith("_")] if a.name == "*" else [a.name]
                for k in names:
                    self.ev.bind(frame, local if a.name != "*" else k, own[k] if k in own else Unknown(
                        f"{mod}.{k}", node.lineno, col_of(node), f"module {mod} defines no {k} statically"))
            elif a.name != "*":
                self.ev.bind(frame, local, self._module(f"{mod}.{a.name}", node))

    def _own_module(self, dotted: str, node: ast.stmt) -> dict | None:
        """The globals of the script's own module ``dotted`` (read once, never executed), or None."""
        top = dotted.split(".")[0]
        if top in stdlib.MODULES or dotted in stdlib.MODULES or module_value(dotted) is not None \
                or top in ("os", "sys", "math", "argparse", "mpi4py", "hugectr"):
            return None
        if dotted in self.loaded:
            if self.loaded[dotted] is None:
                raise ScriptError(f"module {dotted} imports itself again (a cycle is not read statically)",
                                  node.lineno)
            return self.loaded[dotted]
        written = self.script.written.get(dotted.replace(".", "/") + ".py")
        found = (dotted.replace(".", "/") + ".py", written) if written else self.modules.find(dotted)
        if found is None:
            if top not in sys.stdlib_module_names and top not in THIRD_PARTY:
                self.script.unfollowed.append((node.lineno, dotted))
            return None
        filename, text = found
        try:
            tree = ast.parse(text, filename=filename)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            raise ScriptError(f"module {dotted} ({filename}) is not valid Python", node.lineno) from None
        ctx = ModuleContext(filename, text, {}, {})
        frame = Frame({"__name__": dotted}, {})
        frame.locals = frame.globals
        self.loaded[dotted] = None
        self.contexts[id(frame.globals)] = ctx
        with self._in_module(ctx):
            self.ev.exec_body(tree.body, frame)
        self.loaded[dotted] = frame.globals
        self.script.notes.append((node.lineno, f"module {dotted} read from {filename} (never executed)"))
        return frame.globals

    @contextmanager
    def _in_module(self, ctx: ModuleContext):
        """Names, hugectr aliases and source text of module ``ctx`` while its code runs."""
        ev = self.ev
        saved = ModuleContext(ev.filename, ev.source, self.hugectr_modules, self.hugectr_names)
        ev.filename, ev.source, self.hugectr_modules, self.hugectr_names = \
            ctx.filename, ctx.source, ctx.hugectr_modules, ctx.hugectr_names
        try:
            yield
        finally:
            ev.filename, ev.source, self.hugectr_modules, self.hugectr_names = \
                saved.filename, saved.source, saved.hugectr_modules, saved.hugectr_names

    def function_context(self, fn: Function) -> ContextManager[object]:
        """A function of one of the script's own modules runs with that module's names and text."""
        ctx = self.contexts.get(id(fn.frame.globals))
        if ctx is None or ctx.source is self.ev.source:
            return nullcontext()
        return self._in_module(ctx)

    def _module(self, dotted: str, node: ast.stmt) -> object:
        if dotted in stdlib.MODULES or dotted in ("mpi4py.MPI",):
            return stdlib.Module(dotted)
        if dotted.startswith(("os.", "math.", "argparse.")):
            return stdlib.Module(dotted)
        known = module_value(dotted)
        if known is not None:
            return _module_namespace(known)
        return Unknown(f"module {dotted}", node.lineno, col_of(node), f"module {dotted} is not modelled")

    def name_other(self, name: str, node: ast.Name) -> object:
        if name in self.hugectr_names:
            return self._hugectr_value(self.hugectr_names[name])
        if name == "ArgumentParser":
            return stdlib.Module("argparse.ArgumentParser")
        if name == "open":
            return files.OPEN
        raise Unk(f"name {name!r} is not defined statically")

    # ---- dotted names and attributes ---------------------------------------------------------------------------
    def resolve_dotted(self, node: ast.expr) -> object:
        path = self.hugectr_path(node)
        if path is not None:
            return self._hugectr_value(path)
        return None

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
        if node.id in self.hugectr_names and parts:
            return ".".join([self.hugectr_names[node.id], *parts])
        return None

    def _hugectr_value(self, path: str) -> object:
        parts = path.split(".")
        if len(parts) == 2 and (parts[0].endswith("_t") or parts[0] in ENUM_TYPES):
            return Enum(parts[0], parts[1])
        return HugeCTRFunc(path)

    def attribute_other(self, base: object, node: ast.Attribute, frame: Frame) -> object:
        if self.argv is not None and isinstance(base, stdlib.Module) and base.name == "sys" and node.attr == "argv":
            self.script.argv_read = True
            return [self.script.filename.rsplit("/", 1)[-1], *self.argv]
        if isinstance(base, stdlib.Module):
            return stdlib.attribute(base, node.attr)
        if isinstance(base, B.Builtin) and base.name == "str" and node.attr in stdlib.STR_FUNCS:
            return stdlib.STR_FUNCS[node.attr]
        if isinstance(base, Obj):
            return Obj(f"{base.type}.{node.attr}", -1)
        if isinstance(base, Call):
            if any(k == node.attr for k, _ in base.kwargs):
                return base.arg(node.attr)   # params.format of a value object built with format=...
            return self._attribute_default(base, node)
        B.need(base)
        raise Unk(f"attribute {node.attr!r} of this object is not modelled")

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
            self.script.notes.append((node.lineno, f"{self.ev.text(node)}: not passed to hugectr.{call.func}; "
                                                   f"HugeCTR's default {value_repr(d)} used"))
            return list(d) if isinstance(d, list) else d
        raise Unk(f"hugectr.{call.func} has no attribute {node.attr!r} known statically")

    # ---- calls -------------------------------------------------------------------------------------------------
    def call_other(self, node: ast.Call, func: object, frame: Frame) -> object:
        if isinstance(func, HugeCTRFunc):
            args, kwargs = X.call_args(self.ev, node, frame)
            return self.record(func.path, args, list(kwargs.items()), node, receiver=None)
        if isinstance(func, stdlib.Module):
            args, kwargs = X.call_args(self.ev, node, frame)
            return stdlib.call(self, node, func, args, kwargs)
        if func is files.OPEN:
            args, kwargs = X.call_args(self.ev, node, frame)
            return files.open_file(self.script, args, kwargs, node, self._uncertain_why())
        if func in stdlib.STR_FUNCS.values():
            args, kwargs = X.call_args(self.ev, node, frame)
            B.need_plain(*args, *kwargs.values())
            return expr(node, lambda: func(*args, **kwargs))  # type: ignore[operator]
        X.call_args(self.ev, node, frame)      # hugectr calls inside the arguments still count
        B.need(func)
        raise Unk(f"{self.ev.text(node.func)}(...) is not modelled")

    def call_method_other(self, node: ast.Call, base: object, frame: Frame) -> object:
        attr = node.func.attr  # type: ignore[attr-defined]
        if isinstance(base, Obj):
            args, kwargs = X.call_args(self.ev, node, frame)
            owner = base.type.split(".")[0] if base.type in STATEFUL else base.type
            recv = node.func.value.id if isinstance(node.func.value, ast.Name) else None  # type: ignore
            return self.record(f"{owner}.{attr}", args, list(kwargs.items()), node, receiver=recv)
        if isinstance(base, stdlib.Parser):
            args, kwargs = X.call_args(self.ev, node, frame)
            return stdlib.parser_method(self, node, base, args, kwargs)
        if isinstance(base, files.WrittenFile) and not node.keywords:
            args, _ = X.call_args(self.ev, node, frame)
            return files.file_method(self.script, base, attr, args, node, self._uncertain_why())
        if attr in ("Get_size", "Get_rank") and not node.args:
            return stdlib.mpi_world(self, node)
        if isinstance(base, (stdlib.Module, B.Builtin)):
            func = self.attribute_other(base, node.func, frame)  # type: ignore[arg-type]
            return self.call_other(node, func, frame)
        X.call_args(self.ev, node, frame)
        B.need(base)
        raise Unk(f"{self.ev.text(node.func)}(...) is not modelled")

    def call_value_other(self, func: object, args: list, node: ast.Call) -> object:
        if func in stdlib.STR_FUNCS.values():            # map(str.strip, ...)
            B.need_plain(*args)
            return func(*args)  # type: ignore[operator]
        if isinstance(func, stdlib.Module) and func.name in stdlib.PURE:      # map(os.path.basename, ...)
            B.need_plain(*args)
            return stdlib.PURE[func.name](*args)
        if isinstance(func, HugeCTRFunc):
            raise Unk(f"hugectr.{func.path} passed as a function value is not modelled")
        B.need(func)
        raise Unk("a function value that is not the script's own or a modelled builtin is not modelled")

    def passed(self, node: ast.Call, values: list) -> None:
        for v in values:
            if isinstance(v, files.WrittenFile):     # print(..., file=f), json.dump(x, f): text not followed
                files.passed(self.script, v, node, self.ev.text(node.func))

    def _uncertain_why(self) -> str | None:
        region = self.ev.uncertain
        return None if region is None else region.why

    def read_only_skipped(self, call: ast.Call) -> None:
        note = (call.lineno, f"{self.ev.text(call.func)}(...) only reads its arguments: not followed, and what it "
                             "reads is left as it was")
        if note not in self.script.notes:
            self.script.notes.append(note)

    def try_rest_skipped(self, node: ast.Try, calls: int) -> None:
        last = self.script.all_calls[calls - 1]
        rest = [s for s in node.body if s.lineno > last.line]
        if not rest:
            return
        first, end = rest[0].lineno, max(getattr(s, "end_lineno", None) or s.lineno for s in rest)
        lines = f"line {first}" if first == end else f"lines {first}-{end}"
        self.script.notes.append((first, f"{lines} (after hugectr.{last.func}(...) in the try block at line "
                                          f"{node.lineno}) skipped: not modelled, they may raise when the script "
                                          "runs; the hugectr calls before them run either way, what they assign "
                                          "is unknown"))

    def instantiated(self, cls: Class) -> None:
        self.script.unread = [u for u in self.script.unread if u[1] != f"class {cls.node.name}"]

    def class_defined(self, node: ast.ClassDef) -> None:
        if "Model(" in (ast.get_source_segment(self.ev.source, node) or ""):
            # Read when instantiated; a model class the module never instantiates statically is refused.
            self.script.unread.append((node.lineno, f"class {node.name}"))

    def effects_made(self) -> int:
        return len(self.script.all_calls)

    def unroll_limit(self, node: ast.For) -> int | None:
        return MAX_UNROLL if _may_call(node.body) else None

    def uncertain_effects(self, node: ast.stmt, why: str, loop: bool) -> None:
        if loop:
            # refused by the mapper; the hugectr functions the loop calls say what it is (building layers, training)
            end = getattr(node, "end_lineno", node.lineno) or node.lineno
            funcs = sorted({c.func for c in self.script.all_calls if c.in_loop and node.lineno <= c.line <= end})
            self.script.loops.append(node.lineno)
            self.script.loop_calls.append((funcs, why))
            return
        raise Located(f"which hugectr calls run depends on a value that cannot be known statically: {why}",
                      node.lineno, "pass the values with --args, or write them as literals", col=col_of(node))

    def record(self, func: str, args: list, kwargs: list, node: ast.Call, receiver: str | None) -> object:
        if len(self.script.all_calls) > 50_000:
            raise ScriptError("too many hugectr calls to read statically", node.lineno)
        region = self.ev.uncertain
        call = Call(func=func, args=args, kwargs=kwargs, line=node.lineno, in_loop=region is not None,
                    receiver=receiver)
        # Arguments that are calls made just now (nested) are values of this call, not statements.
        for v in [*args, *(v for _, v in kwargs)]:
            for nested in _calls_in(v):
                nested.nested = True
        self.script.all_calls.append(call)
        self.script.statements.append(call)
        # A method of an object (receiver set, or reached through one) or a stateful constructor gives an object;
        # module functions such as hugectr.data.DataSourceParams are value objects like DenseLayer.
        is_method = receiver is not None or func.split(".")[0] in STATEFUL | _METHOD_OWNERS
        if is_method and func.split(".")[-1] in DATA_METHODS:
            # Arrays and numbers (predictions, metrics, losses): what the script does with them is not hugectr.
            return Unknown(f"{func}(...)", node.lineno, col_of(node), f"hugectr.{func}() returns data known only "
                                                                      "when the script runs")
        if func.split(".")[-1] in STATEFUL or (is_method and "." in func):
            return Obj(func, len(self.script.all_calls) - 1)
        # A value-type object (DenseLayer, Input, ...): returned as the call itself, so it is inlined where used.
        return call


def _may_call(body: list[ast.stmt]) -> bool:
    """The body calls something through a name (a hugectr call may be reached through a variable or function)."""
    for n in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(n, ast.Call):
            f = n.func
            while isinstance(f, (ast.Attribute, ast.Subscript)):
                f = f.value
            if isinstance(f, ast.Name):
                return True
    return False


def _calls_in(v: object):
    if isinstance(v, Call):
        yield v
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _calls_in(x)
    elif isinstance(v, dict) and not isinstance(v, Namespace):
        for x in v.values():
            yield from _calls_in(x)


def extract(text: str, filename: str = "<script>", argv: list[str] | None = None,
            modules: Modules | None = None) -> Script:
    """Read a script's hugectr calls. Raises :class:`Located` (with a line) on text that is not Python."""
    try:
        tree = ast.parse(text, filename=filename)
    except SyntaxError as exc:
        raise ScriptError(f"not valid Python: {exc.msg}", exc.lineno) from None
    except ValueError as exc:  # NUL bytes
        raise ScriptError(f"not valid Python: {exc}") from None
    except (RecursionError, MemoryError):     # Python's own parser: an expression of 100,000 terms, say
        raise ScriptError("the script nests too deeply to read statically",
                          fix="write the value as a literal, or pass it with --args") from None
    try:
        script = Reader(filename, text, argv, modules).run(tree)
    except RecursionError:
        raise ScriptError("the script nests too deeply to read statically") from None
    # Statements: every call that is not an argument of another hugectr call.
    script.statements = [c for c in script.statements if not c.nested]
    return script
