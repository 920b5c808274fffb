"""Keys of NVTabular Parquet output, read with pyarrow: each categorical id plus its slot's offset.

HugeCTR's Parquet reader adds per-slot offsets, the exclusive prefix sums of ``slot_size_array`` in slot order
(hugectr.md §1.2), so the embedding sees ``id + offset[slot]``; a keyset must hold those keys. List (multi-hot)
columns contribute every element. HugeCTR rejects missing values in Parquet data, and an id at or above its slot's
size would land in the next slot's range: both are reported, naming the file and the column.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import UserError

WIDTHS = {"int32": "int32", "uint32": "int32", "int64": "int64", "uint64": "int64"}


@dataclass(frozen=True)
class SlotLayout:
    columns: tuple[str, ...]      # categorical columns in slot order
    slot_sizes: tuple[int, ...]   # slot_size_array (cardinalities), same order
    origin: str                   # where the layout came from (for messages)

    @property
    def offsets(self) -> tuple[int, ...]:
        out, acc = [], 0
        for size in self.slot_sizes:
            out.append(acc)
            acc += size
        return tuple(out)


def _width(pa_type) -> str | None:
    import pyarrow as pa

    if pa.types.is_list(pa_type) or pa.types.is_large_list(pa_type):
        pa_type = pa_type.value_type
    return WIDTHS.get(str(pa_type))


def parquet_keys(path: Path, layout: SlotLayout) -> tuple[np.ndarray, str]:
    """(keys with offsets, key width of the id columns: "int32" or "int64") of one Parquet file."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise UserError.one(path, f"cannot read Parquet file: {exc}") from None
    widths = set()
    for name in layout.columns:
        if name not in schema.names:
            raise UserError.one(path, f"has no column {name!r} (slot order from {layout.origin})", field=name,
                                fix="use the spec/lock of the workflow that wrote this file")
        w = _width(schema.field(name).type)
        if w is None:
            raise UserError.one(path, f"column {name!r} is {schema.field(name).type}, not integer ids", field=name,
                                fix="Categorify it in the workflow (HugeCTR reads int32/int64 key columns)")
        widths.add(w)
    if len(widths) > 1:
        raise UserError.one(path, "the key columns mix 32- and 64-bit ids", field=",".join(layout.columns),
                            fix="cast them to one width in to_parquet(dtypes=...)")
    table = pq.read_table(path, columns=list(layout.columns))
    parts = []
    for name, size, offset in zip(layout.columns, layout.slot_sizes, layout.offsets):
        col = table.column(name)
        if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
            col = pc.list_flatten(col)
        if col.null_count:
            raise UserError.one(path, f"column {name!r} has {col.null_count} missing values (HugeCTR's Parquet "
                                      "reader does not allow them)", field=name, fix="fill them in the workflow")
        ids = col.to_numpy().astype(np.int64, copy=False) if len(col) else np.zeros(0, np.int64)
        if ids.size:
            lo, hi = int(ids.min()), int(ids.max())
            if lo < 0 or hi >= size:
                bad = lo if lo < 0 else hi
                raise UserError.one(path, f"column {name!r} holds id {bad}, outside its slot size {size} "
                                          f"(slot_size_array from {layout.origin}); its key would fall into "
                                          "another slot's range", field=name,
                                    fix="the lock is stale for this data: run 'ctrgen lock' on its workflow")
        parts.append(np.unique(ids) + offset)
    keys = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return keys, widths.pop() if widths else "int64"
