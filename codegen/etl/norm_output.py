"""HugeCTR Norm files from the ETL's Parquet output (``etl.output.format: norm``), as seed 003's preprocess.sh
prepares its data: data files of ``rows_per_file`` records, and training file lists of ``files_per_list`` files each
(``file_list.0.txt``, ``file_list.1.txt``, ...: one per continuous-training source), the validation rows in one list.

The format (the reader in codegen/keysets/norm.py documents it): a header of eight little-endian int64
(error_check, number_of_records, label_dim, dense_dim, slot_num, three reserved); per record the labels and dense
values as float32, then per slot an int32 count and that many keys (uint32, or int64 with 64-bit keys). With
Check_t.Sum each block, the header and every record, is framed as its int32 length, the bytes and one check byte
(their sum modulo 256). The Norm reader adds no slot offsets, so the keys are written as the embedding sees them:
each slot's ids plus the exclusive prefix sum of the cardinalities before it (what the Parquet reader adds from
slot_size_array), so that the slots never share a key.
"""

from __future__ import annotations

import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import UserError

HEADER = struct.Struct("<8q")
KEY_DTYPES = {"int32": np.dtype("<u4"), "int64": np.dtype("<i8")}


@dataclass(frozen=True)
class NormLayout:
    labels: tuple[str, ...]
    dense: tuple[str, ...]
    slots: tuple[str, ...]           # categorical columns in slot order
    cardinalities: tuple[int, ...]
    key_type: str                    # "int32" (HugeCTR's unsigned int) or "int64"
    check_sum: bool

    @property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.cardinalities, dtype=np.int64)[:-1]]).astype(np.int64)


def _read_rows(split_dir: Path, layout: NormLayout):
    """The split's rows in file order: (labels + dense as float32 (n, k), per slot a list of key arrays)."""
    import pyarrow.parquet as pq

    files = sorted(split_dir.glob("part_*.parquet"), key=lambda p: int(p.stem.split("_")[-1]))
    for f in files:
        table = pq.read_table(f, columns=[*layout.labels, *layout.dense, *layout.slots])
        floats = np.stack([table.column(c).to_numpy().astype(np.float32)
                           for c in (*layout.labels, *layout.dense)], axis=1) if layout.labels or layout.dense \
            else np.zeros((table.num_rows, 0), np.float32)
        slots = []
        for slot, (name, offset) in enumerate(zip(layout.slots, layout.offsets)):
            column = table.column(name).combine_chunks()
            if hasattr(column, "offsets"):            # a list column (multi-hot): its values and their offsets
                bounds = column.offsets.to_numpy()
                values = column.values.to_numpy(zero_copy_only=False).astype(np.int64)
            else:
                values = column.to_numpy(zero_copy_only=False).astype(np.int64)
                bounds = np.arange(len(values) + 1)
            if values.size and (values.min() < 0 or values.max() >= layout.cardinalities[slot]):
                raise UserError.one(f, f"column {name!r} holds ids outside 0..{layout.cardinalities[slot] - 1}, "
                                       "the cardinality the workflow records", field=name,
                                    fix="rerun the ETL: the data and the saved workflow disagree")
            slots.append((bounds, values + offset))
        yield floats, slots


def _frame(body: bytes, check_sum: bool) -> bytes:
    if not check_sum:
        return body
    return struct.pack("<i", len(body)) + body + bytes([sum(body) & 0xFF])


def _records(floats: np.ndarray, slots: list, layout: NormLayout):
    dtype = KEY_DTYPES[layout.key_type]      # every key is below the cardinalities' sum, checked to fit first
    for i in range(len(floats)):
        parts = [floats[i].tobytes()]
        for bounds, keys in slots:
            these = keys[bounds[i]:bounds[i + 1]]
            parts.append(struct.pack("<i", these.size) + these.astype(dtype).tobytes())
        yield _frame(b"".join(parts), layout.check_sum)


def _write_file(path: Path, records: list[bytes], layout: NormLayout) -> None:
    header = HEADER.pack(int(layout.check_sum), len(records), len(layout.labels), len(layout.dense),
                         len(layout.slots), 0, 0, 0)
    with open(path, "wb") as fh:
        fh.write(_frame(header, layout.check_sum))
        for rec in records:
            fh.write(rec)


def _write_list(path: Path, files: list[Path]) -> None:
    path.write_text(f"{len(files)}\n" + "".join(f"{f}\n" for f in files), encoding="utf-8")


def _write_files(folder: Path, rows, layout: NormLayout, rows_per_file: int) -> list[str]:
    """part_0.data, part_1.data, ... of rows_per_file records each (one, empty, for no rows); their names."""
    names: list[str] = []
    pending: list[bytes] = []
    for floats, slots in rows:
        for rec in _records(floats, slots, layout):
            pending.append(rec)
            if len(pending) == rows_per_file:
                names.append(f"part_{len(names)}.data")
                _write_file(folder / names[-1], pending, layout)
                pending = []
    if pending or not names:
        names.append(f"part_{len(names)}.data")
        _write_file(folder / names[-1], pending, layout)
    return names


def write_norm(parquet_out: Path, layout: NormLayout, *, rows_per_file: int, files_per_list: int) -> dict[str, int]:
    """``parquet_out``/train and /valid (the ETL's Parquet) -> ``parquet_out``/norm/{train,valid}/part_N.data with
    file lists; the folder appears whole (built beside it, then renamed). Returns the data files per split."""
    final = parquet_out / "norm"
    tmp = parquet_out / f".norm.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    counts = {}
    try:
        for split in ("train", "valid"):
            folder = tmp / split
            folder.mkdir(parents=True)
            names = _write_files(folder, _read_rows(parquet_out / split, layout), layout, rows_per_file)
            paths = [final / split / n for n in names]      # absolute, in the final folder: HugeCTR reads them so
            if split == "train":
                for k in range(0, len(paths), files_per_list):
                    _write_list(folder / f"file_list.{k // files_per_list}.txt", paths[k:k + files_per_list])
            else:
                _write_list(folder / "file_list.txt", paths)
            counts[split] = len(names)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return counts
