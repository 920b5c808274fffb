"""The standard library as a script read statically sees it: argparse (through the real argparse), the parts of
``os``/``os.path``/``math``/``sys`` whose value is the same wherever the script runs, and MPI's one-process world.

A value that exists only where the script runs (``os.getcwd()``, files, an environment variable without a default)
is an unknown that says so: it is refused if it reaches a hugectr argument, never replaced by a different literal.
``os.path.expanduser`` of a path under the home folder (``~`` or ``~/...``) is kept as that expression
(:class:`.values.HomePath`): appending text after it and ``os.path.join`` give it exactly, anything else refuses it.
"""

from __future__ import annotations

import ast
import math
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from . import argv as cmdline
from . import builtins as B
from .scopes import Unk, expr
from .values import EnvPath, HomePath, Namespace, Unknown, known

AT_RUN_TIME = "only known where the script runs"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Module:
    """A standard-library module (or one of its functions) the reader models: ``os``, ``os.path.join``, ..."""

    name: str


MODULES = frozenset({"os", "os.path", "math", "sys", "argparse", "posixpath", "os.environ"})
# Pure functions: the same result on every POSIX system.
PURE: dict[str, Callable[..., Any]] = {"os.path.join": posixpath.join, "posixpath.join": posixpath.join, "os.path.basename": posixpath.basename,
         "os.path.dirname": posixpath.dirname, "os.path.splitext": posixpath.splitext,
         "os.path.normpath": posixpath.normpath,
         "math.ceil": math.ceil, "math.floor": math.floor, "math.sqrt": math.sqrt, "math.log2": math.log2,
         "math.log": math.log, "math.log10": math.log10, "math.exp": math.exp, "math.pow": math.pow,
         "math.gcd": math.gcd, "math.isqrt": math.isqrt, "math.prod": math.prod, "math.fsum": math.fsum}
_CONSTANTS = {"math.pi": math.pi, "math.e": math.e, "math.inf": math.inf, "math.tau": math.tau, "os.sep": "/",
              "os.path.sep": "/"}
# str methods argparse scripts pass as type= (and may call directly).
STR_FUNCS = {"upper": str.upper, "lower": str.lower, "strip": str.strip}


def attribute(base: Module, attr: str) -> object:
    name = f"{base.name}.{attr}"
    if name in _CONSTANTS:
        return _CONSTANTS[name]
    if name in MODULES or name in PURE or name.startswith(("os.", "sys.", "argparse.")):
        return Module(name)
    raise Unk(f"{name} is not modelled")


@dataclass
class Parser:
    """An argparse.ArgumentParser the script builds: its add_argument calls, for the real argparse."""

    specs: list[tuple[list, dict]] = field(default_factory=list)    # add_argument(*flags, **kwargs)
    required: list[str] = field(default_factory=list)               # option strings of required arguments


def call(reader: Any, node: ast.Call, func: Module, args: list, kwargs: dict) -> object:
    """A call of a modelled standard-library function."""
    name = func.name
    if name in ("os.path.expanduser", "posixpath.expanduser"):
        return _expanduser(reader, node, args, kwargs)
    if name in ("os.path.join", "posixpath.join") and args and isinstance(args[0], HomePath) and not kwargs:
        joined = args[0].joined(args[1:])
        if joined is None and all(type(a) is str for a in args[1:]):
            raise Unk(f"{args[0].why}: os.path.join of it with an empty first part is not kept (the result depends "
                      "on how its value ends)")
        if joined is None:
            raise Unk(f"{args[0].why}: os.path.join of it with a value that is not a string is not kept")
        return joined
    if name in PURE:
        B.need_plain(*args, *kwargs.values())
        if name in ("os.path.join", "posixpath.join") and not all(isinstance(a, str) for a in args):
            raise Unk("os.path.join of a value that is not a string")
        return expr(node, lambda: PURE[name](*args, **kwargs))
    if name in ("os.environ.get", "os.getenv"):
        B.need_plain(*args[:1], *(a for a in args[1:] if not isinstance(a, HomePath)))
        if len(args) == 2 and not kwargs:
            return _environment(reader, node, args[0], args[1])
        raise Unk(f"environment variable {args[0] if args else '?'!r} is {AT_RUN_TIME}")
    if name == "argparse.ArgumentParser":
        return Parser()
    if name.startswith(("os.", "sys.")):
        raise Unk(f"{name}(...) is {AT_RUN_TIME}")
    raise Unk(f"{name}(...) is not modelled")


def _environment(reader, node: ast.Call, name: object, default: object) -> EnvPath:
    """``os.environ.get(name, default)``: kept as that expression (:class:`.values.EnvPath`) where its default is a
    path the spec can write; the generated script reads the variable the same way. Anything else is refused, naming
    the variable (its value is known only where the script runs; ctrgen never substitutes the default)."""
    unknown = f"environment variable {name!r} is {AT_RUN_TIME}"
    if type(name) is not str or not ENV_NAME.fullmatch(name):
        raise Unk(f"{unknown}, and not a name a spec path can hold (letters, digits, _)")
    if isinstance(default, EnvPath):
        raise Unk(f"{unknown}; its default reads another environment variable, which a spec path cannot hold")
    text = default.spec if isinstance(default, HomePath) else default
    if type(text) is not str or "}" in text or text.startswith("$") or (text.startswith("~") and
                                                                            not isinstance(default, HomePath)):
        raise Unk(f"{unknown}; it is kept only with a default that is a path (a string without '}}' that does not "
                  f"start with '$' or, unexpanded, '~'), not {default!r}")
    reader.script.notes.append((node.lineno, f"environment variable {name!r} kept as ${{{name}-{text}}}: the generated "
                                             "script reads it with os.environ.get and this default"))
    return EnvPath(reader.ev.text(node), node.lineno, node.col_offset + 1,
                   f"{unknown} (kept, as os.environ.get, only where it is a reader source, eval_source or "
                   "graph_config_file, with text appended or os.path.join)", name=name, default=text)


def _expanduser(reader, node: ast.Call, args: list, kwargs: dict) -> object:
    """``os.path.expanduser(path)``: ``path`` itself when it does not start with ``~``; the home folder where the
    script runs for ``~`` and ``~/...`` (kept as the expression); ``~name`` forms are refused."""
    if kwargs or len(args) != 1:
        raise Unk("os.path.expanduser with other than one argument is not modelled")
    path = args[0]
    B.need_plain(path)
    if type(path) is not str:
        raise Unk("os.path.expanduser of a value that is not a string is not modelled")
    if not path.startswith("~"):
        return path
    if path != "~" and not path.startswith("~/"):
        raise Unk(f"os.path.expanduser({path!r}) is {AT_RUN_TIME} (another user's home folder)")
    return HomePath(reader.ev.text(node), node.lineno, node.col_offset + 1,
                    f"os.path.expanduser(...) is {AT_RUN_TIME} (kept as written only where it is a reader source or "
                    "graph_config_file, with text appended or os.path.join)", path[1:])


def parser_method(reader, node: ast.Call, parser: Parser, args: list, kwargs: dict) -> object:
    attr = node.func.attr  # type: ignore[attr-defined]
    if attr in ("add_argument_group", "add_mutually_exclusive_group"):
        return parser          # their arguments belong to the parser
    if attr == "add_argument":
        flags = [a for a in args if isinstance(a, str)]
        if kwargs.get("required") is True and "default" not in kwargs:
            parser.required.append(flags[0] if flags else str(kwargs.get("dest", "")))
        spec = {k: (v if known(v) and not isinstance(v, Unknown) else cmdline.UNKNOWN) for k, v in kwargs.items()
                if k != "choices" or known(v)}
        if "type" in kwargs:
            spec["type"] = _argparse_type(kwargs["type"])
        parser.specs.append((flags, spec))
        return None
    if attr in ("parse_args", "parse_known_args"):
        given = args[0] if args else kwargs.get("args")
        if _own_argv(node):
            given = None        # parse_args(sys.argv[1:]) is parse_args(): the command line it runs with
        if given is not None and not (isinstance(given, (list, tuple)) and known(given)):
            raise Unk("parse_args of a command line that cannot be known statically")
        argv = list(given) if given is not None else reader.argv
        reader.script.argv_read = reader.script.argv_read or given is None
        specs = parser.specs
        if argv is None:
            # No command line: argparse's defaults (type= applied to string defaults, as argparse does); a required
            # option makes its value unknown, and the fix names it.
            reader.script.required_args += parser.required
            specs = [(f, {k: v for k, v in s.items() if k != "required"}) for f, s in specs]
            reader.script.notes.append((node.lineno, "command-line arguments read as their argparse defaults"))
        try:
            values, extra = cmdline.parse(specs, argv or [], known_only=attr == "parse_known_args")
        except cmdline.Located as exc:
            raise cmdline.Located(exc.message, node.lineno, exc.fix) from None
        required = {_dest(f, s) for f, s in parser.specs if s.get("required") is True and "default" not in s}
        ns = Namespace({k: Unknown(f"--{k}", node.lineno, None, "a required command-line option: pass it with "
                                   "--args") if argv is None and k in required else
                        Unknown(f"--{k}", node.lineno, None, "its argparse type or action is not modelled")
                        if v is cmdline.UNKNOWN else v for k, v in values.items()})
        if argv is not None:
            reader.script.notes.append((node.lineno, f"command line: {cmdline.describe(argv)}"))
        return ns if attr == "parse_args" else (ns, extra)
    raise Unk(f"ArgumentParser.{attr} is not modelled")


def _own_argv(node: ast.Call) -> bool:
    """The call passes ``sys.argv[1:]`` (positionally or as ``args=``)."""
    given = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "args"), None)
    return isinstance(given, ast.Subscript) and ast.unparse(given).replace(" ", "") == "sys.argv[1:]"


def _dest(flags: list, spec: dict) -> str:
    if isinstance(spec.get("dest"), str):
        return spec["dest"]
    longs = [f for f in flags if f.startswith("--")]
    name = longs[0] if longs else flags[0] if flags else ""
    return name.lstrip("-").replace("-", "_")


def _argparse_type(t: object) -> object:
    if isinstance(t, B.Builtin) and t.name in ("int", "float", "str", "bool"):
        return {"int": int, "float": float, "str": str, "bool": bool}[t.name]
    if t in STR_FUNCS.values():
        return t
    return cmdline.UNKNOWN


def mpi_world(reader, node: ast.Call) -> int:
    value = 1 if node.func.attr == "Get_size" else 0  # type: ignore[attr-defined]
    reader.script.notes.append((node.lineno, f"{reader.ev.text(node)}: MPI world assumed one process (rank 0 of 1)"))
    return value

