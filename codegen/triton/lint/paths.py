"""Where a path written in config.pbtxt or ps.json lies on this machine.

Those paths are as the serving container sees them (triton.md §4: the examples mount the repository at
``/model``). Absolute paths are mapped with ``--root-map /model=DIR`` (longest prefix first); relative paths are
looked up against the model's repository root, then the validated PATH, then the folder of the file naming them
(lint fixtures README: "resolve config, network_file, dense_file and sparse_files against the repository root").
A generated repository's shared files (codegen.triton.layout) are read where the generated folder keeps them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath


@dataclass(frozen=True)
class Resolved:
    given: str
    path: Path | None   # None: an absolute path outside every --root-map that does not exist here
    exists: bool

    @property
    def unmapped(self) -> bool:
        return self.path is None


class PathResolver:
    def __init__(self, root: Path, root_map: dict[str, Path], shared: dict[Path, Path] | None = None):
        self.root = root
        self.root_map = {self._norm(k): Path(v) for k, v in root_map.items()}
        self.shared = {os.path.abspath(k): v for k, v in (shared or {}).items()}

    def stored(self, path: Path) -> Path | None:
        """Where ``path`` lies: itself when it exists, else the file a generated folder keeps it in, else None."""
        if path.exists():
            return path
        return self.shared.get(os.path.abspath(path))

    @staticmethod
    def _norm(prefix: str) -> str:
        return prefix.rstrip("/") or "/"

    def shared_version(self, model_dir: Path) -> bool:
        """Whether a generated folder keeps a file of a version folder of ``model_dir`` (``<model>/1/...``)."""
        prefix = os.path.abspath(model_dir) + os.sep
        return any(k.startswith(prefix) and k[len(prefix):].split(os.sep)[0].isdigit() for k in self.shared)

    def resolve(self, given: str, bases: list[Path]) -> Resolved:
        if PurePosixPath(given).is_absolute():
            for prefix in sorted(self.root_map, key=len, reverse=True):
                if given == prefix or given.startswith(prefix.rstrip("/") + "/"):
                    local = self.root_map[prefix] / given[len(prefix):].lstrip("/")
                    found = self.stored(local)
                    return Resolved(given, found or local, found is not None)
            local = Path(given)
            return Resolved(given, local, True) if local.exists() else Resolved(given, None, False)
        unique: list[Path] = []
        for base in bases:
            if base not in unique:
                unique.append(base)
        for base in unique:
            found = self.stored(base / given)
            if found is not None:
                return Resolved(given, found, True)
        return Resolved(given, unique[0] / given, False)

    def display(self, path: Path) -> str:
        """``path`` relative to the validated root when inside it (POSIX separators), else as given."""
        try:
            return Path(os.path.relpath(path, self.root)).as_posix() if _inside(path, self.root) else str(path)
        except ValueError:  # pragma: no cover - other drive on Windows
            return str(path)


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False
