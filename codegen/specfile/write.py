"""Spec -> YAML text: the inverse of the loader (load(write(spec)) == spec, tested over every example spec).

The layout follows the hand-written example specs: top-level sections in block style, short lists and maps in flow
style, one explicit layer per line. Strings that YAML would read as something else are double-quoted (JSON escaping,
which YAML's double-quoted style shares), so a hostile name stays a string.
"""

from __future__ import annotations

import json
import math
import re

from .model import Spec

SECTION_ORDER = ("version", "name", "hugectr_version", "workflow", "features_lock", "data", "features", "solver",
                 "optimizer", "input", "embeddings", "embedding_collection", "model", "training", "script",
                 "continuous_training", "reader_check", "offline_inference", "targets", "vertex", "cluster", "triton", "etl")
_PLAIN = re.compile(r"^[A-Za-z_/][A-Za-z0-9_./-]*$")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}
WIDTH = 118


def spec_to_data(spec: Spec) -> dict:
    """The fields a spec sets (defaults left out), in the sections' usual order."""
    data = spec.model_dump(mode="python", exclude_defaults=True)
    data["version"] = spec.version
    if spec.embedding_collection is not None and not spec.embeddings:
        data.pop("embeddings", None)   # the loader's default beside an embedding_collection
    return {k: data[k] for k in SECTION_ORDER if k in data}


def scalar(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"non-finite number {v!r}")
        r = repr(v)
        if "e" in r and "." not in r:
            mant, exp = r.split("e")
            r = f"{mant}.0e{exp}"
        return r
    if isinstance(v, str):
        if _PLAIN.match(v) and v.lower() not in _RESERVED:
            return v
        return json.dumps(v, ensure_ascii=False)
    raise TypeError(f"cannot write {type(v).__name__} in a spec")


def flow(v: object) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{scalar(k)}: {flow(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(flow(x) for x in v) + "]"
    return scalar(v)


def _block(v: object, indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    if isinstance(v, dict):
        for k, x in v.items():
            one = f"{pad}{scalar(k)}: {flow(x)}"
            if not isinstance(x, (dict, list)) or len(one) <= WIDTH or not x:
                lines.append(one)
            else:
                lines.append(f"{pad}{scalar(k)}:")
                lines.extend(_block(x, indent + 2))
        return lines
    if isinstance(v, list):
        for x in v:
            one = f"{pad}- {flow(x)}"
            if len(one) <= WIDTH or not isinstance(x, (dict, list)):
                lines.append(one)
            else:
                sub = _block(x, indent + 2)
                sub[0] = f"{pad}- " + sub[0][indent + 2:]
                lines.extend(sub)
        return lines
    return [pad + scalar(v)]


def dump(data: dict, header: str = "") -> str:
    lines = [f"# {h}" if h else "#" for h in header.splitlines()] if header else []
    lines += _block(data, 0)
    return "\n".join(lines) + "\n"


def write_spec(spec: Spec, header: str = "") -> str:
    return dump(spec_to_data(spec), header)
