"""Python literals for generated code. Every user-provided value reaches model.py through here, never raw.

Strings are emitted as Python string literals (double-quoted like the notebooks when that needs no escaping),
identifiers used as code (enum members) are validated, and non-finite floats are refused.
"""

from __future__ import annotations

import math
import re

from ..graph.ir import CallValue, Enum
from ..runtime.contract import env_path, under_home

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Code(str):
    """Python source that ctrgen itself wrote (a variable, ``args.lr``, a call on literals made by :func:`py`).

    Written verbatim by :func:`py`; never build one from user text (use :func:`py` for that part).
    """


def py_str(s: str) -> str:
    r = repr(s)
    if r[0] == "'" and '"' not in s:
        # repr() used single quotes and escaped nothing quote-related: the same body is valid between double quotes.
        r = '"' + r[1:-1] + '"'
    return r


def path_py(path: str) -> Code:
    """A spec path as Python: one under the home folder (``~`` or ``~/...``) as ``os.path.expanduser("~/...")``,
    evaluated where the script runs, as the spec means it (HugeCTR does not expand ``~``); ``${NAME-DEFAULT}...`` as
    ``os.environ.get("NAME", DEFAULT)`` followed by the rest (``+`` or ``os.path.join``); any other as a literal."""
    env = env_path(path)
    if env is not None:
        value = f"os.environ.get({py_str(env.name)}, {path_py(env.default)})"
        if env.joined:
            return Code(f"os.path.join({value}, {py_str(env.rest)})")
        return Code(f"{value} + {py_str(env.rest)}" if env.rest else value)
    return Code(f"os.path.expanduser({py_str(path)})" if under_home(path) else py_str(path))


def ident(name: str) -> str:
    if not _IDENT.match(name):
        raise ValueError(f"not an identifier: {name!r}")
    return name


def py(value: object) -> str:
    if isinstance(value, Code):
        return str(value)
    if isinstance(value, Enum):
        return f"hugectr.{ident(value.type)}.{ident(value.member)}"
    if isinstance(value, CallValue):
        return f"hugectr.{'.'.join(ident(part) for part in value.func.split('.'))}(" + ", ".join(f"{ident(k)}={py(v)}" for k, v in value.args) + ")"
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"non-finite float {value!r} cannot be written")
        return repr(value)
    if isinstance(value, str):
        return py_str(value)
    if isinstance(value, list):
        return "[" + ", ".join(py(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(py(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py(k)}: {py(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} as a Python literal")


def kwargs(args) -> list[tuple[str, str]]:
    """Ordered keyword arguments -> [(name, literal)], names validated."""
    return [(ident(k), py(v)) for k, v in args]
