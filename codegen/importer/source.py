"""What ``ctrgen import`` reads: a Python script, a notebook or a graph JSON, as units of Python text.

A notebook gives one unit per ``%%writefile NAME.py`` cell (the file the notebook writes and then runs) and one unit
of every other code cell joined in order (IPython magics and shell lines blanked, so line numbers stay those of the
joined cells); a script those cells write with ``open(NAME, "w").write(TEXT)`` and the notebook runs is one more
(``__init__``, :mod:`.files`). Each unit remembers where its lines came from, for messages.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import Located, UserError
from ..inputs import check_json_depth

# Sources larger than this are not model scripts (the biggest published script is about 40 kB).
MAX_SOURCE_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class Unit:
    text: str
    name: str                         # "train.py", "cell 7 (%%writefile dcn_train.py)", "cells"
    cells: tuple[tuple[int, int], ...] = field(default=())   # (first line in text, cell number), for notebooks
    written: str = ""                 # the file a notebook writes with this text (%%writefile, open().write)

    def where(self, line: int | None) -> str:
        """'cell 12, line 3' for a notebook line; '' for a plain script."""
        if not self.cells or line is None:
            return ""
        cell, start = self.cells[0][1], self.cells[0][0]
        for first, number in self.cells:
            if first <= line:
                cell, start = number, first
        return f"cell {cell}, line {line - start + 1}"


SourceError = Located  # old name of the importer's refusals (codegen.errors.Located), kept for a transition


def read_text(path: Path) -> str:
    """The source as text: a regular file (not a device, FIFO or /proc file) of at most MAX_SOURCE_BYTES, UTF-8."""
    from .. import inputs

    if not path.exists():
        raise SourceError("file not found", fix="check the path")
    data = inputs.read_bytes(path, "source", MAX_SOURCE_BYTES)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceError(f"not UTF-8 text (byte {exc.start})", fix="save the file as UTF-8") from None


def kind_of(path: Path, text: str) -> str:
    suffix = path.suffix.lower()
    if suffix == ".ipynb":
        return "notebook"
    if suffix == ".json":
        return "graph_json"
    if suffix in ("", ".py", ".txt"):
        stripped = text.lstrip()
        if stripped.startswith("{") and suffix != ".py":
            return "graph_json" if '"layers"' in text[:4096] or '"solver"' in text[:4096] else "notebook"
        return "script"
    raise SourceError(f"unknown source type {suffix!r}", fix="give a .py script, an .ipynb notebook or a graph .json")


_MAGIC = re.compile(r"^\s*(%|!)")
_WRITEFILE = re.compile(r"^%%writefile(?:\s+-a)?\s+(\S+)\s*$")


def notebook_units(text: str) -> list[Unit]:
    try:
        check_json_depth(text, "notebook", "notebook")
    except UserError as exc:
        raise SourceError(exc.problems[0].message, exc.problems[0].line, fix="give a Jupyter .ipynb file") from None
    try:
        nb = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(f"not a notebook: invalid JSON ({exc.msg})", exc.lineno) from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise SourceError("not a notebook: no 'cells' list", fix="give a Jupyter .ipynb file")
    units: list[Unit] = []
    joined: list[str] = []
    starts: list[tuple[int, int]] = []
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        if isinstance(src, list):
            src = "".join(s for s in src if isinstance(s, str))
        if not isinstance(src, str):
            continue
        lines = src.split("\n")
        m = _WRITEFILE.match(lines[0]) if lines else None
        if m:
            body = "\n".join(lines[1:])
            units.append(Unit(body, f"cell {number} (%%writefile {m.group(1)})", ((1, number),), m.group(1)))
            continue
        if lines and lines[0].startswith("%%"):
            continue  # %%bash, %%time ...: not Python
        starts.append((len(joined) + 1, number))
        for line in lines:
            joined.append("" if _MAGIC.match(line) else line)
    if joined:
        units.append(Unit("\n".join(joined) + "\n", "code cells", tuple(starts)))
    return units
