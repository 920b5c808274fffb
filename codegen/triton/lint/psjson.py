"""Reading ``ps.json``, the parameter-server file the HugeCTR backend gets through
``--backend-config=hugectr,ps=<file>`` (triton.md §4).

Backend v4.3 reads numbers and booleans given either as JSON values or as strings (``"64"``, ``"true"``;
hugectr_backend@v4.3:src/triton_helpers.cpp), so the ``as_*`` readers accept both.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import Located, UserError
from ...inputs import MAX_META_BYTES, parse_json, read_text

PS_NAME = "ps.json"




def as_int(value: Any) -> int:
    if isinstance(value, bool):
        raise Located(f"{value!r} is a boolean, not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*[-+]?\d{1,20}\s*", value):
        return int(value)
    raise Located(f"{json.dumps(value)} is not an integer")


def as_float(value: Any) -> float:
    if isinstance(value, bool):
        raise Located(f"{value!r} is a boolean, not a number")
    number: float | None = None
    if isinstance(value, (int, float)):
        number = float(value) if abs(value) < 1e308 else math.inf
    elif isinstance(value, str) and len(value) < 64:
        try:
            number = float(value)
        except ValueError:
            pass
    if number is None:
        raise Located(f"{json.dumps(value)} is not a number")
    if not math.isfinite(number):
        raise Located(f"{json.dumps(value)} is not a finite number")
    return number


def as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise Located(f"{json.dumps(value)} is not a boolean (true/false)")


def as_list(value: Any) -> list:
    if isinstance(value, list):
        return value
    raise Located(f"{json.dumps(value)} is not a list")


def show(value: Any) -> str:
    """A value as the JSON file spells it."""
    return json.dumps(value, ensure_ascii=False)


def brief(values: list) -> str:
    """A list as JSON, with long runs of one value shortened to ``[v]*n``."""
    if len(values) > 6 and len({show(v) for v in values}) == 1:
        return f"[{show(values[0])}]*{len(values)}"
    return show(values)




@dataclass(frozen=True)
class PsModel:
    """One entry of ``models``."""

    file: "PsFile"
    index: int
    data: dict

    @property
    def name(self) -> str:
        name = self.data.get("model")
        return name if isinstance(name, str) else ""

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def __contains__(self, key: str) -> bool:
        return key in self.data


@dataclass(frozen=True)
class PsFile:
    path: Path
    text: str
    data: dict

    @property
    def models(self) -> list[PsModel]:
        models = self.data.get("models")
        if not isinstance(models, list):
            return []
        return [PsModel(self, i, m) for i, m in enumerate(models) if isinstance(m, dict)]

    def line_of(self, key: str, top_level: bool = False) -> int | None:
        """Line of ``"key":`` when that spelling is unambiguous (top-level key, or a file with one model)."""
        if not top_level and len(self.models) > 1:
            return None
        m = re.search(rf'"{re.escape(key)}"\s*:', self.text)
        return self.text.count("\n", 0, m.start()) + 1 if m else None


def load_ps(path: Path) -> PsFile:
    """Parse a ps.json; raises codegen.errors.Located (with line/col) for invalid JSON or a non-object, OSError if
    unreadable."""
    try:
        text = read_text(path, PS_NAME, MAX_META_BYTES)    # a FIFO, a device, a huge file: refused, not read
        data = parse_json(text, path, PS_NAME)              # depth checked first; NaN and Infinity refused
    except UserError as exc:
        p = exc.problems[0]
        raise Located(p.message.replace("ps.json is not JSON: ", "invalid JSON: "), p.line, col=p.col) from None
    if not isinstance(data, dict):
        raise Located(f"the top level must be a JSON object, got {type(data).__name__}", 1, col=1)
    return PsFile(path=path, text=text, data=data)


def find_ps_files(root: Path) -> list[Path]:
    """Every ps.json under ``root`` (hand-written repositories put it anywhere), sorted; hidden folders skipped."""
    return sorted(p for p in root.rglob(PS_NAME)          # a FIFO or device named so too: load_ps refuses it
                  if not p.is_dir() and not any(part.startswith(".") for part in p.relative_to(root).parts))
