"""State shared by the rule modules while one repository is validated: the root, the path resolver, the optional
features lock, and the findings collected so far."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...features import Features
from ...errors import Problems
from .findings import ERROR
from .modelconfig import ConfigFile
from .paths import PathResolver


@dataclass
class Context:
    root: Path
    resolver: PathResolver
    lock: Features | None = None
    lock_path: Path | None = None
    # The key width training used, where the training side says it (a Norm or Raw spec's i64_input_key; a Parquet
    # spec's comes from the lock's dtypes, as when only the lock is given).
    key_long: bool | None = None
    findings: Problems = field(default_factory=Problems)

    def show_path(self, path: Path) -> str:
        return self.resolver.display(path)

    def add(self, file: Path, field_name: str, message: str, fix: str = "", *, severity: str = ERROR,
            line: int | None = None, col: int | None = None, actual: Any = None, expected: Any = None) -> None:
        self.findings.add(self.show_path(file), message, field=field_name, fix=fix, severity=severity, line=line,
                          col=col, actual=_jsonable(actual), expected=_jsonable(expected))

    def add_cfg(self, cfg: ConfigFile, field_name: str, message: str, fix: str = "", *, param: bool = False,
                line: int | None = None, **kw: Any) -> None:
        """A finding on a config.pbtxt, at the line of the parameter (``param``) or of the top-level field."""
        if line is None:
            line = cfg.line_of_param(field_name) if param else cfg.line_of_field(field_name.split(".")[0])
        self.add(cfg.path, field_name, message, fix, line=line, **kw)


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)
