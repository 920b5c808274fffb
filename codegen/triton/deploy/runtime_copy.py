"""ctrgen's runtime as `ctrgen assemble` puts it into a deployable repository: one copy at its root
(``codegen/runtime/``, with a ``codegen/__init__.py`` that holds only the version), which every python-backend model
of the repository imports, so a Triton server without ctrgen installed loads them. Its version and file hashes go
into the repository's MANIFEST.json."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path, PurePosixPath

from ... import __version__, runtime
from ...runtime.contract import MANIFEST

PACKAGE = PurePosixPath("codegen")
RESERVED = frozenset({str(PACKAGE), MANIFEST})   # names at the root no model may have


def runtime_files() -> dict[PurePosixPath, bytes]:
    """{path in the repository: bytes} of the runtime, sorted by path."""
    files = {PACKAGE / "__init__.py": (f'"""ctrgen {__version__}: its runtime only (codegen.runtime), copied here by ctrgen '
                                       f'assemble."""\n\n__version__ = {__version__!r}\n').encode()}
    source = Path(runtime.__file__).parent
    for path in sorted(source.glob("*.py")):
        files[PACKAGE / "runtime" / path.name] = path.read_bytes()
    return files


def write_runtime(root: Path, extra: dict | None = None) -> list[str]:
    """Write the runtime and MANIFEST.json (its version, each file's sha256, and ``extra``'s keys) into the
    repository ``root``; returns the paths written, relative to it."""
    files = runtime_files()
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    manifest = {"ctrgen_version": __version__,
                "runtime": {"version": __version__, "package": str(PACKAGE / "runtime"),
                            "files": {str(rel): hashlib.sha256(data).hexdigest() for rel, data in files.items()}}}
    manifest.update(extra or {})
    (root / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return [str(PACKAGE), MANIFEST]
