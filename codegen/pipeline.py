"""The one pipeline: spec file -> features -> model -> rendered files.

``render_spec`` is pure (no writes): it returns ``{relative path: text}`` for one spec. ``generate`` / ``check`` in
codegen.output write or compare those files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .graph.ir import TrainingJob
from .lock import load_features
from .model.build import build_model
from .model.types import Model
from .render.targets import render_model
from .specfile.context import SpecContext, open_spec
from .triton.plan.repository import RepositoryPlan

__all__ = ["Rendered", "open_spec", "render_spec"]


@dataclass(frozen=True)
class Rendered:
    files: dict[PurePosixPath, str]  # relative to the output folder
    model: Model

    @property
    def name(self) -> str:           # output folder name (= spec name)
        return self.model.name

    @property
    def job(self) -> TrainingJob:
        return self.model.job

    @property
    def digest(self) -> str:
        return self.model.provenance.digest

    @property
    def triton(self) -> RepositoryPlan | None:
        return self.model.triton

    @property
    def triton_torch(self) -> RepositoryPlan | None:
        return self.model.triton_torch


def render_spec(ctx: SpecContext, *, workflow_override: Path | None = None) -> Rendered:
    features, lock_text = load_features(ctx, workflow_override=workflow_override)
    model = build_model(ctx, features, lock_text)
    return Rendered(files=render_model(model), model=model)
