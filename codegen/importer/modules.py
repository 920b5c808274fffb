"""The script's own modules (``from model import create_model``): read with the same evaluator, never executed.

A module is a file beside the source (``NAME.py`` in the source's folder: a regular file under the source's size
cap, never a path outside that folder) or one the notebook writes (``%%writefile NAME.py``, ``open(NAME, "w")``).
:class:`Modules` finds them; :meth:`.calls.Reader.import_module` evaluates each once, with its own globals, and the
functions it defines are called with that module's source and hugectr aliases (:class:`ModuleContext`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

MAX_MODULES = 64            # modules read for one source (each under the source's size cap)
# Packages training scripts import that are not the script's own (their absence beside it is no cause of anything).
THIRD_PARTY = frozenset({"numpy", "pandas", "cudf", "cupy", "nvtabular", "merlin", "torch", "tensorflow", "dask",
                         "pyarrow", "sklearn", "scipy", "mpi4py", "tqdm", "yaml", "onnx", "hugectr2onnx", "tritonclient"})
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass
class Modules:
    folder: Path | None = None                              # the source's folder (None: none read from disk)
    written: dict[str, str] = field(default_factory=dict)   # file name -> text the notebook writes
    source: Path | None = None                              # the source itself is never its own module
    cache: dict[str, tuple[str, str] | None] = field(default_factory=dict)

    def find(self, dotted: str) -> tuple[str, str] | None:
        """(file name, text) of module ``dotted``, or None where there is no such file beside the source."""
        if dotted not in self.cache:
            self.cache[dotted] = self._find(dotted) if len(self.cache) < MAX_MODULES else None
        return self.cache[dotted]

    def _find(self, dotted: str) -> tuple[str, str] | None:
        from .source import read_text

        if not _NAME.match(dotted):
            return None
        rel = dotted.replace(".", "/") + ".py"
        if rel in self.written:
            return rel, self.written[rel]
        if self.folder is None:
            return None
        path = self.folder / rel
        try:
            real, base = path.resolve(), self.folder.resolve()
        except (OSError, RuntimeError):
            return None
        if not real.is_relative_to(base) or not real.is_file() or (self.source and real == self.source.resolve()):
            return None
        return str(path), read_text(real)


@dataclass
class ModuleContext:
    """What names mean inside one module: its source text (messages) and its hugectr aliases."""
    filename: str
    source: str
    hugectr_modules: dict[str, str]
    hugectr_names: dict[str, str]
