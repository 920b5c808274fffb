"""One JSON line per API call into the file named by CTRGEN_STANDIN_RECORD."""

from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import PurePath

ENV = "CTRGEN_STANDIN_RECORD"


def render(v):
    """A JSON value for any argument, deterministic: enum members as 'Layer_t.X', stand-in objects as '<Kind#n>'."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else repr(v)
    if hasattr(v, "_standin_repr"):
        return v._standin_repr()
    if isinstance(v, (list, tuple)):
        return [render(x) for x in v]
    if isinstance(v, dict):
        return {str(render(k)): render(x) for k, x in v.items()}
    if isinstance(v, PurePath):
        return str(v)
    if hasattr(v, "tolist"):  # numpy scalars and arrays
        return render(v.tolist())
    return f"<{type(v).__module__}.{type(v).__qualname__}>"


_quiet = [0]


@contextlib.contextmanager
def quiet():
    """Calls the stand-in makes itself (construct_from_json building layers) are not the script's: not recorded."""
    _quiet[0] += 1
    try:
        yield
    finally:
        _quiet[0] -= 1


def record(call: str, args=(), kwargs=None) -> None:
    path = os.environ.get(ENV)
    if not path or _quiet[0]:
        return
    line = json.dumps({"call": call, "args": [render(a) for a in args],
                       "kwargs": {k: render(v) for k, v in (kwargs or {}).items()}}, ensure_ascii=False)
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


_counters: dict[str, int] = {}


def next_id(kind: str) -> str:
    _counters[kind] = _counters.get(kind, 0) + 1
    return f"<{kind}#{_counters[kind]}>"
