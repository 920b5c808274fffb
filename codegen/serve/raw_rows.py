"""Raw rows as `ctrgen etl` reads them, for ``ctrgen query``: a CSV's list columns split on the separator the spec's
``etl.inputs.multi_hot`` names (the generated etl.py's rule: an empty field is an empty list, empty items are
dropped), and rows in JSON (an array of objects, or JSON lines) where ``null`` is a missing value.

A missing value goes where the workflow takes it: a float column carries it as NaN (FillMissing fills it; ``ctrgen
etl`` refuses a float column with missing values and no FillMissing), a list column as an empty list (etl.py reads a
missing list so). An integer or text column cannot carry one in a Triton request, and etl refuses an empty integer
too: such a row is refused naming the row and the column.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError
from ..inputs import parse_json, read_text

JSON_SUFFIXES = (".json", ".jsonl", ".ndjson")
MAX_JSON_ROWS_BYTES = 256 << 20         # a query's rows; a bigger set is a Parquet file


def read_json_rows(data: Path, columns: list[str], rows: int | None):
    """The ``columns`` of the first ``rows`` rows of a JSON file as a frame of Python values (null: None). Each row is
    an object with every column (other keys are ignored); a row without one is refused naming the row."""
    import pandas as pd

    text = read_text(data, "rows", MAX_JSON_ROWS_BYTES)
    if data.suffix.lower() == ".json":
        records = parse_json(text, data, "rows")
        if not isinstance(records, list):
            raise UserError.one(data, "must be a JSON array of row objects", field="--data",
                                fix='write [{"column": value, ...}, ...], or one object a line in a .jsonl file')
    else:
        records = [parse_json(line, data, "rows") for line in text.splitlines()[:rows] if line.strip()]
    records = records[:rows] if rows is not None else records
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise UserError.one(data, f"row {i} is not a JSON object", field="--data",
                                fix='one object of column values a row: {"column": value, ...}')
        missing = [c for c in columns if c not in record]
        if missing:
            raise UserError.one(data, f"row {i} has no {missing[0]!r} ({len(missing)} of the {len(columns)} columns "
                                f"the ensemble reads missing)", field=missing[0],
                                fix="give every column, null for a missing value")
    return pd.DataFrame({c: pd.Series([r[c] for r in records], dtype=object) for c in columns})


def split_list(value: Any, sep: str | None, data: Path, col: str, row: int) -> list:
    """One list column's value: a Python list (Parquet, JSON), None (missing: an empty list) or CSV text split on
    ``sep`` as etl.py splits it."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return []
    if isinstance(value, str):
        if sep is None:
            raise UserError.one(data, f"{col} is a list column: its CSV text needs the separator etl splits it on",
                                field=col, fix=f"pass --spec SPEC (its etl.inputs.multi_hot) or --list-sep {col}=SEP")
        return [item for item in value.split(sep) if item]
    if isinstance(value, (list, tuple, np.ndarray)):
        return list(value)
    raise UserError.one(data, f"row {row}: a {type(value).__name__} is not a list", field=col,
                        fix="give the column a list of values (JSON: [1, 2]; CSV: text split on its separator)")
