"""Writing and comparing rendered files.

``write`` replaces an output folder as a whole: the new folder is staged beside it and swapped in (codegen.atomic),
so the folder is the old one or the new one, never a mix; a file the target folder holds that ctrgen did not write
(not in its MANIFEST.json, or edited since) is never overwritten without ``force`` and is carried into the new
folder otherwise. ``plan_write`` makes every check first, so a caller can check all its folders before writing one.
``compare`` reports changed (unified diff), missing and extra files.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .atomic import PREFIX, clean_stale, stage, swap_in
from .errors import UserError
from .inputs import MAX_META_BYTES, parse_json, read_text
from .runtime.contract import MANIFEST


def safe_target(root: Path, rel: PurePosixPath) -> Path:
    """root/rel, refusing anything that would leave root (absolute paths, '..', links pointing out)."""
    _check_rel(root, str(rel))
    target = (root / Path(*rel.parts))
    resolved_root = root.resolve()
    if not str(target.resolve()).startswith(str(resolved_root) + os.sep):
        raise UserError.one(root, f"refusing to write {str(rel)!r}: it resolves outside the output directory")
    return target


def _check_rel(root: Path, rel: str, what: str = "refusing to write", fix: str = "") -> None:
    p = PurePosixPath(rel)
    if not rel or p.is_absolute() or "\\" in rel or any(part in ("..", "", ".") for part in rel.split("/")):
        raise UserError.one(root, f"{what} {rel!r}: outside the output directory", fix=fix)


def owned_files(folder: Path) -> dict[str, str]:
    """{relative path: sha256} of what ctrgen wrote into folder last time (from its manifest)."""
    path = folder / MANIFEST
    if not os.path.lexists(path):
        return {}
    text = read_text(path, MANIFEST, MAX_META_BYTES)    # a FIFO, a device, a huge file: one line, nothing read
    try:
        doc = parse_json(text, path, MANIFEST)
    except UserError:       # a damaged manifest records nothing: its files count as foreign
        return {}
    files = doc.get("files") if isinstance(doc, dict) and doc.get("generator") == "ctrgen" else None
    return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}


def _sha(path: Path) -> str:
    """The sha256 of a file ctrgen may have written; one larger than any output it writes is not read (it was
    edited, or swapped for something else)."""
    if os.path.getsize(path) > MAX_META_BYTES:
        return "(larger than any generated file)"
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _same_text(path: Path, text: str) -> bool:
    """Whether the regular file ``path`` holds exactly ``text`` (UTF-8); a file of another size is not read."""
    data = text.encode("utf-8")
    if os.path.getsize(path) != len(data):
        return False
    with open(path, "rb") as fh:
        return fh.read(len(data) + 1) == data


def _read_capped(path: Path, want: str) -> str | None:
    """The text of an existing output to diff against ``want``, or None when it is far larger (not read whole)."""
    if os.path.getsize(path) > 4 * len(want.encode("utf-8")) + (1 << 20):
        return None
    with open(path, "rb") as fh:
        return fh.read().decode("utf-8", errors="replace").replace("\r\n", "\n")


def check_out_root(out: Path, option: str = "--out") -> None:
    """The output root: not empty, and a folder where it exists."""
    if str(out) == "":
        raise UserError.one("''", "the output folder is empty", field=option, fix="name a folder, e.g. --out generated")
    if os.path.lexists(out) and not out.is_dir():
        raise UserError.one(out, "is a file, not a folder", field=option, fix="name a folder (it is created)")
    for parent in Path(os.path.abspath(out)).parents:     # the first existing ancestor must be a folder
        if os.path.lexists(parent):
            if not parent.is_dir():
                raise UserError.one(out, f"{parent} is a file, not a folder", field=option,
                                    fix="name a folder (it is created)")
            break


@dataclass
class Plan:
    """What ``write`` will do to one output folder, decided (and refused if need be) before anything is written."""

    folder: Path
    files: dict[PurePosixPath, str]
    changed: list[str]
    keep: list[str]          # entries of the old folder carried into the new one (files ctrgen did not write)
    force: bool = False


def plan_write(folder: Path, files: dict[PurePosixPath, str], *, force: bool = False) -> Plan:
    """Check that ``files`` can replace ``folder``: no foreign or edited file overwritten (unless ``force``), no
    symlink at the folder, a MANIFEST that names only paths inside it. Nothing is written."""
    for rel in files:
        _check_rel(folder, str(rel))
    check_out_root(folder.parent)
    if folder.is_symlink():
        raise UserError.one(folder, "is a symbolic link; ctrgen does not write through it",
                            fix="remove the link, or pass its target as --out")
    if os.path.lexists(folder) and not folder.is_dir():
        raise UserError.one(folder, "is a file, not an output folder", fix="move it away")
    owned = owned_files(folder)
    for key in owned:
        _check_rel(folder / MANIFEST, key, "the old MANIFEST.json lists",
                   "ctrgen never writes such a manifest: check the folder, then delete MANIFEST.json")
    new = {str(r): t for r, t in files.items()}
    dirs = {str(PurePosixPath(k).parents[i]) for k in new for i in range(len(PurePosixPath(k).parts) - 1)}
    changed, keep, foreign = [], [], []
    old = _entries(folder)
    for key, text in sorted(new.items()):
        kind = old.get(key)
        if kind is None:
            changed.append(key)
        elif kind != "file" or not _same_text(folder / key, text):
            changed.append(key)
            if key != MANIFEST and (kind != "file" or key not in owned or _sha(folder / key) != owned[key]):
                foreign.append(key)
    for key, kind in sorted(old.items()):
        if key in new or kind == "dir" and key in dirs:
            continue
        if key in dirs:        # a file or link where the new files need a folder
            foreign.append(key)
        elif kind == "file" and key in owned and _sha(folder / key) == owned[key]:
            changed.append(f"{key} (removed)")      # written by ctrgen earlier, no longer generated
        elif not any(key.startswith(f + "/") for f in (*new, *foreign)):
            keep.append(key)
    if foreign and not force:
        raise UserError.one(folder, f"would overwrite files ctrgen did not generate (or that were edited): {foreign}",
                            fix="move them away, or pass --force")
    keep = [k for k in keep if k not in foreign]
    return Plan(folder=folder, files=files, changed=changed, keep=keep, force=force)


def _entries(folder: Path) -> dict[str, str]:
    """{relative path: "file" | "dir" | "link" | "other"} of everything in folder (links not followed), leaving out
    ctrgen's own temporary entries."""
    out: dict[str, str] = {}
    if not folder.is_dir() or folder.is_symlink():
        return out
    for base, dirnames, filenames in os.walk(folder):
        rel_base = Path(base).relative_to(folder).as_posix()
        dirnames[:] = [d for d in sorted(dirnames) if not (rel_base == "." and d.startswith(PREFIX))]
        for name in [*dirnames, *filenames]:
            if rel_base == "." and name.startswith(PREFIX):
                continue
            path = Path(base) / name
            key = name if rel_base == "." else f"{rel_base}/{name}"
            if path.is_symlink():
                out[key] = "link"
            elif path.is_dir():
                out[key] = "dir"
            elif path.is_file():
                out[key] = "file"
            else:
                out[key] = "other"
        dirnames[:] = [d for d in dirnames if not (Path(base) / d).is_symlink()]
    return out


def apply_write(plan: Plan) -> list[str]:
    """Write a checked plan: the new folder is staged beside the old one and swapped in whole
    (codegen.atomic); files ctrgen did not write are carried over (hard links where possible)."""
    folder = plan.folder
    if folder.name in clean_stale(folder.parent):   # a killed run's old folder was put back: check again
        plan = plan_write(folder, plan.files, force=plan.force)
    if not plan.changed:
        return []
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = stage(folder.parent, folder.name)
    try:
        changed = set(plan.changed)
        for rel, text in sorted(plan.files.items()):
            dest = tmp / Path(*rel.parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            if str(rel) not in changed:      # the same bytes as before: keep the file (and its mtime)
                _carry(folder / Path(*rel.parts), dest)
                continue
            with open(dest, "x", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
        for key in plan.keep:
            _carry(folder / key, tmp / key)
        swap_in(tmp, folder)
    except OSError as exc:      # a full disk, a read-only mount: one line, and the staged folder goes
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError.one(folder, f"cannot write the output folder: {exc.strerror}",
                            fix="check the disk and the folder's permissions") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return list(plan.changed)


def _carry(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if src.is_symlink():
        os.symlink(os.readlink(src), dest)
    elif src.is_dir():
        dest.mkdir(exist_ok=True)
    elif src.is_file():
        try:
            os.link(src, dest)
        except OSError:
            shutil.copy2(src, dest)


def replace_file(path: Path, text: str | bytes) -> None:
    """Write one file atomically (a temporary file beside it, then rename); a symbolic link at ``path`` is replaced,
    not written through. ``text`` is written as UTF-8 with LF line ends; bytes as they are."""
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f"{PREFIX}{path.name}-", dir=path.parent)
    try:
        if isinstance(text, bytes):
            with os.fdopen(fd, "wb") as binary:
                binary.write(text)
        else:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
        mask = os.umask(0o022)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)      # mkstemp creates 0600; a lock is an ordinary, shared file
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write(folder: Path, files: dict[PurePosixPath, str], *, force: bool = False) -> list[str]:
    """Write files into folder as a whole (see :func:`plan_write`, :func:`apply_write`); return what changed."""
    return apply_write(plan_write(folder, files, force=force))


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
        want = files[rel]
        have = _read_capped(target, want)
        if have is None:
            drift.changed[str(rel)] = f"{os.path.getsize(target)} bytes where {len(want.encode())} are generated\n"
        elif have != want:
            diff = difflib.unified_diff(have.splitlines(keepends=True), want.splitlines(keepends=True),
                                        fromfile=f"a/{display}/{rel}", tofile=f"b/{display}/{rel}")
            text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in diff)
            drift.changed[str(rel)] = text
    for key in sorted(set(owned_files(folder)) - {str(r) for r in files}):
        if (folder / key).exists():
            drift.extra.append(key)
    return drift
