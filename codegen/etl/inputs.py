"""Check the raw files before the ETL starts: each exists, has rows and every declared column, in a type that can be
read as the declared dtype. A problem is one line naming the file and the column (exit 2); nothing is written.

Parquet files are checked from their footer (schema and row count); CSV files are streamed once through pyarrow with
the declared column types, so a value that does not parse is found with its column before NVTabular runs.
"""

from __future__ import annotations

import csv
import os
import re
import socket
from pathlib import Path
from typing import Callable

from ..errors import UserError
from ..inputs import check_regular

# A header of a few thousand columns is ~100 kB.
MAX_HEADER_CHARS = 1 << 20
MAX_HEADER_COLUMNS = 10_000
INTEGER = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def _col_field(field: str, name: str) -> str:
    """etl.inputs.train -> etl.inputs.columns.<name> (the columns are declared once for all input files)."""
    section = field.rsplit(".", 1)[0] if field.endswith((".train", ".valid")) else field
    return f"{section}.columns.{name}"


def _arrow_kind(arrow_type) -> str:
    import pyarrow as pa

    t = arrow_type
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "str"
    if pa.types.is_dictionary(t):
        return _arrow_kind(t.value_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return "list"
    return str(t)


def _castable(kind: str, declared: str) -> bool:
    if declared == "str":
        return kind in ("str", "int", "null", "list")
    if declared in INTEGER:
        return kind in ("int", "bool", "null")
    if declared in ("float32", "float64"):
        return kind in ("int", "float", "bool", "null")
    if declared == "bool":
        return kind in ("bool", "int", "null")
    return False


def check_parquet(path: Path, columns: dict[str, str], shown: str, field: str,
                  unfilled: dict[str, str] | None = None) -> int:
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path).metadata
        schema = meta.schema.to_arrow_schema()
    except (OSError, ValueError) as exc:
        raise UserError.one(shown, f"not a readable parquet file: {exc}", field=field) from None
    for name, declared in columns.items():
        idx = schema.get_field_index(name)
        if idx < 0:
            have = ", ".join(n for n in schema.names if not n.startswith("__"))[:200]
            raise UserError.one(shown, f"column {name!r} is missing (the file has: {have})",
                                field=_col_field(field, name), fix="correct the column name in the spec")
        kind = _arrow_kind(schema.field(idx).type)
        if not _castable(kind, declared):
            raise UserError.one(shown, f"column {name!r} holds {schema.field(idx).type}, which cannot be read as "
                                       f"{declared}", field=_col_field(field, name),
                                fix="declare the column's real dtype (str for text ids)")
    if meta.num_rows == 0:
        raise UserError.one(shown, "the file has no rows", field=field, fix="check the input path")
    for name in _integer_columns(columns):
        if _parquet_nulls(path, name):
            raise _missing_id(shown, field, name, columns[name], "")
    missing = _count_missing(pq.read_table(path, columns=[n for n in unfilled or {} if n in columns]))
    _refuse_unfilled(shown, missing, unfilled or {})
    return meta.num_rows


def unfilled_columns(plan) -> dict[str, str]:
    """{column: spec field of its group's ops} of the continuous columns no FillMissing fills: a missing value in
    one would reach the output as NaN (and the trained model's loss)."""
    return {c: f"etl.groups.{gi}.ops" for gi, g in enumerate(plan.groups)
            if g.role == "continuous" and not any(op.name == "FillMissing" for op in g.ops) for c in g.columns}


def _count_missing(table) -> dict[str, int]:
    """{column: its null and NaN values} of an Arrow table or record batch (a CSV's empty field is a null)."""
    import pyarrow.compute as pc
    import pyarrow.types as pt

    counts = {}
    for name in table.schema.names:
        column = table.column(name)
        n = column.null_count
        if pt.is_floating(column.type):
            n += pc.sum(pc.is_nan(column).fill_null(False).cast("int64")).as_py() or 0
        counts[name] = n
    return counts


def _refuse_unfilled(shown: str, missing: dict[str, int], unfilled: dict[str, str]) -> None:
    for name, count in missing.items():
        if count:
            raise UserError.one(shown, f"continuous column {name!r} has {count} missing value(s) (empty or NaN) and "
                                       "no FillMissing: the ETL would write NaN", field=unfilled[name],
                                fix="add FillMissing to its group's ops (e.g. ops: [FillMissing, Normalize]), or "
                                    "fill or drop those rows")


def _integer_columns(columns: dict[str, str]) -> list[str]:
    return [n for n, t in columns.items() if t in INTEGER]


def _missing_id(shown: str, field: str, name: str, dtype: str, where: str) -> UserError:
    """An integer column with an empty (or NaN) value: Categorify and the id columns of etl.py need every value, and
    pyarrow reads "", "NaN" and "null" in a CSV as missing, so the type check alone lets them through."""
    return UserError.one(shown, f"column {name!r} has an empty or NaN value{where}, which is no {dtype}",
                         field=_col_field(field, name), fix="fill or drop those rows, or declare the column as str")


def _parquet_nulls(path: Path, name: str) -> bool:
    """Whether the column holds a null, from the row groups' statistics where they count nulls, else by reading it."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    idx = pf.schema_arrow.get_field_index(name)
    for rg in range(pf.metadata.num_row_groups):
        stats = pf.metadata.row_group(rg).column(idx).statistics
        if stats is None or not stats.has_null_count:
            return pf.read(columns=[name]).column(0).null_count > 0
        if stats.null_count:
            return True
    return False


def check_csv(path: Path, columns: dict[str, str], sep: str, shown: str, field: str,
              unfilled: dict[str, str] | None = None) -> int:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    try:
        with open(path, encoding="utf-8", newline="") as fh:
            line = fh.readline(MAX_HEADER_CHARS + 1)        # bounded: a file without line breaks is not read whole
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError.one(shown, f"cannot read the CSV header: {exc}", field=field) from None
    if len(line) > MAX_HEADER_CHARS:
        raise UserError.one(shown, f"the first line is longer than {MAX_HEADER_CHARS} characters: no CSV header",
                            field=field, fix="check the file and etl.inputs.sep")
    header = _header(line, sep)
    if len(header) > MAX_HEADER_COLUMNS:
        raise UserError.one(shown, f"the header has {len(header)} columns, more than the {MAX_HEADER_COLUMNS} the ETL "
                                   "reads", field=field, fix="check the file and etl.inputs.sep")
    for name in columns:
        if name not in header:
            raise UserError.one(shown, f"column {name!r} is missing (the header has: {', '.join(header)[:200]})",
                                field=_col_field(field, name), fix="correct the column name in the spec")
    types = {n: (pa.string() if t == "str" else pa.from_numpy_dtype(__import__("numpy").dtype(t)))
             for n, t in columns.items()}
    rows, wanted = 0, [n for n in unfilled or {} if n in columns]
    missing = dict.fromkeys(wanted, 0)
    try:
        reader = pcsv.open_csv(path, parse_options=pcsv.ParseOptions(delimiter=sep),
                               convert_options=pcsv.ConvertOptions(column_types=types, include_columns=list(types)))
        integer = _integer_columns(columns)
        for batch in reader:
            for name in integer:
                nulls = batch.column(name).is_null()
                if nulls.true_count:
                    first = nulls.to_pylist().index(True)
                    raise _missing_id(shown, field, name, columns[name], f" in data row {rows + first + 1}")
            for name, count in _count_missing(batch.select(wanted)).items():
                missing[name] += count
            rows += batch.num_rows
    except pa.ArrowInvalid as exc:
        text = str(exc)
        bad = next((n for n in columns if f"'{n}'" in text or f"column #{header.index(n)}" in text), None)
        if bad is None:
            raise UserError.one(shown, f"cannot be read: {text.splitlines()[0]}", field=field) from None
        raise UserError.one(shown, f"column {bad!r} has a value that cannot be read as {columns[bad]}: "
                                   f"{text.splitlines()[0]}", field=_col_field(field, bad),
                            fix="declare the column's real dtype (str for text ids) or clean the file") from None
    if rows == 0:
        raise UserError.one(shown, "the file has no rows", field=field, fix="check the input path")
    _refuse_unfilled(shown, missing, unfilled or {})
    return rows


def check_file(path: Path, fmt: str, columns: dict[str, str], sep: str, shown: str, field: str,
               unfilled: dict[str, str] | None = None) -> int:
    if not os.path.lexists(path):
        raise UserError.one(shown, "input file not found", field=field, fix="check the path (relative to the spec)")
    try:        # a FIFO, a device, a folder: refused before it is opened (data files have no size cap)
        check_regular(path, "input file", 1 << 62)
    except UserError as exc:
        raise UserError.one(shown, exc.problems[0].message, field=field,
                            fix="name the data file itself in the spec") from None
    if fmt == "csv":
        return check_csv(path, columns, sep, shown, field, unfilled)
    return check_parquet(path, columns, shown, field, unfilled)


def _shown(path: Path) -> str:
    """The file as the user finds it from here (relative to the working directory when below it)."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path.resolve())


def check_inputs(plan, base: Path) -> int:
    """Check every raw file of the plan; returns the number of rows of the train and valid files."""
    rows, unfilled = 0, unfilled_columns(plan)
    for key, files in (("train", plan.train), ("valid", plan.valid or ())):
        for f in files:
            rows += check_file(base / f, plan.train_format, dict(plan.inputs.columns), plan.inputs.sep,
                               _shown(base / f), f"etl.inputs.{key}", unfilled)
    if plan.join is not None:
        check_file(base / plan.join.path, plan.join_format, dict(plan.join.columns), plan.join.sep,
                   _shown(base / plan.join.path), "etl.join", unfilled)
    return rows


def _header(line: str, sep: str) -> list[str]:
    """The CSV header's names as pyarrow and pandas read them: quotes ("userId") are CSV quoting, not part of the
    name."""
    line = line.rstrip("\r\n")
    if len(sep) != 1:
        return line.split(sep)
    return next(csv.reader([line], delimiter=sep), [])


_SCHEDULER = re.compile(r"(?:(tcp|tls|ucx)://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})")


def check_scheduler(address: str, timeout: float = 5.0) -> None:
    """--scheduler: ``[tcp|tls|ucx://]HOST:PORT``, and for TCP a scheduler that accepts a connection, checked before
    the ETL starts (Dask's own failure is a traceback after a long wait)."""
    m = _SCHEDULER.fullmatch(address)
    if m is None or not 0 < int(m.group(3)) < 65536:
        raise UserError.one(address, "not a Dask scheduler address", field="--scheduler",
                            fix="give [tcp://]HOST:PORT, e.g. tcp://10.0.0.5:8786")
    if m.group(1) == "ucx":
        return
    host = m.group(2).strip("[]")
    try:
        socket.create_connection((host, int(m.group(3))), timeout=timeout).close()
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        raise UserError.one(address, f"cannot reach the Dask scheduler: {why}", field="--scheduler",
                            fix="start the scheduler (dask scheduler) or check its address") from None


def check_split(ctx, plan, rows: int, uniform: Callable, chunk: int = 1 << 22) -> None:
    """Without etl.inputs.valid, valid_fraction of the train rows is held out by the generated script's own
    ``uniform(row, seed) < fraction``: both splits must get a row (1e-300 of 40 rows holds out none, and NVTabular
    fails on an empty split). Counted in chunks, stopping as soon as both splits have one."""
    import numpy as np

    if plan.valid is not None:
        return
    fraction, seed = plan.split.valid_fraction, plan.split.seed
    valid = train = 0
    for first in range(0, rows, chunk):
        held = int(np.count_nonzero(uniform(np.arange(first, min(rows, first + chunk), dtype=np.int64), seed)
                                    < fraction))
        valid, train = valid + held, train + min(chunk, rows - first) - held
        if valid and train:
            return
    line, col = ctx.loaded.where("etl", "split", "valid_fraction")
    empty = "valid" if not valid else "train"
    raise UserError.one(ctx.display, f"valid_fraction {fraction} of the {rows} train rows leaves the {empty} split "
                                     "empty", field="etl.split.valid_fraction", line=line, col=col,
                        fix="choose a fraction that leaves rows in both splits, or give etl.inputs.valid")
