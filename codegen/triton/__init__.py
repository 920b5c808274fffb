"""Triton model repositories for HugeCTR models: reading ``config.pbtxt`` and ``ps.json``, and ``ctrgen validate``.

Facts come from shared/reference/triton.md (backend rules §2, ps.json §4, cross-file rules §5, checklist §7) and
hugectr.md §2 (graph JSON) and §5 (files written by training).
"""

from .findings import render_findings
from .validate import validate_repository

__all__ = ["render_findings", "validate_repository"]
