"""Row counts from the data: the slots features.json sizes from the data ("cardinality": null, "rows_from": "data";
tables HugeCTR sizes by workspace_size_per_gpu_in_mb, without slot_size_array) get the largest id + 1 that one scan
of the files the trainer is given finds, before the model is built. Ids beyond what the table holds in HugeCTR (its
max_vocabulary_size, from the workspace) are refused, never wrapped or clamped: the model would not be HugeCTR's."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .contract import ROWS_FROM_DATA
from .data import to_numpy
from .errors import DataError


def unsized(features: dict) -> list[str]:
    """The columns whose rows come from the data and are not counted yet."""
    return [c["name"] for s in features["sparse"] for c in s["columns"]
            if c.get("rows_from") == ROWS_FROM_DATA and c.get("cardinality") is None]


def _largest(file: Path, names: list[str], largest: dict[str, int]) -> None:
    """Fold the largest id of each of ``names`` in ``file`` into ``largest`` (-1: no id yet), a row group at a time."""
    try:
        reader = pq.ParquetFile(file)
        missing = [n for n in names if n not in reader.schema_arrow.names]
        if missing:
            raise DataError(f"{file}: column {missing[0]!r} is missing (features.json lists it)")
        for group in range(reader.num_row_groups):
            table = reader.read_row_group(group, columns=names)
            for name in names:
                column = table.column(name).combine_chunks()
                typ = column.type
                if pa.types.is_list(typ) or pa.types.is_large_list(typ):
                    column = column.flatten()
                if not pa.types.is_integer(column.type):
                    raise DataError(f"{file}: column {name!r}: type {typ}, expected ids")
                values = to_numpy(column.drop_null()) if column.null_count else to_numpy(column)
                if values.size:
                    if values.min() < 0:
                        raise DataError(f"{file}: column {name!r}: id {int(values.min())} is negative")
                    largest[name] = max(largest[name], int(values.max()))
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"{file}: not a Parquet file ({exc})") from None


def _check_capacity(sparse: dict, rows: dict[str, int], largest: dict[str, int]) -> None:
    """The table's rows up to each slot (slots before it included: one table holds them all) within HugeCTR's
    capacity, or one line naming the slot, its largest id and the capacity."""
    for table in sparse.get("hugectr_tables", []):
        used = 0
        for c in sparse["columns"]:
            used += rows[c["name"]]
            cap = int(table["max_vocabulary_size"])
            if used > cap:
                name = c["name"]
                need = f"largest id {largest[name]} needs {rows[name]}" if name in largest else \
                    f"cardinality {rows[name]} needs as many"
                before = f" ({used} with the slots before it)" if used != rows[name] else ""
                if table.get("embedding_collection"):   # a static table of the collection: its own rows
                    raise DataError(f"column {name!r}: {need} rows of table {table['name']!r}, more than its "
                                    f"max_vocabulary_size {cap} (HugeCTR's embedding collection overflows) (fix: "
                                    "a larger max_vocabulary_size, or ids below it)")
                raise DataError(
                    f"column {name!r}: {need} rows of table {table['name']!r}{before}, more than HugeCTR's "
                    f"{cap} (max_vocabulary_size from workspace_size_per_gpu_in_mb "
                    f"{table['workspace_size_per_gpu_in_mb']} on {table['gpus']} GPU(s)) (fix: a larger "
                    "workspace_size_per_gpu_in_mb, or slot_size_array with the cardinalities)")


def size_from_data(features: dict, files: list[Path]) -> dict:
    """Fill in the rows of the slots sized from the data (largest id + 1 in ``files``; 1 for a slot with no id) and
    check every such table against its HugeCTR capacity; returns what metrics.json records: column -> rows,
    largest id, table, capacity. ``features`` is changed in place; nothing is written."""
    names = unsized(features)
    if not names:
        return {}
    # A slot of size 0 shares the rows of the slot it names (features.json "shared_by"): one id range, scanned as one.
    groups = {c["name"]: list(c.get("shared_by", [])) for s in features["sparse"] for c in s["columns"]
              if c["name"] in names}
    scanned = names + [n for a in names for n in groups[a]]
    largest = dict.fromkeys(scanned, -1)
    for file in files:
        _largest(file, scanned, largest)
    for a in names:
        for n in groups[a]:
            largest[a] = max(largest[a], largest.pop(n))
    rows = {c["name"]: int(c["cardinality"]) if c["name"] not in largest else max(largest[c["name"]] + 1, 1)
            for s in features["sparse"] for c in s["columns"]}
    for s in features["sparse"]:
        _check_capacity(s, rows, largest)
    report = {}
    for s in features["sparse"]:
        tables = s.get("hugectr_tables", [])
        for c in s["columns"]:
            if c["name"] in largest:
                c["cardinality"] = rows[c["name"]]
                entry: dict = {
                    "rows": rows[c["name"]], "largest_id": largest[c["name"]] if largest[c["name"]] >= 0 else None,
                    "from": "largest id + 1 in the training and evaluation data",
                    "hugectr_max_vocabulary_size": {t["name"]: int(t["max_vocabulary_size"]) for t in tables}}
                if groups[c["name"]]:
                    entry["shared_by"] = groups[c["name"]]
                report[c["name"]] = entry
    return report


def data_sources(plan: list, extra: list[str] | None = None) -> list[str]:
    """Every training and evaluation source of the run's passes (each rank scans them all: the same rows
    everywhere), in order, once each."""
    out: list[str] = []
    for _, sources, eval_source in plan:
        for src in [*sources, eval_source, *(extra or [])]:
            if src and src not in out:
                out.append(src)
    return out


def describe(report: dict) -> str:
    """One log line: which slots were sized from the data, and their rows."""
    return "rows from the data (largest id + 1): " + ", ".join(f"{n} {r['rows']}" for n, r in report.items()) + \
        " (features.json has no cardinality for them: HugeCTR sizes these tables by workspace_size_per_gpu_in_mb)"
