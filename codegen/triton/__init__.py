"""Triton model repositories for HugeCTR models: reading ``config.pbtxt`` and ``ps.json``, and ``ctrgen validate``.

Facts: docs/triton.md (backend rules §2, ps.json §4, cross-file rules §5, checklist §7) and docs/hugectr.md §2
(graph JSON) and §5 (files written by training).

Sub-packages: plan/ (what ctrgen writes: planner and config.pbtxt writer), lint/ (``ctrgen validate``'s rules),
deploy/ (``ctrgen assemble``'s logic), commands/ (the click commands); pb.py loads Triton's protobuf for plan and lint.
The exports load on first use: rendering a repository (``ctrgen check``) imports codegen.triton.plan without the
validator's rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .lint.findings import Finding, render_findings
    from .lint.validate import validate_repository

__all__ = ["Finding", "render_findings", "validate_repository"]


def __getattr__(name: str) -> Any:
    if name in ("Finding", "render_findings"):
        from .lint import findings
        return getattr(findings, name)
    if name == "validate_repository":
        from .lint.validate import validate_repository
        return validate_repository
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
