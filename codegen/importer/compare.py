"""Do two scripts make the same hugectr calls? The round-trip check of ``ctrgen import`` (and of the corpus tool).

Each script is read by :mod:`.calls`; its top-level hugectr calls are compared in order, each by function and by
keyword-normalized arguments (positional arguments named from the signature, nested calls compared recursively,
objects by their type). An argument one side passes and the other leaves out must equal HugeCTR's default.
"""

from __future__ import annotations

import math

from ..graph.ir import Enum
from .calls import Call, Obj, Script, Unknown, extract
from .signatures import param_names
from .values import EnvPath, HomePath

# The defaults of arguments a generated script may pass that a source may leave out come from HugeCTR's API table
# (codegen/hugectr/api_table.json, at the release compared) and from nowhere else: an argument without a default
# there (Input's dense_dim and label_dim, SparseEmbedding's workspace up to 3.6) is one HugeCTR requires, so one
# side leaving it out is a difference.
# Arguments whose value is a file path: compared by presence only ("file paths may differ"), except that a path under
# the home folder (os.path.expanduser("~/...")) must be the same one on both sides.
PATHS = {("DataReaderParams", "source"), ("DataReaderParams", "eval_source"), ("DataReaderParams", "keyset"),
         ("Model.graph_to_json", "graph_config_file"), ("Model.fit", "snapshot_prefix")}


def normalize(v: object) -> object:
    if isinstance(v, Call):
        return (f"<{v.func}>", tuple(sorted((k, normalize(x)) for k, x in named(v).items())))
    if isinstance(v, Obj):
        return f"<{v.type} object>"
    if isinstance(v, EnvPath):
        return f"<environment path {v.spec!r}>"
    if isinstance(v, HomePath):
        return f"os.path.expanduser({v.spec!r})"
    if isinstance(v, Unknown):
        return f"<unknown {v.text}>"
    if isinstance(v, (list, tuple)):
        return tuple(normalize(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted(((repr(normalize(k)), normalize(x)) for k, x in v.items())))
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return float(v)
    return v


_RELEASE = [None]


def named(call: Call) -> dict:
    names = param_names(call.func, _RELEASE[0]) or ()
    out = dict(zip(names, call.args))
    for i, v in enumerate(call.args[len(names):]):
        out[f"#{len(names) + i}"] = v
    out.update(call.kwargs)
    return out


def _equal(a: object, b: object) -> bool:
    na, nb = normalize(a), normalize(b)
    if isinstance(na, float) and isinstance(nb, float):
        return na == nb or math.isclose(na, nb, rel_tol=1e-12, abs_tol=0.0)
    return na == nb


def defaults_of(func: str, release: str | None) -> dict:
    """HugeCTR's defaults of ``func`` in ``release`` (the newest where none is named) from the API table."""
    from ..hugectr import api

    try:
        params = api.signature(func, release or api.RELEASES[-1])
    except api.ApiError:
        params = ()
    out = {}
    for p in params:
        if p.default is api.NO_DEFAULT or isinstance(p.default, api.Unparsed):
            continue
        d = p.default
        if isinstance(d, str) and "." in d and d.split(".")[0] in api.enums():
            d = Enum(*d.split(".", 1))
        out[p.name] = d
    return out


def compare_call(src: Call, gen: Call, where: str) -> list[str]:
    if src.func != gen.func:
        return [f"{where}: hugectr.{src.func} in the source, hugectr.{gen.func} generated"]
    a, b = named(src), named(gen)
    defaults = defaults_of(src.func, _RELEASE[0])
    out = []
    for k in sorted(set(a) | set(b)):
        if (src.func, k) in PATHS and k in a and k in b:
            if _homes(a[k]) != _homes(b[k]):
                out.append(f"{where}: {_name(src)}({k}=...) under the home folder: source {_homes(a[k])}, "
                           f"generated {_homes(b[k])}")
            continue
        if k in a and k in b:
            va, vb = a[k], b[k]
            if isinstance(va, Call) and isinstance(vb, Call):
                out += compare_call(va, vb, f"{where} {src.func}({k}=...)")
            elif isinstance(va, list) and isinstance(vb, list) and len(va) == len(vb) and \
                    any(isinstance(x, Call) for x in va):
                for i, (x, y) in enumerate(zip(va, vb)):
                    if isinstance(x, Call) and isinstance(y, Call):
                        out += compare_call(x, y, f"{where} {src.func}({k}[{i}])")
                    elif not _equal(x, y):
                        out.append(f"{where}: {src.func}({k}[{i}]) {normalize(x)!r} != {normalize(y)!r}")
            elif not _equal(va, vb):
                out.append(f"{where}: {_name(src)}({k}=...) source {normalize(va)!r}, generated {normalize(vb)!r}")
        else:
            side, value = ("source", a[k]) if k in a else ("generated", b[k])
            if k in defaults and _equal(value, defaults[k]):
                continue
            out.append(f"{where}: {_name(src)}: argument {k!r} only in the {side} ({normalize(value)!r})")
    return out


def _homes(v: object) -> list[str]:
    """The paths under the home folder in a path argument, as the spec writes them ("~/...")."""
    if isinstance(v, HomePath):
        return [v.spec]
    if isinstance(v, (list, tuple)):
        return [h for x in v for h in _homes(x)]
    return []


def _name(c: Call) -> str:
    if c.func == "DenseLayer":
        t = dict(c.kwargs).get("layer_type")
        if isinstance(t, Enum):
            return f"DenseLayer[{t.member}]"
    return c.func


def compare_scripts(src: Script, gen: Script) -> list[str]:
    """Differences between the two call sequences, [] when the generated script reproduces the source."""
    a, b = src.statements, gen.statements
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        out += compare_call(x, y, f"call {i + 1} (source line {x.line})")
        if len(out) > 20:
            break
    if len(a) != len(b):
        extra = a[len(b):] if len(a) > len(b) else b[len(a):]
        side = "source" if len(a) > len(b) else "generated script"
        out.append(f"{len(extra)} more call(s) in the {side}: " + ", ".join(f"hugectr.{c.func}" for c in extra[:5]))
    return out


def compare_texts(source: str, generated: str, source_name: str = "<source>", release: str | None = None,
                  argv: list[str] | None = None) -> list[str]:
    """``release``: the HugeCTR release both scripts target (names positional arguments); ``argv``: the command
    line the source runs with."""
    return compare_with(extract(source, source_name, argv), extract(generated, "model.py"), release)


def compare_with(src: Script, gen: Script, release: str | None) -> list[str]:
    """:func:`compare_scripts` with positional arguments named as ``release`` names them."""
    _RELEASE[0] = release
    return compare_scripts(src, gen)
