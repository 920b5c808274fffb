"""Importing NVTabular without PyTorch.

merlin (which nvtabular imports) imports torch, where it is installed, only to register torch's dtype names: about
1 s of CPU and 230 MB of memory in every process that imports nvtabular, for tensors no workflow of ctrgen's
produces. ``import_nvtabular`` hides torch while nvtabular is imported (``import torch`` then raises the ImportError
merlin expects where torch is missing; merlin's notice about it is silenced with its others); a process that has
imported torch already keeps it, and torch can be imported afterwards as usual. ctrgen and the runtime's Triton
preprocessing model (nvt_model) import it from here; the generated etl.py carries the same function
(templates/_macros.j2 ``import_nvtabular``: it runs without ctrgen's runtime).
"""

from __future__ import annotations

import sys
import warnings
from types import ModuleType


def import_nvtabular() -> ModuleType:
    hidden = "torch" not in sys.modules
    if hidden:
        sys.modules["torch"] = None  # type: ignore[assignment]
    try:
        with warnings.catch_warnings():
            # merlin's notices (no TensorFlow/PyTorch dtype mappings); not ctrgen's business.
            warnings.simplefilter("ignore")
            import nvtabular
    finally:
        if hidden and "torch" in sys.modules and sys.modules["torch"] is None:
            del sys.modules["torch"]
    return nvtabular
