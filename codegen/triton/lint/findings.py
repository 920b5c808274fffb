"""The findings of ``ctrgen validate``: :class:`codegen.errors.Problem` with a severity, where (file, line), which
field, what is wrong (both values) and the fix.

Findings are sorted by (file, line, col, field, severity, message) so the report is deterministic;
``render_findings`` prints them as text (``FILE[:LINE[:COL]]: SEVERITY: FIELD: MESSAGE (fix: FIX)``) or as JSON.
"""

from __future__ import annotations

import json

from ...errors import Problem, sort_problems

ERROR = "error"      # the server refuses the model, or serves wrong results
WARNING = "warning"  # depends on the data or the release; shown, but exit 0 unless --strict


# The findings are codegen.errors.Problem with a severity; the old name stays for code written against it.
Finding = Problem
sort_findings = sort_problems


def count(findings: list[Problem], severity: str) -> int:
    return sum(1 for f in findings if f.severity == severity)


def render_findings(findings: list[Problem], fmt: str = "text") -> str:
    findings = sort_problems(findings)
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
