"""What an import produces (the spec text, the features lock, notes) and how a source's problems are reported; shared
by the script importer (this package's __init__) and the graph-JSON importer."""

from __future__ import annotations

import re
from typing import Any
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import field_path, Problem, UserError
from ..features import Features
from .source import Unit
from .to_spec import Imported


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class ImportResult:
    name: str
    spec_text: str
    features: Features
    unit: str                                   # which part of the source the model came from
    source: str = ""                            # the source path, for messages
    assumptions: list[str] = field(default_factory=list)
    # The spec with the PyTorch target too (Parquet data: what train_torch.py reads); write_import keeps it when the
    # model builds and translates with it, so that `ctrgen train` runs on the import as written.
    torch_text: str = ""
    # The text the model came from and its command line (a script or a notebook's unit; None for a graph JSON):
    # write_import reads its hugectr calls again and refuses a generated model.py that makes different ones.
    origin: tuple[Any, ...] | None = None


def _fail(path: Path, message: str, line: int | None = None, fix: str = "", unit: Unit | None = None,
          col: int | None = None) -> UserError:
    where = unit.where(line) if unit is not None else ""
    if where:
        message = f"{message} ({where})"
    return UserError([Problem(str(path), message, "", line, col if line else None, fix)])


MAX_NAME = 64    # the spec's limit on a model name (it names folders, files and Triton models)


def default_name(path: Path) -> str:
    """The model name a file name gives: an identifier of at most MAX_NAME characters."""
    stem = re.sub(r"[^A-Za-z0-9_]", "_", path.stem) or "model"
    stem = stem if not stem[0].isdigit() else f"m_{stem}"
    return stem[:MAX_NAME].rstrip("_") or "model"


def name_note(path: Path, name: str | None) -> str:
    """What the import says when it derived the name from a file name it had to shorten."""
    if name is not None:
        return ""
    full = re.sub(r"[^A-Za-z0-9_]", "_", path.stem)
    derived = default_name(path)
    return (f"name {derived!r}: the file name cut to {MAX_NAME} characters (pass --name to choose)"
            if len(full) > MAX_NAME else "")


def _finish(path: Path, imported: Imported, label: str, notes: list[str],
            origin: tuple[Any, ...] | None = None) -> ImportResult:
    from pydantic import ValidationError

    from ..specfile.model import Spec
    from ..specfile.write import write_spec

    spec = imported.spec
    if name := spec.get("name"):
        if not _NAME.match(name):
            raise _fail(path, f"model name {name!r} is not a valid identifier", None, "pass --name")
    try:
        model = Spec.model_validate(spec)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = field_path(list(err["loc"]))
        raise _fail(path, f"the imported model does not fit the spec: {where}: {err['msg']}") from None
    header = (f"Imported by ctrgen from {label} (HugeCTR {spec['hugectr_version']}).\n"
              f"Regenerate the script with: ctrgen generate {spec['name']}.yaml")
    torch_text = ""
    # A Norm or Raw reader's columns train as Parquet (ctrgen train --train PATH --eval PATH).
    if model.embedding_collection is None and model.reader_check is None and \
            "torch" not in model.targets:
        torch_text = write_spec(model.model_copy(update={"targets": [*model.targets, "torch"]}), header)
    return ImportResult(name=spec["name"], spec_text=write_spec(model, header), features=imported.features, unit=label,
                        source=str(path), assumptions=notes, torch_text=torch_text, origin=origin)
