"""Writing and comparing rendered files.

``write`` is all-or-nothing per output folder: files are written into a temporary folder beside the target, checked,
then moved into place; a file the target folder holds that ctrgen did not write (not in its MANIFEST.json, or edited
since) is never overwritten without ``force``. ``compare`` reports changed (unified diff), missing and extra files.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .errors import UserError

MANIFEST = "MANIFEST.json"


def safe_target(root: Path, rel: PurePosixPath) -> Path:
    """root/rel, refusing anything that would leave root (absolute paths, '..', links pointing out)."""
    if rel.is_absolute() or any(part in ("..", "") for part in rel.parts):
        raise UserError.one(root, f"refusing to write {str(rel)!r}: outside the output directory")
    target = (root / Path(*rel.parts))
    resolved_root = root.resolve()
    if not str(target.resolve()).startswith(str(resolved_root) + os.sep):
        raise UserError.one(root, f"refusing to write {str(rel)!r}: it resolves outside the output directory")
    return target


def owned_files(folder: Path) -> dict[str, str]:
    """{relative path: sha256} of what ctrgen wrote into folder last time (from its manifest)."""
    try:
        doc = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        return {str(k): str(v) for k, v in doc.get("files", {}).items()} if doc.get("generator") == "ctrgen" else {}
    except (OSError, ValueError, AttributeError):
        return {}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write(folder: Path, files: dict[PurePosixPath, str], *, force: bool = False) -> list[str]:
    """Write files into folder; return the relative paths that changed."""
    folder.mkdir(parents=True, exist_ok=True)
    owned = owned_files(folder)
    foreign = []
    for rel in sorted(files):
        target = safe_target(folder, rel)
        key = str(rel)
        if target.exists() and key != MANIFEST:
            if key not in owned or _sha(target) != owned[key]:
                if target.read_text(encoding="utf-8", errors="replace") != files[rel]:
                    foreign.append(key)
    if foreign and not force:
        raise UserError.one(folder, f"would overwrite files ctrgen did not generate (or that were edited): {foreign}",
                            fix="move them away, or pass --force")
    tmp = Path(tempfile.mkdtemp(prefix=".ctrgen-", dir=folder))
    changed = []
    try:
        for rel, text in sorted(files.items()):
            dest = tmp / Path(*rel.parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            with open(dest, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
        for rel in sorted(files):
            target = safe_target(folder, rel)
            if target.exists() and target.read_text(encoding="utf-8", errors="replace") == files[rel]:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp / Path(*rel.parts), target)
            changed.append(str(rel))
        # Files ctrgen wrote earlier that the current spec no longer produces.
        for key in sorted(set(owned) - {str(r) for r in files}):
            stale = safe_target(folder, PurePosixPath(key))
            if stale.is_file() and _sha(stale) == owned[key]:
                stale.unlink()
                changed.append(f"{key} (removed)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return changed


@dataclass
class Drift:
    changed: dict[str, str] = field(default_factory=dict)   # path -> unified diff
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.changed or self.missing or self.extra)

    def report(self, prefix: str) -> str:
        out = []
        for p in self.missing:
            out.append(f"missing: {prefix}/{p}")
        for p in self.extra:
            out.append(f"extra (no longer generated): {prefix}/{p}")
        for p, diff in self.changed.items():
            out.append(f"changed: {prefix}/{p}\n{diff}")
        return "\n".join(out)


def compare(folder: Path, files: dict[PurePosixPath, str], display: str) -> Drift:
    drift = Drift()
    for rel in sorted(files):
        target = folder / Path(*rel.parts)
        if not target.is_file():
            drift.missing.append(str(rel))
            continue
        have = target.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n")
        want = files[rel]
        if have != want:
            diff = difflib.unified_diff(have.splitlines(keepends=True), want.splitlines(keepends=True),
                                        fromfile=f"a/{display}/{rel}", tofile=f"b/{display}/{rel}")
            text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in diff)
            drift.changed[str(rel)] = text
    for key in sorted(set(owned_files(folder)) - {str(r) for r in files}):
        if (folder / key).exists():
            drift.extra.append(key)
    return drift
