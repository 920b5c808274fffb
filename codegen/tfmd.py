"""tensorflow_metadata's ``schema_pb2`` without the rest of its protos (issue 16 item 7).

Importing anything under ``tensorflow_metadata.proto`` first runs that package's ``__init__``, which imports all seven
v0 modules (anomalies, statistics, metric, problem statements: about 15 ms of pure-Python protobuf descriptors) for
the one that the stale-lock check parses a workflow's ``output_schema.pbtxt`` with. Here ``tensorflow_metadata.proto``
is registered with its own path but a lazy ``__init__``: the names it binds (``anomalies_pb2``, ..., from ``v0``)
are imported on first use, so later users (merlin's schema reader) see the package as before.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

_PROTO = "tensorflow_metadata.proto"


def _lazy_proto_package() -> None:
    spec = importlib.util.find_spec(_PROTO)              # imports tensorflow_metadata (a docstring), not .proto
    assert spec is not None and spec.submodule_search_locations is not None
    package = importlib.util.module_from_spec(spec)      # its __path__, not its __init__

    def __getattr__(name: str) -> ModuleType:
        if name.endswith("_pb2"):                       # what the real __init__ binds: v0's modules
            return importlib.import_module(f"{_PROTO}.v0.{name}")
        if name == "v0":
            return importlib.import_module(f"{_PROTO}.v0")
        raise AttributeError(f"module {_PROTO!r} has no attribute {name!r}")

    package.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[_PROTO] = package
    sys.modules["tensorflow_metadata"].proto = package  # type: ignore[attr-defined]


def schema_pb2() -> ModuleType:
    if _PROTO not in sys.modules:
        _lazy_proto_package()
    return importlib.import_module(f"{_PROTO}.v0.schema_pb2")
