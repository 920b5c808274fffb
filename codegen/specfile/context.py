"""A spec file in its project: the loaded spec, the folder that holds specs/ and generated/, where its features lock
and its workflow are, and the stable names (relative to the project) that headers and messages print."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .load import LoadedSpec, load_spec

_SAFE_PATH = re.compile(r"^[A-Za-z0-9_./@+-]+$")


def project_root(spec_path: Path) -> Path:
    """The folder that holds specs/ and generated/: the spec's folder, or its parent when that folder is 'specs'."""
    folder = spec_path.resolve().parent
    return folder.parent if folder.name == "specs" else folder


def display_path(path: Path, root: Path) -> str:
    """A stable, comment-safe name for a file: relative to the project root, '/'-separated, never raw if odd."""
    try:
        rel = path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        rel = path.name
    return rel if _SAFE_PATH.match(rel) else repr(rel)


@dataclass(frozen=True)
class SpecContext:
    loaded: LoadedSpec
    root: Path
    lock_path: Path
    workflow_path: Path | None

    @property
    def spec(self):
        return self.loaded.spec

    @property
    def display(self) -> str:
        return display_path(self.loaded.path, self.root)

    @property
    def lock_display(self) -> str:
        return display_path(self.lock_path, self.root)


def open_spec(path: Path, text: str | None = None) -> SpecContext:
    """The spec at ``path`` (``text``: its content as it would be, e.g. a ported spec not yet written)."""
    loaded = load_spec(path, text)
    spec = loaded.spec
    base = path.resolve().parent
    lock = base / (spec.features_lock or f"{path.stem}.features.lock.json")
    wf = (base / spec.workflow) if spec.workflow else None
    if wf is None and spec.etl is not None:
        wf = base / spec.etl.output.dir / "workflow"   # where `ctrgen etl` saves it
    return SpecContext(loaded=loaded, root=project_root(path), lock_path=lock, workflow_path=wf)
