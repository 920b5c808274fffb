"""HugeCTR's saved model files (hugectr.md §5), read and written as HugeCTR's Model::download_params_to_files writes
them: ``<prefix>_dense_<iter>.model`` (float32, no header), ``<dense file>.ntp.json`` (BatchNorm running statistics;
only when the model has a BatchNorm) and per table ``<prefix><i>_sparse_<iter>.model/`` with ``key`` (int64),
``emb_vector`` (float32 x vec per key) and, for localized tables, ``slot_id`` (uint64 per key). Little-endian, as on
every machine HugeCTR runs on.

Every size is checked before a value is used; a refusal is one line naming the file.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import UserError
from ..inputs import read_json

FIELD = "--hugectr"
DENSE = re.compile(r"^(?P<prefix>.*)_dense_(?P<iter>\d+)\.model$")
KEY, VECTORS, SLOTS = "key", "emb_vector", "slot_id"


def dense_name(prefix: str, iteration: int) -> str:
    return f"{prefix}_dense_{iteration}.model"


def sparse_name(prefix: str, index: int, iteration: int) -> str:
    return f"{prefix}{index}_sparse_{iteration}.model"


def ntp_name(dense: str) -> str:
    return f"{dense}.ntp.json"


@dataclass(frozen=True)
class Found:
    prefix: str
    iteration: int


def find_dense(folder: Path, iteration: int | None) -> Found:
    """The one ``<prefix>_dense_<iter>.model`` of ``folder`` (of iteration ``iteration`` when given)."""
    if not folder.is_dir():
        raise UserError.one(folder, "not a folder", field=FIELD, fix="pass the folder HugeCTR saved its model files in")
    found = sorted((m["prefix"], int(m["iter"])) for p in folder.iterdir()
                   if (m := DENSE.match(p.name)) and not p.name.startswith("_opt") and "_opt_dense_" not in p.name)
    if iteration is not None:
        found = [f for f in found if f[1] == iteration]
    if not found:
        at = f" of iteration {iteration}" if iteration is not None else ""
        raise UserError.one(folder, f"holds no <prefix>_dense_<iter>.model{at}", field=FIELD,
                            fix="pass the folder of save_params_to_files or of fit's snapshots (and --iter N)")
    if len(found) > 1:
        names = ", ".join(dense_name(p, i) for p, i in found[:4])
        raise UserError.one(folder, f"holds several dense files ({names})", field=FIELD,
                            fix="pass --iter N, or a folder with one saved model")
    return Found(*found[0])


def _size(path: Path, what: str) -> int:
    if not path.is_file():
        raise UserError.one(path, f"{what} not found", field=FIELD,
                            fix="pass the complete folder HugeCTR saved (the dense file and one sparse folder per table)")
    return path.stat().st_size


def read_dense(path: Path, count: int) -> np.ndarray:
    size = _size(path, "dense file")
    if size != 4 * count:
        raise UserError.one(path, f"holds {size} bytes; this spec's dense layers have {count} weights ({4 * count} "
                            "bytes of float32 in network order)", field=FIELD,
                            fix="import with the spec the model was trained from")
    return np.fromfile(path, dtype="<f4", count=count)


def read_ntp(path: Path, widths: list[tuple[str, int]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The running (mean, var) of each BatchNorm, in network order; ``widths``: (layer, width) each."""
    if not widths:
        return []
    _size(path, "BatchNorm statistics file (.ntp.json)")
    # as every JSON input is read (a regular file, bounded, UTF-8): ~20 bytes a number of 2 x the widths
    document = read_json(path, "ntp.json", 4096 + 64 * sum(w for _, w in widths))
    try:
        layers = document["layers"]
        if not isinstance(layers, list):
            raise TypeError
    except (KeyError, TypeError):
        raise UserError.one(path, "not the JSON HugeCTR writes ({\"layers\": [{\"type\": \"BatchNorm\", \"mean\": [...], "
                            "\"var\": [...]}, ...]})", field=FIELD, fix="pass the .ntp.json saved with the dense file") \
            from None
    if len(layers) != len(widths):
        raise UserError.one(path, f"holds {len(layers)} entries; the spec has {len(widths)} BatchNorm layers",
                            field="layers", fix="import with the spec the model was trained from")
    out = []
    for i, (entry, (layer, width)) in enumerate(zip(layers, widths)):
        pair = []
        for name in ("mean", "var"):
            values = entry.get(name) if isinstance(entry, dict) else None
            if not isinstance(values, list) or len(values) != width or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values):
                raise UserError.one(path, f"'{name}' of BatchNorm '{layer}' is not {width} finite numbers",
                                    field=f"layers[{i}].{name}", fix="import with the spec the model was trained from")
            pair.append(np.asarray(values, dtype=np.float32))
        out.append((pair[0], pair[1]))
    return out


def ntp_text(stats: list[tuple[np.ndarray, np.ndarray]]) -> str:
    """HugeCTR's layout of the file (Network::get_no_trained_params_in_string). HugeCTR prints each number with
    std::to_string (six decimals); here each float32 is written in its shortest exact form, which every JSON reader
    (HugeCTR's, hugectr2onnx's) reads back as the same float32, so the statistics survive a round trip."""
    entries = []
    for mean, var in stats:
        row = ['      "type": "BatchNorm"',
               '      "mean": [' + ", ".join(_float(v) for v in mean) + "]",
               '      "var": [' + ", ".join(_float(v) for v in var) + "]"]
        entries.append("    {\n" + ",\n".join(row) + "\n    }")
    return '{\n  "layers": [\n' + ",\n".join(entries) + "\n  ]\n}\n"


def _float(value: np.float32) -> str:
    return json.dumps(float(np.format_float_positional(np.float32(value), unique=True, trim="0")))


@dataclass(frozen=True)
class Dump:
    keys: np.ndarray                # int64
    vectors: np.ndarray             # float32 (n, vec)
    slots: np.ndarray | None        # uint64, localized tables only


def read_sparse(folder: Path, vec_size: int, localized: bool) -> Dump:
    if not folder.is_dir():
        raise UserError.one(folder, "sparse model folder not found", field=FIELD,
                            fix="pass the complete folder HugeCTR saved (one <prefix><i>_sparse_<iter>.model/ per table)")
    key_size = _size(folder / KEY, "key file")
    if key_size % 8:
        raise UserError.one(folder / KEY, f"holds {key_size} bytes, not a whole number of int64 keys", field=FIELD,
                            fix="the file is truncated: save the model again")
    n = key_size // 8
    vec_bytes = _size(folder / VECTORS, "emb_vector file")
    if vec_bytes != 4 * vec_size * n:
        raise UserError.one(folder / VECTORS, f"holds {vec_bytes} bytes; {n} keys of embedding_vec_size {vec_size} "
                            f"take {4 * vec_size * n}", field=FIELD,
                            fix="a wrong embedding_vec_size in the spec, or a truncated file")
    slots = None
    if localized:
        slot_bytes = _size(folder / SLOTS, "slot_id file")
        if slot_bytes != 8 * n:
            raise UserError.one(folder / SLOTS, f"holds {slot_bytes} bytes; {n} keys take {8 * n}", field=FIELD,
                                fix="the file is truncated: save the model again")
        slots = np.fromfile(folder / SLOTS, dtype="<u8", count=n)
    keys = np.fromfile(folder / KEY, dtype="<i8", count=n)
    vectors = np.fromfile(folder / VECTORS, dtype="<f4", count=n * vec_size).reshape(n, vec_size)
    return Dump(keys, vectors, slots)


def write_sparse(folder: Path, dump: Dump) -> None:
    folder.mkdir()
    dump.keys.astype("<i8").tofile(folder / KEY)
    np.ascontiguousarray(dump.vectors, dtype="<f4").tofile(folder / VECTORS)
    if dump.slots is not None:
        dump.slots.astype("<u8").tofile(folder / SLOTS)
