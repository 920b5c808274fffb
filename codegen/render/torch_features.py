"""TrainingJob -> features.json, the data contract of train_torch.py (and of a server that loads its checkpoint).

A slot of a table HugeCTR sizes by ``workspace_size_per_gpu_in_mb`` (no slot_size_array) whose lock has no
cardinality gets ``"cardinality": null, "rows_from": "data"``: the runtime sizes it from the data at start-up
(runtime/row_counts.py) and refuses ids beyond the table's HugeCTR capacity, which its input's ``hugectr_tables``
records. Such a file is format 2; every other stays format 1, as it always was.

An imported script's Parquet reader with one label of ``label_dim`` k > 1 names no label columns: HugeCTR reads them
from the data's ``_metadata.json`` at run time. features.json then lists k labels ``"name": null, "name_from":
"_metadata.json"``, which the trainer names at start-up as HugeCTR does (runtime/label_names.py): format 3.
"""

from __future__ import annotations

import json

from ..features import Features
from ..graph.ir import TrainingJob
from ..model.torch_collection import collection_tables
from ..model.torch_rules import shared_slots
from ..runtime.contract import (FEATURES_FORMAT, HUGECTR_METADATA, LABELS_FROM_METADATA_FORMAT, ROWS_FROM_DATA,
                                ROWS_FROM_DATA_FORMAT)


def _column(name: str, card: int, nnz: int, multi: bool, features: Features, shared: dict[str, str]) -> dict:
    col = features.column(name)
    out: dict = {"name": name, "dtype": col.dtype if col is not None else "int64"}
    if shared.get(name, name) != name:
        out.update(cardinality=0, shares=shared[name])
    elif col is not None and col.cardinality is None:
        # rows from the data; with the slots of size 0 before it that share its rows, scanned with it
        out.update(cardinality=None, rows_from=ROWS_FROM_DATA)
        if by := [n for n, to in shared.items() if to == name and n != name]:
            out["shared_by"] = by
    else:
        out["cardinality"] = int(card)
    out.update(multi_hot=bool(multi), nnz=int(nnz) if multi else 1)
    return out


def _sparse_layout(job: TrainingJob, features: Features) -> list[dict]:
    out = []
    shares = shared_slots(job)
    for s in job.graph.sparse:
        cols = [_column(name, card, nnz, multi, features, shares) for name, card, nnz, multi in
                zip(s.columns, s.cardinalities, s.nnz_per_slot, s.multi_hot or (False,) * s.slot_num)]
        entry = {"input": s.name, "nnz": max(c["nnz"] for c in cols), "columns": cols}
        if any(c.get("rows_from") == ROWS_FROM_DATA for c in cols):
            # What HugeCTR's table holds (hugectr.md §2.8): the rows the data may need at most.
            entry["hugectr_tables"] = [
                {"name": e.name, "max_vocabulary_size": int(e.max_vocabulary_size_global),
                 "workspace_size_per_gpu_in_mb": e.workspace_mb, "gpus": job.gpu_count}
                for e in job.graph.embeddings if e.bottom == s.name] + collection_tables(job, s.name)
        out.append(entry)
    return out


def features_json(job: TrainingJob, features: Features) -> dict:
    """Columns by role, slots in slot order with cardinalities (or rows from the data), the longest list each input
    pads to."""
    g = job.graph
    label_cols = [c for c in features.labels] if len(g.label_names) > 1 else []
    if not label_cols:
        label_cols = list(features.labels[:1])
    labels: list[dict] = [{"name": c.name, "dtype": c.dtype} for c in label_cols]
    if job.labels_from_metadata:        # the label_dim columns HugeCTR's Parquet reader names from the data
        labels = [{"name": None, "dtype": label_cols[0].dtype, "name_from": HUGECTR_METADATA}
                  for _ in range(g.label_dims[0])]
    sparse = _sparse_layout(job, features)
    from_data = any("hugectr_tables" in s for s in sparse)
    fmt = LABELS_FROM_METADATA_FORMAT if job.labels_from_metadata else \
        ROWS_FROM_DATA_FORMAT if from_data else FEATURES_FORMAT
    return {
        "ctrgen_torch_features": fmt,
        "model": job.name,
        "labels": labels,
        "continuous": [{"name": c.name, "dtype": c.dtype} for c in features.continuous][:g.dense_dim],
        "sparse": sparse,
    }


def render_features_json(job: TrainingJob, features: Features) -> str:
    return json.dumps(features_json(job, features), indent=2, ensure_ascii=False) + "\n"
