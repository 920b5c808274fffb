"""Files the scripts name: data file lists, keysets, the graph JSON, model files.

CTRGEN_STANDIN_ROOT=<dir>: absolute paths in the script are read and written below <dir> (the script was written
for a container whose file system has them); missing parent folders of such outputs are created.
CTRGEN_STANDIN_SKIP_DATA=1: do not check that data file lists, the files they list, and keyset files exist (the
checks run only where HugeCTR opens them: fit, start_data_reading/train/eval, the cache's update).
"""

from __future__ import annotations

import os
from pathlib import Path

from ._api import HugeCTRError

ROOT_ENV = "CTRGEN_STANDIN_ROOT"
SKIP_ENV = "CTRGEN_STANDIN_SKIP_DATA"


def resolve(path: str) -> Path:
    root = os.environ.get(ROOT_ENV)
    p = Path(path)
    if root and p.is_absolute():
        return Path(root) / p.relative_to(p.anchor)
    return p


def output(path: str) -> Path:
    """Where to write ``path``: a missing folder is an error unless the path is mapped below the root."""
    p = resolve(path)
    mapped = bool(os.environ.get(ROOT_ENV)) and Path(path).is_absolute()
    if mapped:
        p.parent.mkdir(parents=True, exist_ok=True)
    elif not p.parent.is_dir():
        raise HugeCTRError(f"Cannot open {path} for writing: folder {p.parent} does not exist (HugeCTR's ofstream "
                           "would silently write nothing)")
    return p


def skip_data() -> bool:
    return os.environ.get(SKIP_ENV, "") not in ("", "0")


def check_source(path: str, reader_type: str, what: str) -> None:
    """A Norm/Parquet source is a file list (count, then one path per line); Raw/RawAsync a single file."""
    if skip_data():
        return
    p = resolve(path)
    if not p.is_file():
        raise HugeCTRError(f"{what}: file {path!r} does not exist (set {SKIP_ENV}=1 to run without data)")
    if reader_type in ("Raw", "RawAsync"):
        return
    lines = [ln.strip() for ln in p.read_text().splitlines() if ln.strip()]
    try:
        count = int(lines[0])
    except (IndexError, ValueError):
        raise HugeCTRError(f"{what}: file list {path!r} must start with the number of files") from None
    listed = lines[1:]
    if count != len(listed) or count < 1:
        raise HugeCTRError(f"{what}: file list {path!r} announces {count} files and lists {len(listed)}")
    for f in listed:
        if not resolve(f).is_file():
            raise HugeCTRError(f"{what}: file {f!r} listed in {path!r} does not exist")


def check_keyset(path: str, what: str) -> None:
    if skip_data():
        return
    if not resolve(path).is_file():
        raise HugeCTRError(f"{what}: keyset file {path!r} does not exist (set {SKIP_ENV}=1 to run without data)")


def check_model_file(path: str, what: str) -> None:
    if not resolve(path).exists():
        raise HugeCTRError(f"{what}: {path!r} does not exist")
