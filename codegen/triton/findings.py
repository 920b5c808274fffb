"""One finding of ``ctrgen validate``: where (file, line), which field, what is wrong (both values) and the fix.

Findings are sorted by (file, line, field, message) so the report is deterministic; ``render_findings`` prints
them as text (``FILE[:LINE[:COL]]: SEVERITY: FIELD: MESSAGE (fix: FIX)``, the shape of codegen.errors.Problem) or
as JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

ERROR = "error"      # the server refuses the model, or serves wrong results
WARNING = "warning"  # depends on the data or the release; shown, but exit 0 unless --strict


@dataclass(frozen=True)
class Finding:
    file: str
    field: str
    message: str
    fix: str = ""
    severity: str = ERROR
    line: int | None = None
    col: int | None = None
    # The value as the file holds it and the value a consistent repository would hold (JSON-serialisable;
    # None when not applicable). The message states both in words.
    actual: Any = None
    expected: Any = None

    def sort_key(self) -> tuple:
        return (self.file, self.line or 0, self.col or 0, self.field, self.severity, self.message)

    @property
    def location(self) -> str:
        loc = self.file
        if self.line is not None:
            loc += f":{self.line}"
            if self.col is not None:
                loc += f":{self.col}"
        return loc

    def format(self) -> str:
        text = f"{self.location}: {self.severity}: {self.field}: {self.message}"
        return text + (f" (fix: {self.fix})" if self.fix else "")

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "col": self.col, "severity": self.severity,
                "field": self.field, "message": self.message, "fix": self.fix,
                "actual": self.actual, "expected": self.expected}


def sort_findings(findings: list[Finding]) -> list[Finding]:
    unique: dict[tuple, Finding] = {}
    for f in findings:
        unique.setdefault((*f.sort_key(), f.fix), f)
    return sorted(unique.values(), key=Finding.sort_key)


def count(findings: list[Finding], severity: str) -> int:
    return sum(1 for f in findings if f.severity == severity)


def render_findings(findings: list[Finding], fmt: str = "text") -> str:
    findings = sort_findings(findings)
    errors, warnings = count(findings, ERROR), count(findings, WARNING)
    if fmt == "json":
        return json.dumps({"errors": errors, "warnings": warnings,
                           "findings": [f.to_json() for f in findings]}, indent=2, ensure_ascii=False) + "\n"
    if fmt != "text":
        raise ValueError(f"unknown format {fmt!r}")
    lines = [f.format() for f in findings]
    if findings:
        lines.append(f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}")
    else:
        lines.append("ok: no findings")
    return "\n".join(lines) + "\n"
