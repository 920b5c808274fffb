"""Keys of HugeCTR's Raw binary format (one ``.bin`` file of fixed-size samples, one-hot).

Layout (NVIDIA-Merlin/HugeCTR ``HugeCTR/include/data_readers/data_reader_worker_raw.hpp``): no header; each sample is
``label_dim + dense_dim`` 4-byte values (float32 with ``float_label_dense``, else int32), then one int32 id per slot.
The reader's key is the id plus its slot's offset (the exclusive prefix sum of ``slot_size_array``; none without
it), held in the model's key width (``unsigned int``, or ``long long`` with ``i64_input_key``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import UserError

CHUNK = 1 << 18   # samples read at a time (bounded memory whatever the file's size)


@dataclass(frozen=True)
class RawLayout:
    label_dense_dim: int           # 4-byte label and dense values before the ids
    slot_offsets: tuple[int, ...]  # one per slot; zeros when the reader has no slot_size_array


def raw_keys(path: Path, layout: RawLayout) -> np.ndarray:
    """The unique keys (int64) of one Raw file."""
    path = Path(path)
    slots = len(layout.slot_offsets)
    width = layout.label_dense_dim + slots          # 4-byte words per sample
    size = path.stat().st_size
    if size % (4 * width):
        raise UserError.one(path, f"{size} bytes are no whole number of {4 * width}-byte samples "
                                  f"({layout.label_dense_dim} label/dense values and {slots} slot ids each)",
                            fix="use the spec of the model this data is for (label, dense and slot counts)")
    words = np.memmap(path, dtype="<i4", mode="r", shape=(size // (4 * width), width)) if size else \
        np.zeros((0, width), dtype="<i4")
    offsets = np.asarray(layout.slot_offsets, dtype=np.int64)
    uniques = []
    for lo in range(0, len(words), CHUNK):
        ids = np.asarray(words[lo:lo + CHUNK, layout.label_dense_dim:], dtype=np.int64)
        uniques.append(np.unique(ids + offsets))
    return np.unique(np.concatenate(uniques)) if uniques else np.zeros(0, np.int64)
