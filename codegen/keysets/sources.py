"""Training sources: a HugeCTR file list (a text file: the count, then one data file per line; NVTabular writes it as
``_file_list.txt``), or a single data file. Paths inside a list are used as HugeCTR uses them: absolute, or relative
to the working directory."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from ..inputs import MAX_LOCK_BYTES, read_text

DATA_SUFFIXES = (".parquet", ".data", ".bin")


@dataclass(frozen=True)
class Source:
    path: Path                 # what the user named (a file list or one data file)
    files: tuple[Path, ...]    # the data files it stands for
    fmt: str                   # "parquet", "norm" or "raw"


def read_file_list(path: Path) -> list[Path]:
    if not os.path.lexists(path):
        raise UserError.one(path, "file list not found", fix="check the path (ctrgen keysets reads it here)")
    text = read_text(path, "file list", MAX_LOCK_BYTES)      # regular, bounded, UTF-8: a FIFO or device is refused
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines or not lines[0].isdigit() or len(lines[0]) > 9:
        raise UserError.one(path, "not a HugeCTR file list: the first line must be the number of files", line=1,
                            fix="write the count, then one data file per line")
    count, files = int(lines[0]), lines[1:]
    if count != len(files):
        raise UserError.one(path, f"the first line says {count} files, the list has {len(files)}", line=1,
                            fix="correct the count")
    out = []
    for i, name in enumerate(files, start=2):
        f = Path(name)
        if not f.is_file():
            raise UserError.one(path, f"data file {name!r} not found", line=i,
                                fix="paths are absolute or relative to the working directory, as HugeCTR reads them")
        out.append(f)
    return out


def open_source(path: Path, fmt: str | None = None) -> Source:
    """``fmt`` None: a ``.parquet`` file (or a list of them) is Parquet, anything else Norm (Raw only when given:
    a ``.bin`` file says nothing of its layout)."""
    path = Path(path)
    if not path.exists():
        raise UserError.one(path, "source not found", fix="name a file list or a data file")
    files = [path] if path.suffix in DATA_SUFFIXES else read_file_list(path)
    if not files:
        raise UserError.one(path, "the file list names no data files")
    detected = "parquet" if all(f.suffix == ".parquet" for f in files) else "norm"
    if fmt is None:
        fmt = detected
    elif fmt in ("norm", "raw") and any(f.suffix == ".parquet" for f in files):
        raise UserError.one(path, f"lists Parquet files, but the format is {fmt}", field="--format",
                            fix="use --format parquet (or data.format: parquet in the spec)")
    return Source(path=path, files=tuple(files), fmt=fmt)


def default_keyset_path(source: Path) -> Path:
    """``file_list.0.txt`` -> ``file_list.0.keyset`` (as the notebooks name them); ``x.parquet`` -> ``x.keyset``."""
    return source.with_suffix(".keyset") if source.suffix else source.with_name(source.name + ".keyset")
