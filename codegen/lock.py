"""The features a spec trains on: its features lock (stale against the spec's workflow is an error), or a workflow
read directly, restricted to the columns the spec names."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from .errors import UserError
from .features import Features, describe_lock_drift, read_lock
from .specfile.context import SpecContext


def load_features(ctx: SpecContext, *, workflow_override: Path | None = None,
                  check_stale: bool = True) -> tuple[Features, str]:
    """Features for generation, and the text hashed into headers.

    With ``workflow_override`` the features come straight from that workflow (the demo runs the committed spec
    against its synthetic workflow this way). Otherwise the lock is used; when the spec's workflow exists too,
    a lock that no longer matches it is an error.
    """
    if workflow_override is not None:
        from .workflow import read_workflow_features  # imports nvtabular lazily, only for workflow directories

        feats = read_workflow_features(ctx, workflow_override)
        return feats, feats.lock_text()
    feats = read_lock(ctx.lock_path)
    if check_stale and ctx.workflow_path is not None and ctx.workflow_path.exists():
        from .stale import fresh_features

        fresh = fresh_features(ctx, ctx.workflow_path, select_columns(feats, ctx.spec))
        drift = lock_drift(ctx, feats, fresh)
        if drift:
            raise UserError.one(ctx.lock_path, "stale features lock: " + "; ".join(drift), field="features",
                                fix=f"run 'ctrgen lock {ctx.display}' and review the regenerated outputs")
    return feats, ctx.lock_path.read_text(encoding="utf-8")


def select_columns(features: Features, spec) -> Features:
    """``features`` restricted to the columns the spec names, in the spec's order (a spec may use a subset of a
    shared lock); a role the spec leaves to its defaults keeps all its columns. Names ``features`` lacks are left
    out, so a comparison with the workflow reports them."""
    f = spec.features

    def pick(names: list[str] | None, default: tuple) -> tuple:
        return default if names is None else tuple(c for c in map(features.column, names) if c is not None)

    return replace(features, categorical=pick(f.categorical, features.categorical),
                   continuous=pick(f.continuous, features.continuous), labels=pick(f.label, features.labels))


def lock_drift(ctx: SpecContext, locked: Features, fresh: Features) -> list[str]:
    """How the lock differs from the workflow (``fresh``, read with the spec's column selection) on the columns
    this spec trains on: a lock shared with specs that train on more columns is not stale for this one."""
    return describe_lock_drift(select_columns(locked, ctx.spec), fresh)
