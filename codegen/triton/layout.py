"""Where ``generated/<name>/`` keeps the files of its Triton repositories: each file once (issue 23).

A deployable repository (``triton/`` for the HugeCTR model step, ``triton_torch/`` for the PyTorch one) is its own
folder's files plus the files it shares with the rest of the model's generated folder, which MANIFEST.json's
``"repositories"`` maps (path in the repository -> path in the model's folder):

* the HugeCTR model's graph JSON ``<name>/1/<name>.json`` is ``<name>.json``, the file graph_to_json writes;
* the PyTorch repository's preprocessing model and ensemble are ``triton/``'s (the same bytes: both model steps
  consume the same VCSR tensors), so ``triton_torch/`` holds only its model step.

``ctrgen assemble`` composes a repository from the folder and the map; ``ctrgen validate`` reads a generated
repository through the map (a shared file is checked where it lies)."""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

from ..runtime.contract import MANIFEST

REPOSITORIES = "repositories"      # MANIFEST.json's key
HUGECTR_FOLDER, TORCH_FOLDER = "triton", "triton_torch"     # in generated/<name>/, by model step


def folder_of(step: str) -> str:
    """The folder of generated/<name>/ holding the repository of a model step ("hugectr" or "torch")."""
    return TORCH_FOLDER if step == "torch" else HUGECTR_FOLDER


def share(files: dict[PurePosixPath, str], folder: PurePosixPath,
          repository: dict[PurePosixPath, str]) -> dict[str, str]:
    """Add ``repository`` (its paths relative to it) to ``files`` (the model folder's, paths relative to it) under
    ``folder``, except the files the model folder already holds with the same bytes: one at the same path in a
    repository rendered before, or one of the same name at the folder's top level. Returns the shared files,
    {path in the repository: path in the model folder}."""
    shared: dict[str, str] = {}
    earlier = {p.parts[0] for p in files if len(p.parts) > 1}
    for rel, text in repository.items():
        source = next((PurePosixPath(f, *rel.parts) for f in sorted(earlier)
                       if files.get(PurePosixPath(f, *rel.parts)) == text), None)
        if source is None and files.get(PurePosixPath(rel.name)) == text:
            source = PurePosixPath(rel.name)
        if source is None:
            files[folder / rel] = text
        else:
            shared[str(rel)] = str(source)
    return dict(sorted(shared.items()))


def compose(files: dict[PurePosixPath, str], folder: str, shared: dict[str, str]) -> dict[PurePosixPath, str]:
    """The whole repository ``folder`` from the model folder's rendered ``files`` (the inverse of :func:`share`)."""
    out = {PurePosixPath(*p.parts[1:]): t for p, t in files.items() if p.parts[0] == folder and len(p.parts) > 1}
    for rel, source in shared.items():
        out[PurePosixPath(rel)] = files[PurePosixPath(source)]
    return dict(sorted(out.items()))


def shared_files(model_dir: Path, folder: str) -> dict[PurePosixPath, Path] | None:
    """{path in the repository ``model_dir/folder``: the file the model folder keeps it in}, from the folder's
    MANIFEST.json; None when ``model_dir`` is not a folder ctrgen generated (no readable MANIFEST.json of ctrgen).
    A path that leaves the model folder is not followed."""
    try:
        doc = json.loads((model_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("generator") != "ctrgen":
        return None
    repos = doc.get(REPOSITORIES)
    entries = repos.get(folder) if isinstance(repos, dict) else None
    if not isinstance(entries, dict):
        return {}
    out: dict[PurePosixPath, Path] = {}
    for rel, source in entries.items():
        if not (isinstance(rel, str) and isinstance(source, str)):
            continue
        r, s = PurePosixPath(rel), PurePosixPath(source)
        if r.is_absolute() or s.is_absolute() or ".." in r.parts or ".." in s.parts:
            continue
        out[r] = model_dir.joinpath(*s.parts)
    return out


def generated_repository(path: Path) -> dict[PurePosixPath, Path] | None:
    """The shared files of ``path`` when it is a repository folder of a ctrgen-generated model folder
    (``generated/<name>/triton`` or ``triton_torch``), else None."""
    path = path if path.name else path.resolve()
    return shared_files(path.parent, path.name)


def rendered_repository(files: dict[PurePosixPath, str], folder: str) -> dict[PurePosixPath, str]:
    """The whole repository ``folder`` of a rendered model folder (its MANIFEST.json says what is shared)."""
    doc = json.loads(files[PurePosixPath(MANIFEST)])
    return compose(files, folder, doc.get(REPOSITORIES, {}).get(folder, {}))


def repository_sources(model_dir: Path, folder: str) -> dict[PurePosixPath, Path]:
    """{path in the repository ``folder``: the file on disk}: the folder's own files (also those ctrgen did not write)
    and the shared ones MANIFEST.json maps."""
    root = model_dir / folder
    out = {PurePosixPath(p.relative_to(root).as_posix()): p for p in sorted(root.rglob("*")) if p.is_file()}
    for rel, source in (shared_files(model_dir, folder) or {}).items():
        out.setdefault(rel, source)
    return dict(sorted(out.items()))
