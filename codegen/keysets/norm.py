"""Keys of HugeCTR's Norm binary format.

Layout (NVIDIA-Merlin/HugeCTR ``docs/hugectr_user_guide.md`` "Norm", ``HugeCTR/include/common.hpp``
``DataSetHeader``, ``HugeCTR/include/data_readers/data_reader_worker.hpp``, writer ``include/data_generator.hpp``):

* header: eight little-endian int64 — ``error_check`` (0: Check_t.Non, 1: Check_t.Sum), ``number_of_records``,
  ``label_dim``, ``dense_dim``, ``slot_num``, three reserved;
* each record: ``label_dim + dense_dim`` float32, then per slot an int32 ``nnz`` and ``nnz`` keys (uint32, or int64
  with ``i64_input_key``); the key width is not recorded in the file;
* with Check_t.Sum every block (the header, then each record) is framed as int32 byte length, the bytes, and one
  check byte = the bytes' sum modulo 256.

The Norm reader adds no slot offsets: the stored keys are the keys.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
import numpy as np

from ..errors import UserError

HEADER = struct.Struct("<8q")
KEY_BYTES = {"int32": 4, "int64": 8}
KEY_READ = {"int32": np.dtype("<u4"), "int64": np.dtype("<i8")}


@dataclass(frozen=True)
class NormHeader:
    check_sum: bool
    records: int
    label_dim: int
    dense_dim: int
    slot_num: int


def read_header(data: memoryview, path: Path) -> tuple[NormHeader, int]:
    """(header, offset of the first record)."""
    if len(data) >= 4 + HEADER.size + 1 and struct.unpack_from("<i", data, 0)[0] == HEADER.size \
            and struct.unpack_from("<q", data, 4)[0] == 1:
        fields, start, framed = HEADER.unpack_from(data, 4), 4 + HEADER.size + 1, True
        if (sum(data[4:4 + HEADER.size]) & 0xFF) != data[4 + HEADER.size]:
            raise UserError.one(path, "Norm header fails its check sum", fix="the file is damaged: rewrite it")
    elif len(data) >= HEADER.size and struct.unpack_from("<q", data, 0)[0] == 0:
        fields, start, framed = HEADER.unpack_from(data, 0), HEADER.size, False
    else:
        raise UserError.one(path, "not a HugeCTR Norm file (no DataSetHeader with error_check 0 or 1)",
                            fix="pass Norm data files or a file list of them (Parquet files end in .parquet)")
    header = NormHeader(framed, *fields[1:5])
    if header.records < 0 or header.label_dim < 0 or header.dense_dim < 0 or header.slot_num <= 0:
        raise UserError.one(path, f"implausible Norm header {fields[:5]}", fix="the file is damaged: rewrite it")
    return header, start


def norm_keys(path: Path, key_type: str, *, slot_num: int | None = None,
              check_sum: bool | None = None) -> tuple[np.ndarray, NormHeader]:
    """(the unique keys of one Norm file, its header). ``slot_num`` / ``check_sum``: what the model expects, checked
    against the header as HugeCTR's reader does ("DataHeaderError")."""
    data = memoryview(Path(path).read_bytes())
    header, pos = read_header(data, path)
    if slot_num is not None and header.slot_num != slot_num:
        raise UserError.one(path, f"the header has slot_num {header.slot_num}, the model {slot_num} "
                                  "(HugeCTR: DataHeaderError)", fix="use the spec of the model this data is for")
    if check_sum is not None and header.check_sum != check_sum:
        want, got = ("Sum", "Non") if check_sum else ("Non", "Sum")
        raise UserError.one(path, f"the file is written for Check_t.{got}, the reader uses Check_t.{want} "
                                  "(HugeCTR: DataHeaderError)", fix="rewrite the data or change the check type")
    if header.check_sum:
        keys = _framed_keys(data, pos, header, key_type, path)
    else:
        keys = _unframed_keys(data, pos, header, key_type, path)
    return keys, header


def _framed_keys(data: memoryview, pos: int, header: NormHeader, key_type: str, path: Path) -> np.ndarray:
    """Check_t.Sum: the record lengths give every record's place, so the slots of a chunk of records are parsed at
    once (one numpy pass per slot) and the check sums come from a cumulative sum. Returns unique keys."""
    size, n = len(data), header.records
    unpack_int = struct.Struct("<i").unpack_from
    starts = np.empty(n, dtype=np.int64)
    ends = np.empty(n, dtype=np.int64)
    for r in range(n):                       # the only per-record Python step: follow the length prefixes
        if pos + 4 > size:
            raise _truncated(path, r, n)
        length = unpack_int(data, pos)[0]
        if length < 0 or pos + 4 + length + 1 > size:
            raise _truncated(path, r, n)
        starts[r], ends[r] = pos + 4, pos + 4 + length
        pos += 4 + length + 1
    if pos != size:
        raise UserError.one(path, f"{size - pos} bytes after the {n} records the header announces",
                            fix="the file is damaged, or its header's number_of_records is wrong")
    raw = np.frombuffer(data, dtype=np.uint8)
    for lo in range(0, n, CHUNK):              # check sums, one chunk of records at a time (bounded memory)
        hi = min(n, lo + CHUNK)
        base = int(starts[lo])
        bounds = np.stack([starts[lo:hi], ends[lo:hi]], axis=1).ravel() - base
        # Even entries of the segment sums are the bodies [start, end); the check byte is their sum modulo 256.
        sums = np.add.reduceat(raw[base:int(ends[hi - 1]) + 1], bounds, dtype=np.uint8)[::2]   # wraps mod 256
        sums[starts[lo:hi] == ends[lo:hi]] = 0
        bad = np.flatnonzero(sums != raw[ends[lo:hi]])
        if bad.size:
            raise UserError.one(path, f"record {lo + int(bad[0])} fails its check sum",
                                fix="the file is damaged: rewrite it")
    width = KEY_BYTES[key_type]
    ints, keys = _aligned_views(data, 4, np.dtype("<i4")), _aligned_views(data, width, KEY_READ[key_type])
    uniques = []
    for lo in range(0, n, CHUNK):              # bounded memory: index arrays of one chunk of records at a time
        hi, parts = min(n, lo + CHUNK), []
        p, stop_all = starts[lo:hi] + 4 * (header.label_dim + header.dense_dim), ends[lo:hi]
        for slot in range(header.slot_num):
            over = np.flatnonzero(p + 4 > stop_all)
            if over.size:
                raise _bad_record(path, lo + int(over[0]), slot, key_type, n)
            nnz = _gather(ints, p, 4).astype(np.int64)
            stop = p + 4 + nnz * width
            over = np.flatnonzero((nnz < 0) | (stop > stop_all))
            if over.size:
                raise _bad_record(path, lo + int(over[0]), slot, key_type, n)
            total = int(nnz.sum())
            if total:
                rank = np.arange(total) - np.repeat(np.cumsum(nnz) - nnz, nnz)
                parts.append(_gather(keys, np.repeat(p + 4, nnz) + rank * width, width).astype(np.int64))
            p = stop
        over = np.flatnonzero(p != stop_all)
        if over.size:
            raise _bad_record(path, lo + int(over[0]), header.slot_num - 1, key_type, n)
        if parts:
            uniques.append(np.unique(np.concatenate(parts)))
    return np.unique(np.concatenate(uniques)) if uniques else np.zeros(0, np.int64)


CHUNK = 1 << 16


def _aligned_views(data: memoryview, width: int, dtype: np.dtype) -> list[np.ndarray]:
    """``views[k][i]`` is the value at byte offset ``k + i * width``: values at any offset, without copying."""
    return [np.frombuffer(data, dtype=dtype, offset=k, count=(len(data) - k) // width) for k in range(width)]


def _gather(views: list[np.ndarray], offsets: np.ndarray, width: int) -> np.ndarray:
    out = np.empty(offsets.size, dtype=views[0].dtype)
    align = offsets % width
    for k in range(width):
        sel = align == k
        out[sel] = views[k][(offsets[sel] - k) // width]
    return out


def _unframed_keys(data: memoryview, pos: int, header: NormHeader, key_type: str, path: Path) -> np.ndarray:
    """Check_t.Non: a record's end is known only after reading it, so records are read one by one. Returns unique
    keys."""
    width = KEY_BYTES[key_type]
    head = 4 * (header.label_dim + header.dense_dim)
    size = len(data)
    chunks: list[memoryview] = []
    unpack_int = struct.Struct("<i").unpack_from
    for r in range(header.records):
        p = pos + head
        for slot in range(header.slot_num):
            if p + 4 > size:
                raise _bad_record(path, r, slot, key_type, header.records)
            nnz = unpack_int(data, p)[0]
            end = p + 4 + nnz * width
            if nnz < 0 or end > size:
                raise _bad_record(path, r, slot, key_type, header.records)
            chunks.append(data[p + 4:end])
            p = end
        pos = p
    if pos != size:
        raise UserError.one(path, f"{size - pos} bytes after the {header.records} records the header announces",
                            fix=f"check the key width (--key-type; this read used {key_type})")
    return np.unique(np.frombuffer(b"".join(chunks), dtype=KEY_READ[key_type]).astype(np.int64))


def _truncated(path: Path, record: int, total: int) -> UserError:
    return UserError.one(path, f"ends inside record {record} of {total}", fix="the file is truncated: rewrite it")


def _bad_record(path: Path, record: int, slot: int, key_type: str, total: int) -> UserError:
    return UserError.one(path, f"record {record} of {total}: slot {slot} runs past the record",
                         fix=f"check the key width (--key-type; this read used {key_type}) and the file")
