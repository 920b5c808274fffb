"""Writing one keyset file: sorted unique keys, little-endian, 4 or 8 bytes, atomically (temp file, then rename)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from ..errors import UserError
from ..inputs import INT64_MAX, UINT32_MAX

# Key width -> the dtype of the file. 32-bit keys are HugeCTR's ``unsigned int`` (same bytes as int32 below 2**31).
KEY_DTYPES = {"int64": np.dtype("<i8"), "int32": np.dtype("<u4")}
KEY_LIMITS = {"int64": (0, INT64_MAX), "int32": (0, UINT32_MAX)}


def to_keyset(keys: np.ndarray, key_type: str, *, where: str) -> np.ndarray:
    """Sorted unique keys in the file's dtype; keys that do not fit the width are an error naming ``where``."""
    keys = np.unique(np.asarray(keys, dtype=np.int64))
    lo, hi = KEY_LIMITS[key_type]
    if keys.size and (keys[0] < lo or keys[-1] > hi):
        bad = int(keys[0]) if keys[0] < lo else int(keys[-1])
        raise UserError.one(where, f"key {bad} does not fit a {key_type} keyset "
                                   f"({'negative ids are not keys' if bad < 0 else 'too large for 32 bits'})",
                            fix=("use 64-bit ids (i64_input_key) or check the ids" if bad >= 0 else
                                 "check the data: HugeCTR keys are non-negative"))
    return keys.astype(KEY_DTYPES[key_type])


def write_keyset(path: Path, keys: np.ndarray) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(keys.tobytes())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)   # mkstemp creates 0600; a keyset is an ordinary data file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_keyset(path: Path, key_type: str) -> np.ndarray:
    """A keyset file as HugeCTR loads it (file_size / sizeof(key) keys)."""
    data = Path(path).read_bytes()
    width = KEY_DTYPES[key_type].itemsize
    if len(data) % width:
        raise UserError.one(path, f"{len(data)} bytes is not a whole number of {width}-byte keys",
                            fix="regenerate it with 'ctrgen keysets'")
    return np.frombuffer(data, dtype=KEY_DTYPES[key_type])
