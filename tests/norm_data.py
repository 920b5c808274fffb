"""A HugeCTR Norm file writer for tests, written from the format description alone (HugeCTR docs "Norm" and its
``data_generator.hpp`` DataWriter): header of eight int64, records of float32 label+dense then per slot int32 nnz and
the keys; with Check_t.Sum each block is framed as int32 length, bytes, check byte (sum of the bytes mod 256)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np


def _block(body: bytes, check_sum: bool) -> bytes:
    if not check_sum:
        return body
    return struct.pack("<i", len(body)) + body + bytes([sum(body) & 0xFF])


def write_norm(path: Path, records: list[tuple[list[float], list[list[int]]]], *, label_dim: int, dense_dim: int,
               key_type: str = "int64", check_sum: bool = True) -> Path:
    """records: (label + dense floats, keys per slot)."""
    slot_num = len(records[0][1]) if records else 1
    key = "<q" if key_type == "int64" else "<I"
    out = [_block(struct.pack("<8q", int(check_sum), len(records), label_dim, dense_dim, slot_num, 0, 0, 0),
                  check_sum)]
    for floats, slots in records:
        assert len(floats) == label_dim + dense_dim and len(slots) == slot_num
        body = struct.pack(f"<{len(floats)}f", *floats)
        for keys in slots:
            body += struct.pack("<i", len(keys)) + b"".join(struct.pack(key, k) for k in keys)
        out.append(_block(body, check_sum))
    path.write_bytes(b"".join(out))
    return path


def random_records(rng: np.random.Generator, n: int, *, slot_sizes: list[int], max_nnz: int, dense_dim: int,
                   base: int = 0) -> list[tuple[list[float], list[list[int]]]]:
    """Keys of slot k drawn from [base + sum(slot_sizes[:k]), ... + slot_sizes[k]) with 0..max_nnz keys per slot."""
    offsets = np.concatenate([[0], np.cumsum(slot_sizes)[:-1]]) + base
    recs = []
    for _ in range(n):
        floats = [float(rng.integers(0, 2))] + rng.random(dense_dim).astype(np.float32).tolist()
        slots = [[int(o + rng.integers(0, s)) for _ in range(int(rng.integers(0, max_nnz + 1)))]
                 for o, s in zip(offsets, slot_sizes)]
        recs.append((floats, slots))
    return recs


def write_file_list(path: Path, files: list[Path]) -> Path:
    path.write_text(f"{len(files)}\n" + "".join(f"{f}\n" for f in files))
    return path
