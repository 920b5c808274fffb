"""State shared by the rule modules while one repository is validated: the root, the path resolver, the optional
features lock, and the findings collected so far."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..features import Features
from .findings import ERROR, Finding
from .paths import PathResolver


@dataclass
class Context:
    root: Path
    resolver: PathResolver
    lock: Features | None = None
    lock_path: Path | None = None
    findings: list[Finding] = field(default_factory=list)

    def show_path(self, path: Path) -> str:
        return self.resolver.display(path)

    def add(self, file: Path, field_name: str, message: str, fix: str = "", *, severity: str = ERROR,
            line: int | None = None, col: int | None = None, actual: Any = None, expected: Any = None) -> None:
        self.findings.append(Finding(file=self.show_path(file), field=field_name, message=message, fix=fix,
                                     severity=severity, line=line, col=col,
                                     actual=_jsonable(actual), expected=_jsonable(expected)))


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)
