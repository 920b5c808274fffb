"""Triton's ``ModelConfig`` protobuf module, loaded without ``tritonclient.grpc``'s package ``__init__``.

``from tritonclient.grpc import model_config_pb2`` first runs ``tritonclient/grpc/__init__.py``, which imports grpcio
and the whole client (about 160 ms) for a module that needs only ``google.protobuf``. The file is loaded here under
its own module name, so a later ``import tritonclient.grpc`` (the real-server tests) reuses it instead of
registering the descriptors a second time (``from tritonclient.grpc import model_config_pb2`` then gives this
module; only ``import tritonclient.grpc.model_config_pb2 as x`` before the package is imported would not work).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

_NAME = "tritonclient.grpc.model_config_pb2"


def _load() -> ModuleType:
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    package = importlib.util.find_spec("tritonclient")   # tritonclient/__init__.py is empty
    if package is None or not package.submodule_search_locations:
        raise ImportError("tritonclient is not installed (ctrgen needs its model_config_pb2)")
    path = Path(next(iter(package.submodule_search_locations))) / "grpc" / "model_config_pb2.py"
    spec = importlib.util.spec_from_file_location(_NAME, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[_NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[_NAME]
        raise
    return module


if TYPE_CHECKING:   # tritonclient ships no type information: mc.ModelConfig & co. are Any to mypy
    from tritonclient.grpc import model_config_pb2 as mc
else:
    mc = _load()
