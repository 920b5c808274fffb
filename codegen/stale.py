"""Is a features lock stale? The workflow's side of the comparison, read without nvtabular.

``check``, ``generate`` and ``lock --check`` compare the lock with the spec's workflow whenever that exists. Loading
``workflow.pkl`` imports nvtabular (2-3 s, pandas and dask with it), so this reads files instead:

* ``output_schema.pbtxt`` (and ``input_schema.pbtxt`` for the request columns) beside ``workflow.pkl``, which
  ``ctrgen demo`` writes and a user's ETL can write with one merlin-core call (README, "Features lock"): the same
  columns, dtypes, cardinalities and list shapes as ``Workflow.load`` gives;
* without them, ``categories/unique.<col>.parquet`` (what ``Workflow.save`` itself writes): the stored pandas index is
  the encoded id, so a column's cardinality is the index's end (environment.md §5.3). Only cardinalities can be
  compared this way; columns without a categories file (hashed, or not Categorify'd) are not checked.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from .features import Column, Features
from .specfile.context import SpecContext
from .workflow import WORKFLOW_PICKLE, WORKFLOW_SCHEMA, read_workflow_features, unreadable_table


def fresh_features(ctx: SpecContext, workflow: Path, locked: Features) -> Features:
    """The workflow's features for :func:`codegen.lock.lock_drift` (``locked``: the spec's columns of the lock,
    used only when the workflow keeps no schema)."""
    workflow = Path(workflow)
    if workflow.is_dir() and (workflow / WORKFLOW_PICKLE).is_file() and not (workflow / WORKFLOW_SCHEMA).is_file():
        return _from_categories(workflow, locked)
    return read_workflow_features(ctx, workflow, allow_import=False)


def _from_categories(workflow: Path, locked: Features) -> Features:
    def checked(c: Column) -> Column:
        card = category_cardinality(workflow / "categories" / f"unique.{c.name}.parquet")
        return c if card is None else replace(c, cardinality=card)

    return replace(locked, categorical=tuple(checked(c) for c in locked.categorical))


def category_cardinality(path: Path) -> int | None:
    """Embedding rows of one Categorify'd column from its ``unique.<col>.parquet``; None without that file."""
    if not path.is_file():
        return None
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
        meta = json.loads((pf.metadata.metadata or {}).get(b"pandas", b"{}"))
        index = (meta.get("index_columns") or [None])[0]
        if isinstance(index, dict) and index.get("kind") == "range":   # ids start..stop-1: rows = stop
            return int(index["stop"])
        if isinstance(index, str):                                     # a stored index column: max id + 1
            values = pf.read(columns=[index]).column(0).to_pylist()
            return int(max(values)) + 1 if values else None
    except Exception as exc:  # a truncated or foreign file: name it instead of a traceback
        raise unreadable_table(path, exc) from None
    return None
